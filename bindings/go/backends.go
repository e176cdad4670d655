package tern

/*
#include <stdlib.h>
#include "c_api.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// readText reads a text value through a (buffer, length) call, growing the buffer when the
// library says it is too small.
func readText(f func(*C.char, C.size_t) C.tern_status) (string, error) {
	for size := 64; ; size *= 4 {
		buf := (*C.char)(C.malloc(C.size_t(size)))
		var value string
		err := call(func() C.tern_status {
			st := f(buf, C.size_t(size))
			if st == C.TERN_OK {
				value = C.GoString(buf)
			}
			return st
		})
		C.free(unsafe.Pointer(buf))
		if e, ok := err.(*Error); ok && e.Status == StatusInvalidArgument &&
			strings.Contains(e.Message, "too small") && size < 1<<16 {
			continue
		}
		return value, err
	}
}

// FlagInfo describes one flag of the registry.
type FlagInfo struct {
	Name, Kind, Doc string // Kind: "bool" | "int" | "enum" | "cpulist"
}

// Flags lists every flag.
func Flags() ([]FlagInfo, error) {
	if err := load(); err != nil {
		return nil, err
	}
	n := int(C.tern_flag_count())
	out := make([]FlagInfo, 0, n)
	for i := 0; i < n; i++ {
		var name, kind, doc *C.char
		if err := call(func() C.tern_status { return C.tern_flag_info(C.size_t(i), &name, &kind, &doc) }); err != nil {
			return nil, err
		}
		out = append(out, FlagInfo{C.GoString(name), C.GoString(kind), C.GoString(doc)})
	}
	return out, nil
}

// GetFlag is a flag's global value as text ("true", "4", "auto", ...).
func GetFlag(name string) (string, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return readText(func(buf *C.char, n C.size_t) C.tern_status { return C.tern_flag_get(cn, buf, n) })
}

// SetFlag checks and sets a flag's global value.
func SetFlag(name, value string) error {
	cn, cv := C.CString(name), C.CString(value)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(cv))
	return call(func() C.tern_status { return C.tern_flag_set(cn, cv) })
}

func query(f func() C.int) bool {
	if load() != nil {
		return false
	}
	return f() != 0
}

// CPUCapability is the vector capability the kernels use: "DEFAULT" | "NO AVX" | "AVX2" |
// "AVX512" | "VSX" | "Z VECTOR" | "SVE256" (torch.backends.cpu.get_cpu_capability).
func CPUCapability() string {
	if load() != nil {
		return ""
	}
	return C.GoString(C.tern_cpu_get_capability())
}

func OneDNNIsAvailable() bool   { return query(func() C.int { return C.tern_onednn_is_available() }) }
func OpenBLASIsAvailable() bool { return query(func() C.int { return C.tern_openblas_is_available() }) }
func OpenMPIsAvailable() bool   { return query(func() C.int { return C.tern_openmp_is_available() }) }
func CUDAIsBuilt() bool         { return query(func() C.int { return C.tern_cuda_is_built() }) }
func CUDAIsAvailable() bool     { return query(func() C.int { return C.tern_cuda_is_available() }) }
func VulkanIsBuilt() bool       { return query(func() C.int { return C.tern_vulkan_is_built() }) }
func VulkanIsAvailable() bool   { return query(func() C.int { return C.tern_vulkan_is_available() }) }
func MPSIsBuilt() bool          { return query(func() C.int { return C.tern_mps_is_built() }) }
func MPSIsAvailable() bool      { return query(func() C.int { return C.tern_mps_is_available() }) }

// CUDADeviceCount is the number of CUDA devices (0 without CUDA).
func CUDADeviceCount() int {
	if load() != nil {
		return 0
	}
	return int(C.tern_cuda_device_count())
}

// CUDAMatmulAllowTF32 is torch.backends.cuda.matmul.allow_tf32.
func CUDAMatmulAllowTF32() bool {
	return query(func() C.int { return C.tern_cuda_matmul_get_allow_tf32() })
}
func SetCUDAMatmulAllowTF32(on bool) {
	if load() == nil {
		C.tern_cuda_matmul_set_allow_tf32(cbool(on))
	}
}

// CudnnBenchmark is torch.backends.cudnn.benchmark.
func CudnnBenchmark() bool { return query(func() C.int { return C.tern_cudnn_get_benchmark() }) }
func SetCudnnBenchmark(on bool) {
	if load() == nil {
		C.tern_cudnn_set_benchmark(cbool(on))
	}
}

// CudnnEnabled is torch.backends.cudnn.enabled.
func CudnnEnabled() bool { return query(func() C.int { return C.tern_cudnn_get_enabled() }) }
func SetCudnnEnabled(on bool) {
	if load() == nil {
		C.tern_cudnn_set_enabled(cbool(on))
	}
}

// CudnnDeterministic is torch.backends.cudnn.deterministic.
func CudnnDeterministic() bool {
	return query(func() C.int { return C.tern_cudnn_get_deterministic() })
}
func SetCudnnDeterministic(on bool) {
	if load() == nil {
		C.tern_cudnn_set_deterministic(cbool(on))
	}
}

// MHAFastpathEnabled is torch.backends.mha.get_fastpath_enabled.
func MHAFastpathEnabled() bool {
	return query(func() C.int { return C.tern_mha_get_fastpath_enabled() })
}
func SetMHAFastpathEnabled(on bool) {
	if load() == nil {
		C.tern_mha_set_fastpath_enabled(cbool(on))
	}
}

// UseDeterministicAlgorithms is torch.use_deterministic_algorithms.
func UseDeterministicAlgorithms(on bool) error {
	return call(func() C.tern_status { return C.tern_use_deterministic_algorithms(cbool(on)) })
}
func DeterministicAlgorithmsEnabled() bool {
	return query(func() C.int { return C.tern_are_deterministic_algorithms_enabled() })
}

// MKLIsAvailable is torch.backends.mkl.is_available: false in every build (Tern's GEMMs run on
// OpenBLAS, its own GEMM and oneDNN); UnavailableReason("mkl") says so. Likewise NNPACK and
// cuSPARSELt.
func MKLIsAvailable() bool    { return query(func() C.int { return C.tern_mkl_is_available() }) }
func NNPACKIsAvailable() bool { return query(func() C.int { return C.tern_nnpack_is_available() }) }
func CuSPARSELtIsAvailable() bool {
	return query(func() C.int { return C.tern_cusparselt_is_available() })
}

// OptEinsumIsAvailable is torch.backends.opt_einsum.is_available: true, the contraction-path
// search is Tern's own.
func OptEinsumIsAvailable() bool {
	return query(func() C.int { return C.tern_opt_einsum_is_available() })
}

// FlashAttentionIsAvailable is torch.backends.cuda.is_flash_attention_available: a FLASH
// attention kernel is built and can run here (the CPU backend's always is).
func FlashAttentionIsAvailable() bool {
	return query(func() C.int { return C.tern_is_flash_attention_available() })
}

// UnavailableReason says why the optional library, backend or feature name (torch.backends'
// module names: "mkl", "nnpack", "cusparselt", "opt_einsum", "mkldnn", "openblas", "openmp",
// "cuda", "cudnn", "mps", "vulkan", "flash_attention") cannot be used: "" when it can. An error
// for a name Tern does not know.
func UnavailableReason(name string) (string, error) {
	if err := load(); err != nil {
		return "", err
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	runtime.LockOSThread() // the string is thread-local until the next call on this thread
	defer runtime.UnlockOSThread()
	p := C.tern_backend_unavailable_reason(cn)
	if p == nil {
		return "", &Error{StatusInvalidArgument, fmt.Sprintf("%q is not a backend name Tern knows", name)}
	}
	return C.GoString(p), nil
}

// VerboseLevel is tern_verbose_level.
type VerboseLevel int

const (
	VerboseOff        VerboseLevel = 0
	VerboseOn         VerboseLevel = 1
	VerboseOnCreation VerboseLevel = 2
)

// SetBLASVerbose is torch.backends.mkl.verbose for Tern's GEMMs: VerboseOn prints one line on
// stdout per matrix product a CPU kernel runs (op, library:kernel, shape, threads,
// milliseconds); VerboseOnCreation is refused (GEMM calls have no creation step). For one run
// only, set the run flag "blas.verbose" with RunOptions.SetFlag.
func SetBLASVerbose(level VerboseLevel) error {
	return call(func() C.tern_status { return C.tern_blas_set_verbose(C.tern_verbose_level(level)) })
}

// SdpFp16Bf16ReductionMathAllowed is torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp:
// float16/bfloat16 attention on the MATH kernel rounds its scores and probabilities to the
// input's precision.
func SdpFp16Bf16ReductionMathAllowed() bool {
	return query(func() C.int { return C.tern_sdp_fp16_bf16_reduction_math_allowed() })
}
func SetSdpAllowFp16Bf16ReductionMath(on bool) {
	if load() == nil {
		C.tern_sdp_allow_fp16_bf16_reduction_math(cbool(on))
	}
}
