"""Finds and opens libtern, declares the C functions the package calls, and turns a failing
tern_status into the matching TernError subclass.

libtern is looked for, in order:
  1. the path in the environment variable TERN_LIBRARY (a file; only there when set);
  2. the package's own directory (a libtern.so copied beside __init__.py);
  3. the installed prefixes: sys.prefix/lib, /usr/local/lib, /usr/lib and the multiarch folders
     under them, then ctypes.util.find_library("tern") (ldconfig's cache, LD_LIBRARY_PATH);
  4. the build tree of the repository the package sits in (bindings/python/../../build).
ctypes.CDLL releases the GIL for the length of every foreign call.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import sysconfig
from ctypes import (POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p)

from ._errors import TernError, error_for

ABI_VERSION = 1  # the TERN_ABI_VERSION these declarations follow

_NAMES = ("libtern.so.1", "libtern.so", "libtern.1.dylib", "libtern.dylib")


def _candidates():
    env = os.environ.get("TERN_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for n in _NAMES:
        yield os.path.join(here, n)
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for prefix in dict.fromkeys((sys.prefix, "/usr/local", "/usr")):
        for sub in ("lib", os.path.join("lib", multiarch) if multiarch else None, "lib64"):
            if sub:
                for n in _NAMES:
                    yield os.path.join(prefix, sub, n)
    found = ctypes.util.find_library("tern")
    if found:
        yield found
    build = os.path.join(here, "..", "..", "..", "build")
    for n in _NAMES:
        yield os.path.normpath(os.path.join(build, n))


def _open():
    tried = []
    env_set = bool(os.environ.get("TERN_LIBRARY"))
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    where = "TERN_LIBRARY=" + tried[0] if env_set else ", ".join(tried)
    raise ImportError(f"tern: libtern not found or not loadable; tried {where}. Set TERN_LIBRARY "
                      "to the path of libtern.so, or install Tern (cmake --install).")


lib, library_path = _open()

c_status = c_int
tensor_p = c_void_p
_pp = POINTER(c_void_p)

# name: (restype, argtypes)
_SIGNATURES = {
    "tern_version": (c_char_p, []),
    "tern_abi_version": (c_uint32, []),
    "tern_status_name": (c_char_p, [c_int]),
    "tern_last_error": (c_char_p, []),
    "tern_tensor_create": (c_status, [c_int, POINTER(c_int64), c_size_t, _pp]),
    "tern_tensor_create_from_data": (c_status, [c_int, POINTER(c_int64), c_size_t, c_void_p,
                                                c_size_t, c_void_p, c_void_p, _pp]),
    "tern_tensor_destroy": (None, [c_void_p]),
    "tern_tensor_dtype": (c_int, [c_void_p]),
    "tern_tensor_rank": (c_size_t, [c_void_p]),
    "tern_tensor_shape": (POINTER(c_int64), [c_void_p]),
    "tern_tensor_data": (c_void_p, [c_void_p]),
    "tern_tensor_byte_size": (c_size_t, [c_void_p]),
    "tern_tensor_device": (c_char_p, [c_void_p]),
    "tern_tensor_from_dlpack": (c_status, [c_void_p, _pp]),
    "tern_tensor_to_dlpack": (c_status, [c_void_p, _pp]),
    "tern_tensor_is_read_only": (c_int, [c_void_p]),
    "tern_model_load_file": (c_status, [c_char_p, _pp]),
    "tern_model_load_memory": (c_status, [c_void_p, c_size_t, _pp]),
    "tern_model_save": (c_status, [c_void_p, c_char_p]),
    "tern_model_destroy": (None, [c_void_p]),
    "tern_model_input_count": (c_size_t, [c_void_p]),
    "tern_model_input_name": (c_char_p, [c_void_p, c_size_t]),
    "tern_model_output_count": (c_size_t, [c_void_p]),
    "tern_model_output_name": (c_char_p, [c_void_p, c_size_t]),
    "tern_model_input_info": (c_status, [c_void_p, c_size_t, POINTER(c_int), POINTER(c_size_t),
                                         POINTER(POINTER(c_int64))]),
    "tern_model_output_info": (c_status, [c_void_p, c_size_t, POINTER(c_int), POINTER(c_size_t),
                                          POINTER(POINTER(c_int64))]),
    "tern_session_options_create": (c_status, [_pp]),
    "tern_session_options_destroy": (None, [c_void_p]),
    "tern_session_options_set_backends": (c_status, [c_void_p, c_char_p]),
    "tern_session_options_set_cpu_fallback": (c_status, [c_void_p, c_int]),
    "tern_session_options_set_num_threads": (c_status, [c_void_p, c_int]),
    "tern_session_options_set_num_interop_threads": (c_status, [c_void_p, c_int]),
    "tern_session_options_set_max_memory_bytes": (c_status, [c_void_p, c_uint64]),
    "tern_session_options_set_flag": (c_status, [c_void_p, c_char_p, c_char_p]),
    "tern_run_options_create": (c_status, [_pp]),
    "tern_run_options_destroy": (None, [c_void_p]),
    "tern_run_options_set_flag": (c_status, [c_void_p, c_char_p, c_char_p]),
    "tern_run_options_set_sdp_backends": (c_status, [c_void_p, POINTER(c_int), c_size_t]),
    "tern_run_options_set_deadline_ms": (c_status, [c_void_p, c_int64]),
    "tern_run_options_cancel": (c_status, [c_void_p]),
    "tern_run_options_clear_cancel": (c_status, [c_void_p]),
    "tern_session_create": (c_status, [c_void_p, c_void_p, _pp]),
    "tern_session_run": (c_status, [c_void_p, c_void_p, POINTER(c_char_p), POINTER(c_void_p),
                                    c_size_t, POINTER(c_char_p), c_size_t, POINTER(c_void_p)]),
    "tern_session_destroy": (None, [c_void_p]),
    "tern_set_num_threads": (c_status, [c_int]),
    "tern_get_num_threads": (c_int, []),
    "tern_set_num_interop_threads": (c_status, [c_int]),
    "tern_get_num_interop_threads": (c_int, []),
    "tern_parallel_info": (c_char_p, []),
    "tern_config_show": (c_char_p, []),
    "tern_cpu_get_capability": (c_char_p, []),
    "tern_onednn_is_available": (c_int, []),
    "tern_openblas_is_available": (c_int, []),
    "tern_openmp_is_available": (c_int, []),
    "tern_cuda_is_built": (c_int, []),
    "tern_cuda_is_available": (c_int, []),
    "tern_cuda_device_count": (c_int, []),
    "tern_vulkan_is_built": (c_int, []),
    "tern_vulkan_is_available": (c_int, []),
    "tern_mps_is_built": (c_int, []),
    "tern_mps_is_available": (c_int, []),
    "tern_cuda_matmul_get_allow_tf32": (c_int, []),
    "tern_cuda_matmul_set_allow_tf32": (None, [c_int]),
    "tern_cuda_matmul_get_allow_fp16_reduced_precision_reduction": (c_int, []),
    "tern_cuda_matmul_set_allow_fp16_reduced_precision_reduction": (None, [c_int]),
    "tern_cuda_matmul_get_allow_bf16_reduced_precision_reduction": (c_int, []),
    "tern_cuda_matmul_set_allow_bf16_reduced_precision_reduction": (None, [c_int]),
    "tern_cuda_get_preferred_blas_library": (c_int, []),
    "tern_cuda_set_preferred_blas_library": (c_status, [c_int]),
    "tern_cuda_get_preferred_linalg_library": (c_int, []),
    "tern_cuda_set_preferred_linalg_library": (c_status, [c_int]),
    "tern_sdp_enabled": (c_int, [c_int]),
    "tern_sdp_enable": (c_status, [c_int, c_int]),
    "tern_cudnn_is_available": (c_int, []),
    "tern_cudnn_version": (c_int64, []),
    "tern_cudnn_get_enabled": (c_int, []),
    "tern_cudnn_set_enabled": (None, [c_int]),
    "tern_cudnn_get_allow_tf32": (c_int, []),
    "tern_cudnn_set_allow_tf32": (None, [c_int]),
    "tern_cudnn_get_deterministic": (c_int, []),
    "tern_cudnn_set_deterministic": (None, [c_int]),
    "tern_cudnn_get_benchmark": (c_int, []),
    "tern_cudnn_set_benchmark": (None, [c_int]),
    "tern_cudnn_get_benchmark_limit": (c_int, []),
    "tern_cudnn_set_benchmark_limit": (c_status, [c_int]),
    "tern_mha_get_fastpath_enabled": (c_int, []),
    "tern_mha_set_fastpath_enabled": (None, [c_int]),
    "tern_onednn_set_verbose": (c_status, [c_int]),
    "tern_opt_einsum_get_enabled": (c_int, []),
    "tern_opt_einsum_set_enabled": (None, [c_int]),
    "tern_opt_einsum_get_strategy": (c_char_p, []),
    "tern_opt_einsum_set_strategy": (c_status, [c_char_p]),
    "tern_use_deterministic_algorithms": (c_status, [c_int]),
    "tern_are_deterministic_algorithms_enabled": (c_int, []),
    "tern_flag_get": (c_status, [c_char_p, c_char_p, c_size_t]),
    "tern_flag_set": (c_status, [c_char_p, c_char_p]),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

if lib.tern_abi_version() != ABI_VERSION:
    raise ImportError(f"tern: {library_path} has ABI version {lib.tern_abi_version()}, this "
                      f"package was written for {ABI_VERSION}")


def last_error() -> str:
    return (lib.tern_last_error() or b"").decode("utf-8", "replace")


def check(status: int) -> None:
    """Raises the TernError subclass for a failing status, with this thread's last error."""
    if status != 0:
        raise error_for(status, last_error())


def text(b) -> str:
    return b.decode("utf-8", "replace") if b is not None else ""


__all__ = ["lib", "library_path", "check", "last_error", "text", "TernError"]
