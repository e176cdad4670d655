"""TernError and one subclass per tern_status code."""
from __future__ import annotations


class TernError(RuntimeError):
    """A failing call into Tern. `.status` is the tern_status code (an int), `.status_name` its
    name ("TERN_ERR_IO", ...) and `.message` Tern's message (tern_last_error)."""

    status: int = -1
    status_name: str = "TERN_UNKNOWN_STATUS"

    def __init__(self, message: str, status: int | None = None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__(f"{self.status_name}: {message}")


class InvalidArgument(TernError, ValueError):
    status, status_name = 1, "TERN_ERR_INVALID_ARGUMENT"


class InvalidModel(TernError):
    status, status_name = 2, "TERN_ERR_INVALID_MODEL"


class Unsupported(TernError):
    status, status_name = 3, "TERN_ERR_UNSUPPORTED"


class BackendUnavailable(TernError):
    status, status_name = 4, "TERN_ERR_BACKEND_UNAVAILABLE"


class OutOfMemory(TernError, MemoryError):
    status, status_name = 5, "TERN_ERR_OUT_OF_MEMORY"


class IOError_(TernError, OSError):
    status, status_name = 6, "TERN_ERR_IO"


IOError_.__name__ = IOError_.__qualname__ = "IOError"


class InternalError(TernError):
    status, status_name = 7, "TERN_ERR_INTERNAL"


class Cancelled(TernError):
    status, status_name = 8, "TERN_ERR_CANCELLED"


class DeadlineExceeded(TernError, TimeoutError):
    status, status_name = 9, "TERN_ERR_DEADLINE_EXCEEDED"


_BY_STATUS = {c.status: c for c in (InvalidArgument, InvalidModel, Unsupported,
                                    BackendUnavailable, OutOfMemory, IOError_, InternalError,
                                    Cancelled, DeadlineExceeded)}


def error_for(status: int, message: str) -> TernError:
    cls = _BY_STATUS.get(status)
    return cls(message) if cls else TernError(message, status)
