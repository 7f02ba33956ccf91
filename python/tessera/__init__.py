"""tessera: LLM inference from Python, over libtessera.so's C ABI (ctypes, standard library only).

    import tessera
    with tessera.Engine("model.gguf", device="cpu") as e:
        print(e.generate("Hello", max_tokens=32, temperature=0))
"""
from ._lib import find_library
from .engine import Engine, TokenEvent
from .errors import Status, TesseraError

__all__ = ["Engine", "TokenEvent", "Status", "TesseraError", "find_library", "version"]


def version():
    """The loaded library's version string."""
    from ._lib import lib
    return lib().tessera_version().decode()
