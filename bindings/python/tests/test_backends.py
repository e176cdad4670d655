"""tern.backends and the process-wide settings: every property reads back what was set, and
the C values change with it (read through tern.get_flag, the flags registry)."""
import pytest

import tern


def roundtrip(obj, attr, flag):
    old = getattr(obj, attr)
    try:
        for v in (not old, old):
            setattr(obj, attr, v)
            assert getattr(obj, attr) is v
            assert tern.get_flag(flag) == ("true" if v else "false")
    finally:
        setattr(obj, attr, old)


def test_bool_properties_round_trip():
    roundtrip(tern.backends.cuda.matmul, "allow_tf32", "cuda.matmul.allow_tf32")
    roundtrip(tern.backends.cudnn, "benchmark", "cudnn.benchmark")
    roundtrip(tern.backends.cudnn, "deterministic", "cudnn.deterministic")
    roundtrip(tern.backends.cudnn, "enabled", "cudnn.enabled")
    roundtrip(tern.backends.cudnn, "allow_tf32", "cudnn.allow_tf32")
    roundtrip(tern.backends.opt_einsum, "enabled", "opt_einsum.enabled")


def test_other_settings():
    assert tern.backends.cpu.get_cpu_capability() in (
        "DEFAULT", "NO AVX", "AVX2", "AVX512", "VSX", "Z VECTOR", "SVE256")
    old = tern.backends.cudnn.benchmark_limit
    tern.backends.cudnn.benchmark_limit = 3
    assert tern.backends.cudnn.benchmark_limit == 3
    with pytest.raises(tern.InvalidArgument):
        tern.backends.cudnn.benchmark_limit = -1
    tern.backends.cudnn.benchmark_limit = old
    s = tern.backends.opt_einsum.strategy
    tern.backends.opt_einsum.strategy = "greedy"
    assert tern.backends.opt_einsum.strategy == "greedy"
    with pytest.raises(tern.InvalidArgument) as e:
        tern.backends.opt_einsum.strategy = "fastest"
    assert "fastest" in e.value.message
    tern.backends.opt_einsum.strategy = s
    assert tern.backends.cuda.preferred_blas_library() in ("default", "cublas", "cublaslt")
    assert isinstance(tern.backends.mkldnn.is_available(), bool)
    assert tern.backends.onednn is tern.backends.mkldnn
    assert isinstance(tern.backends.cuda.is_built(), bool)
    fp = tern.backends.mha.get_fastpath_enabled()
    tern.backends.mha.set_fastpath_enabled(not fp)
    assert tern.backends.mha.get_fastpath_enabled() is (not fp)
    tern.backends.mha.set_fastpath_enabled(fp)


def test_threads():
    n, i = tern.get_num_threads(), tern.get_num_interop_threads()
    try:
        tern.set_num_threads(3)
        tern.set_num_interop_threads(2)
        assert tern.get_num_threads() == 3 and tern.get_num_interop_threads() == 2
        assert "3" in tern.parallel_info()
    finally:
        tern.set_num_threads(n)
        tern.set_num_interop_threads(i)
    with pytest.raises(tern.InvalidArgument):
        tern.set_num_interop_threads(0)


def test_sdpa_kernel_restores_the_flags():
    before = {b: tern.backends.cuda.math_sdp_enabled() for b in [0]}
    flash = tern.backends.cuda.flash_sdp_enabled()
    with tern.sdpa_kernel([tern.SDPBackend.MATH]):
        assert tern.backends.cuda.math_sdp_enabled()
        assert not tern.backends.cuda.flash_sdp_enabled()
        assert not tern.backends.cuda.mem_efficient_sdp_enabled()
    with tern.sdpa_kernel("FLASH_ATTENTION"):
        assert not tern.backends.cuda.math_sdp_enabled()
        assert tern.backends.cuda.flash_sdp_enabled()
    assert tern.backends.cuda.flash_sdp_enabled() == flash
    assert tern.backends.cuda.math_sdp_enabled() == before[0]
    with pytest.raises(tern.InvalidArgument):
        with tern.sdpa_kernel(["NOPE"]):
            pass
    opts = tern.RunOptions(sdp_backends=[tern.SDPBackend.MATH], timeout_ms=1000)
    opts.set_flag("sdp.flash_enabled", False)
