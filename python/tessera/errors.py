"""Status codes of the C ABI and the exception that carries them."""
import enum


class Status(enum.IntEnum):
    OK = 0
    INVALID_ARGUMENT = 1
    NOT_FOUND = 2
    IO = 3
    UNSUPPORTED = 4
    OUT_OF_MEMORY = 5
    BUSY = 6
    TOO_LARGE = 7
    FINISHED = 8
    INTERNAL = 9


FINISH_REASONS = {0: None, 1: "stop", 2: "length", 3: "cancelled", 4: "error"}


class TesseraError(RuntimeError):
    """A failed call: .status (a Status) and .message (tessera_last_error's text)."""

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            pass
        name = status.name if isinstance(status, Status) else str(status)
        super().__init__(f"{name}: {message}")
        self.status = status
        self.message = message


def check(lib, status):
    """Raises TesseraError for a status other than OK."""
    if status != Status.OK:
        raise TesseraError(status, lib.tessera_last_error().decode("utf-8", "replace"))
