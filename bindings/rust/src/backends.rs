//! The `torch.backends`-style queries and flags, and the generic flag registry behind them.
//! Flags are process-wide (sessions copy them at each run unless their options override them).

use std::os::raw::{c_char, c_int};

use crate::error::{Error, Result, Status};
use crate::{check, cstr, sys, to_cstring};

/// Reads a text value through a (buffer, length) C call, growing the buffer when it is too small.
pub(crate) fn read_flag_buffer(mut call: impl FnMut(*mut c_char, usize) -> sys::tern_status) -> Result<String> {
    let mut len = 64usize;
    loop {
        let mut buf = vec![0 as c_char; len];
        let status = call(buf.as_mut_ptr(), len);
        if status == sys::TERN_OK {
            return Ok(unsafe { cstr(buf.as_ptr()) });
        }
        let err = Error::last(status);
        // "buffer too small": retry larger (values are short; the bound stops a loop).
        if err.status == Status::InvalidArgument && err.message.contains("too small") && len < 1 << 16 {
            len *= 4;
            continue;
        }
        return Err(err);
    }
}

/// One flag of the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagInfo {
    pub name: String,
    /// "bool" | "int" | "enum" | "cpulist"
    pub kind: String,
    pub doc: String,
}

/// Every flag: name, type and doc line.
pub fn flags() -> Result<Vec<FlagInfo>> {
    let n = unsafe { sys::tern_flag_count() };
    (0..n)
        .map(|i| {
            let (mut name, mut kind, mut doc) = (std::ptr::null(), std::ptr::null(), std::ptr::null());
            check(unsafe { sys::tern_flag_info(i, &mut name, &mut kind, &mut doc) })?;
            Ok(unsafe { FlagInfo { name: cstr(name), kind: cstr(kind), doc: cstr(doc) } })
        })
        .collect()
}

/// A flag's global value as text ("true", "4", "auto", ...).
pub fn get_flag(name: &str) -> Result<String> {
    let n = to_cstring("flag name", name)?;
    read_flag_buffer(|buf, len| unsafe { sys::tern_flag_get(n.as_ptr(), buf, len) })
}

/// Sets a flag's global value (checked; bools take true/false/1/0/on/off).
pub fn set_flag(name: &str, value: &str) -> Result<()> {
    let (n, v) = (to_cstring("flag name", name)?, to_cstring("flag value", value)?);
    check(unsafe { sys::tern_flag_set(n.as_ptr(), v.as_ptr()) })
}

fn b(v: c_int) -> bool {
    v != 0
}

/// torch.backends.cpu
pub mod cpu {
    /// "DEFAULT" | "NO AVX" | "AVX2" | "AVX512" | "VSX" | "Z VECTOR" | "SVE256"
    pub fn get_capability() -> String {
        unsafe { crate::cstr(crate::sys::tern_cpu_get_capability()) }
    }
}

pub fn onednn_is_available() -> bool {
    b(unsafe { sys::tern_onednn_is_available() })
}
pub fn openblas_is_available() -> bool {
    b(unsafe { sys::tern_openblas_is_available() })
}
pub fn openmp_is_available() -> bool {
    b(unsafe { sys::tern_openmp_is_available() })
}
pub fn vulkan_is_built() -> bool {
    b(unsafe { sys::tern_vulkan_is_built() })
}
pub fn vulkan_is_available() -> bool {
    b(unsafe { sys::tern_vulkan_is_available() })
}
pub fn mps_is_built() -> bool {
    b(unsafe { sys::tern_mps_is_built() })
}
pub fn mps_is_available() -> bool {
    b(unsafe { sys::tern_mps_is_available() })
}

/// torch.backends.mkl.is_available: false in every build (Tern's GEMMs run on OpenBLAS, its own
/// GEMM and oneDNN); [`unavailable_reason`]`("mkl")` says so.
pub fn mkl_is_available() -> bool {
    b(unsafe { sys::tern_mkl_is_available() })
}
/// torch.backends.nnpack.is_available: false in every build (see [`unavailable_reason`]).
pub fn nnpack_is_available() -> bool {
    b(unsafe { sys::tern_nnpack_is_available() })
}
/// torch.backends.cusparselt.is_available: false in every build (see [`unavailable_reason`]).
pub fn cusparselt_is_available() -> bool {
    b(unsafe { sys::tern_cusparselt_is_available() })
}

/// Why the optional library, backend or feature `name` (torch.backends' module names: "mkl",
/// "nnpack", "cusparselt", "opt_einsum", "mkldnn", "openblas", "openmp", "cuda", "cudnn", "mps",
/// "vulkan", "flash_attention") cannot be used: `Ok(None)` when it can, `Ok(Some(reason))` when
/// not, an error for a name Tern does not know.
pub fn unavailable_reason(name: &str) -> Result<Option<String>> {
    let c = to_cstring("name", name)?;
    let p = unsafe { sys::tern_backend_unavailable_reason(c.as_ptr()) };
    if p.is_null() {
        return Err(Error::new(Status::InvalidArgument, format!("{:?} is not a backend name Tern knows", name)));
    }
    let why = unsafe { cstr(p) };
    Ok(if why.is_empty() { None } else { Some(why) })
}

/// oneDNN verbose output (torch.backends.mkldnn.verbose).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbose {
    Off,
    On,
    OnCreation,
}
impl Verbose {
    fn to_raw(self) -> sys::tern_verbose_level {
        match self {
            Verbose::Off => 0,
            Verbose::On => 1,
            Verbose::OnCreation => 2,
        }
    }
}
pub fn onednn_set_verbose(level: Verbose) -> Result<()> {
    check(unsafe { sys::tern_onednn_set_verbose(level.to_raw()) })
}
/// torch.backends.mkl.verbose for Tern's GEMMs: `On` prints one line on stdout per matrix
/// product a CPU kernel runs (op, library:kernel, shape, threads, milliseconds). `OnCreation` is
/// refused (GEMM calls have no creation step). For one run only, set the run flag
/// "blas.verbose" with [`crate::RunOptions::flag`].
pub fn blas_set_verbose(level: Verbose) -> Result<()> {
    check(unsafe { sys::tern_blas_set_verbose(level.to_raw()) })
}

/// torch.backends.cuda
pub mod cuda {
    use super::b;
    use crate::error::Result;
    use crate::{check, sys};

    pub fn is_built() -> bool {
        b(unsafe { sys::tern_cuda_is_built() })
    }
    pub fn is_available() -> bool {
        b(unsafe { sys::tern_cuda_is_available() })
    }
    pub fn device_count() -> i32 {
        unsafe { sys::tern_cuda_device_count() }
    }
    /// torch.backends.cuda.is_flash_attention_available: a FLASH attention kernel is built and
    /// can run here (the CPU backend's always is).
    pub fn is_flash_attention_available() -> bool {
        b(unsafe { sys::tern_is_flash_attention_available() })
    }

    /// torch.backends.cuda.matmul
    pub mod matmul {
        use super::b;
        use crate::sys;
        pub fn allow_tf32() -> bool {
            b(unsafe { sys::tern_cuda_matmul_get_allow_tf32() })
        }
        pub fn set_allow_tf32(on: bool) {
            unsafe { sys::tern_cuda_matmul_set_allow_tf32(on as i32) }
        }
        pub fn allow_fp16_reduced_precision_reduction() -> bool {
            b(unsafe { sys::tern_cuda_matmul_get_allow_fp16_reduced_precision_reduction() })
        }
        pub fn set_allow_fp16_reduced_precision_reduction(on: bool) {
            unsafe { sys::tern_cuda_matmul_set_allow_fp16_reduced_precision_reduction(on as i32) }
        }
        pub fn allow_bf16_reduced_precision_reduction() -> bool {
            b(unsafe { sys::tern_cuda_matmul_get_allow_bf16_reduced_precision_reduction() })
        }
        pub fn set_allow_bf16_reduced_precision_reduction(on: bool) {
            unsafe { sys::tern_cuda_matmul_set_allow_bf16_reduced_precision_reduction(on as i32) }
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum BlasLibrary {
        Default,
        Cublas,
        Cublaslt,
    }
    pub fn preferred_blas_library() -> BlasLibrary {
        match unsafe { sys::tern_cuda_get_preferred_blas_library() } {
            1 => BlasLibrary::Cublas,
            2 => BlasLibrary::Cublaslt,
            _ => BlasLibrary::Default,
        }
    }
    pub fn set_preferred_blas_library(lib: BlasLibrary) -> Result<()> {
        check(unsafe { sys::tern_cuda_set_preferred_blas_library(lib as i32) })
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum LinalgLibrary {
        Default,
        Cusolver,
        Magma,
    }
    pub fn preferred_linalg_library() -> LinalgLibrary {
        match unsafe { sys::tern_cuda_get_preferred_linalg_library() } {
            1 => LinalgLibrary::Cusolver,
            2 => LinalgLibrary::Magma,
            _ => LinalgLibrary::Default,
        }
    }
    pub fn set_preferred_linalg_library(lib: LinalgLibrary) -> Result<()> {
        check(unsafe { sys::tern_cuda_set_preferred_linalg_library(lib as i32) })
    }
}

/// torch.backends.cudnn
pub mod cudnn {
    use super::b;
    use crate::error::Result;
    use crate::{check, sys};

    pub fn is_available() -> bool {
        b(unsafe { sys::tern_cudnn_is_available() })
    }
    /// None when cuDNN is not built in.
    pub fn version() -> Option<i64> {
        let v = unsafe { sys::tern_cudnn_version() };
        if v < 0 {
            None
        } else {
            Some(v)
        }
    }
    pub fn enabled() -> bool {
        b(unsafe { sys::tern_cudnn_get_enabled() })
    }
    pub fn set_enabled(on: bool) {
        unsafe { sys::tern_cudnn_set_enabled(on as i32) }
    }
    pub fn allow_tf32() -> bool {
        b(unsafe { sys::tern_cudnn_get_allow_tf32() })
    }
    pub fn set_allow_tf32(on: bool) {
        unsafe { sys::tern_cudnn_set_allow_tf32(on as i32) }
    }
    pub fn deterministic() -> bool {
        b(unsafe { sys::tern_cudnn_get_deterministic() })
    }
    pub fn set_deterministic(on: bool) {
        unsafe { sys::tern_cudnn_set_deterministic(on as i32) }
    }
    pub fn benchmark() -> bool {
        b(unsafe { sys::tern_cudnn_get_benchmark() })
    }
    pub fn set_benchmark(on: bool) {
        unsafe { sys::tern_cudnn_set_benchmark(on as i32) }
    }
    pub fn benchmark_limit() -> i32 {
        unsafe { sys::tern_cudnn_get_benchmark_limit() }
    }
    pub fn set_benchmark_limit(limit: i32) -> Result<()> {
        check(unsafe { sys::tern_cudnn_set_benchmark_limit(limit) })
    }
}

/// Scaled-dot-product attention backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdpBackend {
    Math,
    Flash,
    MemEfficient,
    Cudnn,
}

impl SdpBackend {
    pub(crate) fn to_raw(self) -> sys::tern_sdp_backend {
        match self {
            SdpBackend::Math => 0,
            SdpBackend::Flash => 1,
            SdpBackend::MemEfficient => 2,
            SdpBackend::Cudnn => 3,
        }
    }
}

/// torch.backends.cuda.*_sdp_enabled
pub mod sdp {
    use super::{b, SdpBackend};
    use crate::error::Result;
    use crate::{check, cstr, sys};

    pub fn enabled(backend: SdpBackend) -> bool {
        b(unsafe { sys::tern_sdp_enabled(backend.to_raw()) })
    }
    pub fn enable(backend: SdpBackend, on: bool) -> Result<()> {
        check(unsafe { sys::tern_sdp_enable(backend.to_raw(), on as i32) })
    }
    /// Ok(()) when the backend can run attention with these parameters, else Err(reasons).
    pub fn can_use(backend: SdpBackend, params: &sys::tern_sdp_params) -> std::result::Result<(), String> {
        let mut p = *params;
        p.struct_size = std::mem::size_of::<sys::tern_sdp_params>();
        let mut why = vec![0 as std::os::raw::c_char; 1024];
        if unsafe { sys::tern_sdp_can_use(backend.to_raw(), &p, why.as_mut_ptr(), why.len()) } != 0 {
            Ok(())
        } else {
            Err(unsafe { cstr(why.as_ptr()) })
        }
    }
    /// torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp: float16/bfloat16 attention on
    /// the MATH kernel rounds its scores and probabilities to the input's precision.
    pub fn allow_fp16_bf16_reduction_math(on: bool) {
        unsafe { sys::tern_sdp_allow_fp16_bf16_reduction_math(on as i32) }
    }
    pub fn fp16_bf16_reduction_math_allowed() -> bool {
        b(unsafe { sys::tern_sdp_fp16_bf16_reduction_math_allowed() })
    }
}

/// torch.backends.mha
pub mod mha {
    use super::b;
    use crate::sys;
    pub fn fastpath_enabled() -> bool {
        b(unsafe { sys::tern_mha_get_fastpath_enabled() })
    }
    pub fn set_fastpath_enabled(on: bool) {
        unsafe { sys::tern_mha_set_fastpath_enabled(on as i32) }
    }
}

/// torch.backends.opt_einsum
pub mod opt_einsum {
    use super::b;
    use crate::error::Result;
    use crate::{check, cstr, sys, to_cstring};
    /// Always true: the contraction-path search is Tern's own.
    pub fn is_available() -> bool {
        b(unsafe { sys::tern_opt_einsum_is_available() })
    }
    pub fn enabled() -> bool {
        b(unsafe { sys::tern_opt_einsum_get_enabled() })
    }
    pub fn set_enabled(on: bool) {
        unsafe { sys::tern_opt_einsum_set_enabled(on as i32) }
    }
    /// "auto" | "greedy" | "optimal"
    pub fn strategy() -> String {
        unsafe { cstr(sys::tern_opt_einsum_get_strategy()) }
    }
    pub fn set_strategy(s: &str) -> Result<()> {
        let c = to_cstring("strategy", s)?;
        check(unsafe { sys::tern_opt_einsum_set_strategy(c.as_ptr()) })
    }
}

/// torch.use_deterministic_algorithms
pub fn use_deterministic_algorithms(on: bool) -> Result<()> {
    check(unsafe { sys::tern_use_deterministic_algorithms(on as i32) })
}
pub fn are_deterministic_algorithms_enabled() -> bool {
    b(unsafe { sys::tern_are_deterministic_algorithms_enabled() })
}
