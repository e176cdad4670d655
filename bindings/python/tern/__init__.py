"""Tern from Python: run ONNX and .tern models on NumPy arrays and PyTorch tensors, no copies.

    import numpy as np, tern
    session = tern.Session(tern.Model("model.onnx"), threads=2)
    x = np.random.rand(1, 3, 48, 192).astype(np.float32)
    out = session.run({session.inputs[0].name: x})        # {name: np.ndarray}
    print({k: v.shape for k, v in out.items()})

The package is pure Python over Tern's C ABI (include/c_api.h) through ctypes: nothing to
compile, so it installs offline with Debian's python3-setuptools. ctypes releases the GIL for
the length of every call into libtern, so Python threads calling Session.run run concurrently
(one session may be shared by many threads).

Memory: inputs are used in place when they are C-contiguous NumPy arrays (others are copied once
into a contiguous array) or objects with __dlpack__ (PyTorch tensors); outputs are NumPy arrays
over Tern's memory whose .base is a tern.Tensor that frees it when the array goes. DLPack works
both ways: tern.from_dlpack(obj) and tern.Tensor.__dlpack__ / __dlpack_device__.

libtern is found through TERN_LIBRARY (a path), the package's folder, the installed prefixes and
ctypes.util.find_library("tern"), then the repository's build/ folder (see tern._lib).
"""
from __future__ import annotations

import contextlib
import enum

from . import _lib, backends
from ._errors import (BackendUnavailable, Cancelled, DeadlineExceeded, InternalError,
                      InvalidArgument, InvalidModel, IOError_ as IOError, OutOfMemory,
                      TernError, Unsupported)
from ._session import Model, RunOptions, Session, ValueInfo, sdp_backend_code
from ._tensor import Tensor, from_dlpack

__version__: str = _lib.text(_lib.lib.tern_version())
library_path: str = _lib.library_path


class SDPBackend(enum.IntEnum):
    """Attention backends, with torch.nn.attention.SDPBackend's names (tern_sdp_backend)."""
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3


@contextlib.contextmanager
def sdpa_kernel(backends):
    """Within the block only the listed attention backends may run (torch's sdpa_kernel): sets
    the process-wide sdp flags and restores them on exit. For one run only, use
    RunOptions(sdp_backends=[...]) instead, which touches no global state."""
    if isinstance(backends, (SDPBackend, int, str)):
        backends = [backends]
    wanted = {sdp_backend_code(b) for b in backends}
    saved = {b: bool(_lib.lib.tern_sdp_enabled(b)) for b in SDPBackend}
    try:
        for b in SDPBackend:
            _lib.check(_lib.lib.tern_sdp_enable(b, int(b in wanted)))
        yield
    finally:
        for b, on in saved.items():
            _lib.lib.tern_sdp_enable(b, int(on))


def set_num_threads(n: int) -> None:
    """Intra-op threads of every session that does not set its own (tern_set_num_threads)."""
    _lib.check(_lib.lib.tern_set_num_threads(int(n)))


def get_num_threads() -> int:
    return int(_lib.lib.tern_get_num_threads())


def set_num_interop_threads(n: int) -> None:
    _lib.check(_lib.lib.tern_set_num_interop_threads(int(n)))


def get_num_interop_threads() -> int:
    return int(_lib.lib.tern_get_num_interop_threads())


def parallel_info() -> str:
    """Thread counts and where they came from (torch.__config__.parallel_info())."""
    return _lib.text(_lib.lib.tern_parallel_info())


def config_show() -> str:
    """The build configuration (torch.__config__.show())."""
    return _lib.text(_lib.lib.tern_config_show())


def use_deterministic_algorithms(on: bool) -> None:
    _lib.check(_lib.lib.tern_use_deterministic_algorithms(int(bool(on))))


def are_deterministic_algorithms_enabled() -> bool:
    return bool(_lib.lib.tern_are_deterministic_algorithms_enabled())


def get_flag(name: str) -> str:
    """A flag's process-wide value as text (`tern info --flags` lists them)."""
    import ctypes
    buf = ctypes.create_string_buffer(4096)
    _lib.check(_lib.lib.tern_flag_get(name.encode(), buf, len(buf)))
    return buf.value.decode()


def set_flag(name: str, value) -> None:
    if isinstance(value, bool):
        value = "true" if value else "false"
    _lib.check(_lib.lib.tern_flag_set(name.encode(), str(value).encode()))


__all__ = [
    "Model", "Session", "RunOptions", "Tensor", "ValueInfo", "from_dlpack", "backends",
    "SDPBackend", "sdpa_kernel", "set_num_threads", "get_num_threads", "set_num_interop_threads",
    "get_num_interop_threads", "parallel_info", "config_show", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "get_flag", "set_flag", "TernError",
    "InvalidArgument", "InvalidModel", "Unsupported", "BackendUnavailable", "OutOfMemory",
    "IOError", "InternalError", "Cancelled", "DeadlineExceeded", "__version__", "library_path",
]
