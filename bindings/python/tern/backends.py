"""torch.backends-style switches and queries over Tern's C functions, with PyTorch's names:

    tern.backends.cpu.get_cpu_capability()          # "AVX2", "AVX512", ...
    tern.backends.cuda.matmul.allow_tf32 = True
    tern.backends.cuda.is_built(); tern.backends.cuda.flash_sdp_enabled()
    tern.backends.cudnn.enabled / allow_tf32 / deterministic / benchmark / benchmark_limit
    tern.backends.mkldnn.is_available(); tern.backends.mkldnn.verbose(1)   (alias: onednn)
    tern.backends.opt_einsum.enabled / strategy
    tern.backends.mha.get_fastpath_enabled() / set_fastpath_enabled(b)

Properties read and write the process-wide values (the flags registry behind `tern info
--flags`); they take effect at the next run of every session that does not override them.
"""
from __future__ import annotations

from . import _lib
from ._errors import InvalidArgument

_l = _lib.lib


def _bool_property(getter, setter, doc):
    return property(lambda self: bool(getter()), lambda self, v: setter(int(bool(v))), doc=doc)


class _Cpu:
    def get_cpu_capability(self) -> str:
        """The vector capability Tern's kernels dispatch to ("DEFAULT", "AVX2", "AVX512", ...)."""
        return _lib.text(_l.tern_cpu_get_capability())


class _CudaMatmul:
    allow_tf32 = _bool_property(_l.tern_cuda_matmul_get_allow_tf32,
                                _l.tern_cuda_matmul_set_allow_tf32, "TF32 in CUDA matmuls")
    allow_fp16_reduced_precision_reduction = _bool_property(
        _l.tern_cuda_matmul_get_allow_fp16_reduced_precision_reduction,
        _l.tern_cuda_matmul_set_allow_fp16_reduced_precision_reduction,
        "fp16 reductions in reduced precision")
    allow_bf16_reduced_precision_reduction = _bool_property(
        _l.tern_cuda_matmul_get_allow_bf16_reduced_precision_reduction,
        _l.tern_cuda_matmul_set_allow_bf16_reduced_precision_reduction,
        "bf16 reductions in reduced precision")


_BLAS = {"default": 0, "cublas": 1, "cublaslt": 2}
_LINALG = {"default": 0, "cusolver": 1, "magma": 2}


def _choice(table, getter, setter, backend=None):
    if backend is not None:
        try:
            code = table[str(backend).lower()]
        except KeyError:
            raise InvalidArgument(f"unknown library {backend!r}; known: {sorted(table)}") from None
        _lib.check(setter(code))
    code = getter()
    return next((k for k, v in table.items() if v == code), str(code))


class _Cuda:
    matmul = _CudaMatmul()

    def is_built(self) -> bool:
        return bool(_l.tern_cuda_is_built())

    def is_available(self) -> bool:
        return bool(_l.tern_cuda_is_available())

    def device_count(self) -> int:
        return int(_l.tern_cuda_device_count())

    def preferred_blas_library(self, backend=None) -> str:
        """Gets (and with an argument, sets) "default" | "cublas" | "cublaslt"."""
        return _choice(_BLAS, _l.tern_cuda_get_preferred_blas_library,
                       _l.tern_cuda_set_preferred_blas_library, backend)

    def preferred_linalg_library(self, backend=None) -> str:
        return _choice(_LINALG, _l.tern_cuda_get_preferred_linalg_library,
                       _l.tern_cuda_set_preferred_linalg_library, backend)

    def _sdp(code):
        def enabled(self) -> bool:
            return bool(_l.tern_sdp_enabled(code))

        def enable(self, on: bool) -> None:
            _lib.check(_l.tern_sdp_enable(code, int(bool(on))))
        return enabled, enable

    math_sdp_enabled, enable_math_sdp = _sdp(0)
    flash_sdp_enabled, enable_flash_sdp = _sdp(1)
    mem_efficient_sdp_enabled, enable_mem_efficient_sdp = _sdp(2)
    cudnn_sdp_enabled, enable_cudnn_sdp = _sdp(3)
    del _sdp


class _Cudnn:
    def is_available(self) -> bool:
        return bool(_l.tern_cudnn_is_available())

    def version(self):
        v = int(_l.tern_cudnn_version())
        return None if v < 0 else v

    enabled = _bool_property(_l.tern_cudnn_get_enabled, _l.tern_cudnn_set_enabled, "use cuDNN")
    allow_tf32 = _bool_property(_l.tern_cudnn_get_allow_tf32, _l.tern_cudnn_set_allow_tf32,
                                "TF32 in cuDNN convolutions")
    deterministic = _bool_property(_l.tern_cudnn_get_deterministic,
                                   _l.tern_cudnn_set_deterministic, "deterministic algorithms")
    benchmark = _bool_property(_l.tern_cudnn_get_benchmark, _l.tern_cudnn_set_benchmark,
                               "benchmark algorithms per shape")

    @property
    def benchmark_limit(self) -> int:
        return int(_l.tern_cudnn_get_benchmark_limit())

    @benchmark_limit.setter
    def benchmark_limit(self, n: int) -> None:
        _lib.check(_l.tern_cudnn_set_benchmark_limit(int(n)))


VERBOSE_OFF, VERBOSE_ON, VERBOSE_ON_CREATION = 0, 1, 2


class _Mkldnn:
    """oneDNN (PyTorch still calls it mkldnn)."""

    VERBOSE_OFF, VERBOSE_ON, VERBOSE_ON_CREATION = 0, 1, 2

    def is_available(self) -> bool:
        return bool(_l.tern_onednn_is_available())

    def set_verbose(self, level: int) -> None:
        """oneDNN's verbose output on stdout: 0 off, 1 each primitive, 2 creation too."""
        _lib.check(_l.tern_onednn_set_verbose(int(level)))

    class verbose:  # noqa: N801 (PyTorch's name): `with tern.backends.mkldnn.verbose(1):`
        def __init__(self, level: int):
            self.level = int(level)

        def __enter__(self):
            _lib.check(_l.tern_onednn_set_verbose(self.level))
            return self

        def __exit__(self, *exc):
            _l.tern_onednn_set_verbose(0)
            return False


class _OptEinsum:
    enabled = _bool_property(_l.tern_opt_einsum_get_enabled, _l.tern_opt_einsum_set_enabled,
                             "pairwise contraction order search in Einsum")

    def is_available(self) -> bool:
        return True

    @property
    def strategy(self) -> str:
        return _lib.text(_l.tern_opt_einsum_get_strategy())

    @strategy.setter
    def strategy(self, s: str) -> None:
        _lib.check(_l.tern_opt_einsum_set_strategy(str(s).encode()))


class _Mha:
    def get_fastpath_enabled(self) -> bool:
        return bool(_l.tern_mha_get_fastpath_enabled())

    def set_fastpath_enabled(self, on: bool) -> None:
        _l.tern_mha_set_fastpath_enabled(int(bool(on)))


class _Available:
    def __init__(self, built, available):
        self._built, self._available = built, available

    def is_built(self) -> bool:
        return bool(self._built())

    def is_available(self) -> bool:
        return bool(self._available())


cpu = _Cpu()
cuda = _Cuda()
cudnn = _Cudnn()
mkldnn = _Mkldnn()
onednn = mkldnn
opt_einsum = _OptEinsum()
mha = _Mha()
mps = _Available(_l.tern_mps_is_built, _l.tern_mps_is_available)
vulkan = _Available(_l.tern_vulkan_is_built, _l.tern_vulkan_is_available)
openmp = _Available(_l.tern_openmp_is_available, _l.tern_openmp_is_available)
openblas = _Available(_l.tern_openblas_is_available, _l.tern_openblas_is_available)
