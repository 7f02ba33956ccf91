"""Finds and loads libtessera.so and declares the C ABI (include/tessera/tessera.h) for ctypes.
The structs here must match the header field for field."""
import ctypes
import os
import pathlib

REQUEST_ID_MAX = 64


class Options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("device", ctypes.c_char_p),
        ("memory_budget", ctypes.c_int64),
        ("gpu_memory_fraction", ctypes.c_double),
        ("max_model_len", ctypes.c_int64),
        ("max_num_seqs", ctypes.c_int64),
        ("max_num_batched_tokens", ctypes.c_int64),
        ("max_queue", ctypes.c_int64),
        ("block_size", ctypes.c_int64),
        ("kv_dtype", ctypes.c_char_p),
        ("prefix_caching", ctypes.c_int32),
        ("memlog", ctypes.c_int32),
        ("sampling", ctypes.c_char_p),
        ("pipeline", ctypes.c_char_p),
    ]


class Sampling(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("temperature", ctypes.c_float),
        ("top_p", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("min_p", ctypes.c_float),
        ("seed", ctypes.c_uint64),
        ("repetition_penalty", ctypes.c_float),
        ("presence_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
        ("max_tokens", ctypes.c_int64),
        ("stop_token_ids", ctypes.POINTER(ctypes.c_int32)),
        ("n_stop_token_ids", ctypes.c_int32),
        ("ignore_eos", ctypes.c_int32),
    ]


class Memory(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("weights_bytes", ctypes.c_int64),
        ("kv_pool_bytes", ctypes.c_int64),
        ("state_pool_bytes", ctypes.c_int64),
        ("activations_peak_bytes", ctypes.c_int64),
        ("host_rss_bytes", ctypes.c_int64),
        ("kv_blocks_used", ctypes.c_int64),
        ("kv_blocks_total", ctypes.c_int64),
        ("state_slots_used", ctypes.c_int64),
        ("state_slots_total", ctypes.c_int64),
    ]


class TokenEvent(ctypes.Structure):
    _fields_ = [
        ("request_id", ctypes.c_char * REQUEST_ID_MAX),
        ("token", ctypes.c_int32),
        ("finished", ctypes.c_int32),
        ("finish_reason", ctypes.c_int),
    ]


_P = ctypes.c_void_p
_I32P = ctypes.POINTER(ctypes.c_int32)
_SIGNATURES = {
    # name: (restype, argtypes)
    "tessera_last_error": (ctypes.c_char_p, []),
    "tessera_last_status": (ctypes.c_int, []),
    "tessera_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "tessera_finish_reason_name": (ctypes.c_char_p, [ctypes.c_int]),
    "tessera_version": (ctypes.c_char_p, []),
    "tessera_options_default": (None, [ctypes.POINTER(Options)]),
    "tessera_sampling_default": (None, [ctypes.POINTER(Sampling)]),
    "tessera_engine_create": (_P, [ctypes.c_char_p, ctypes.POINTER(Options)]),
    "tessera_engine_destroy": (None, [_P]),
    "tessera_vocab_size": (ctypes.c_int32, [_P]),
    "tessera_num_layers": (ctypes.c_int32, [_P]),
    "tessera_memory_snapshot": (ctypes.c_int, [_P, ctypes.POINTER(Memory)]),
    "tessera_prefill": (ctypes.c_int, [_P, _I32P, ctypes.c_int32, ctypes.POINTER(Sampling), _I32P]),
    "tessera_decode_step": (ctypes.c_int, [_P, _I32P]),
    "tessera_get_logits": (ctypes.POINTER(ctypes.c_float), [_P, _I32P]),
    "tessera_reset": (ctypes.c_int, [_P]),
    "tessera_prefill_req": (ctypes.c_int, [_P, ctypes.c_char_p, _I32P, ctypes.c_int32, ctypes.POINTER(Sampling), _I32P]),
    "tessera_decode_step_req": (ctypes.c_int, [_P, ctypes.c_char_p, _I32P]),
    "tessera_finish_req": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "tessera_get_finish_reason": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "tessera_add_request": (ctypes.c_int, [_P, ctypes.c_char_p, _I32P, ctypes.c_int32, ctypes.POINTER(Sampling)]),
    "tessera_step": (ctypes.c_int, [_P, ctypes.POINTER(TokenEvent), ctypes.c_int32, _I32P]),
    "tessera_tokenize": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_int, _I32P, ctypes.c_int32, _I32P]),
    "tessera_detokenize": (ctypes.c_int, [_P, _I32P, ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t,
                                          ctypes.POINTER(ctypes.c_size_t)]),
}


def candidates():
    """Where libtessera.so is looked for, in order: $TESSERA_LIB, next to this package, then the
    repository's build folders (build/ first, then build-* newest first)."""
    env = os.environ.get("TESSERA_LIB")
    if env:
        return [pathlib.Path(env)]
    here = pathlib.Path(__file__).resolve().parent
    found = [here / "libtessera.so"]
    repo = here.parents[1]
    found.append(repo / "build" / "libtessera.so")
    others = [p for p in repo.glob("build*/libtessera.so") if p.parent.name != "build"]
    found += sorted(others, key=lambda p: p.stat().st_mtime, reverse=True)
    return found


def find_library():
    cands = candidates()
    for p in cands:
        if p.is_file():
            return str(p)
    if os.environ.get("TESSERA_LIB"):
        raise OSError(f"TESSERA_LIB={os.environ['TESSERA_LIB']}: no such file")
    raise OSError("libtessera.so not found (set TESSERA_LIB, or build the tessera_capi target); looked at: "
                  + ", ".join(map(str, cands)))


_lib = None


def lib():
    """The loaded library, with every function's signature declared (loaded once)."""
    global _lib
    if _lib is None:
        dll = ctypes.CDLL(find_library())
        for name, (res, args) in _SIGNATURES.items():
            f = getattr(dll, name)
            f.restype = res
            f.argtypes = args
        _lib = dll
    return _lib
