// blas.verbose (tern_blas_set_verbose, torch.backends.mkl.verbose): one line on stdout for each
// matrix product a CPU kernel runs, with its shape, the library and kernel that ran it and its
// time. A kernel opens a BlasVerbose around each GEMM call; when the run's ExecContext has
// blas_verbose off it costs one branch and prints nothing.
#pragma once

#include <chrono>
#include <cstdint>

#include "backends/cpu/cpu_gemm.h"
#include "core/kernel.h"

namespace tern {

class BlasVerbose {
 public:
  // `kernel` is "library:kernel" ("openblas:sgemm", "tern:panel_gemm.avx512", ...); `batch` is the
  // number of products of shape s the call computes.
  // `kernel` must outlive the object (static strings, kernel names).
  BlasVerbose(const ExecContext& exec, const char* op, const char* kernel, const GemmShape& s,
              int64_t batch = 1);
  ~BlasVerbose();  // prints the line
  BlasVerbose(const BlasVerbose&) = delete;
  BlasVerbose& operator=(const BlasVerbose&) = delete;
  bool on() const { return on_; }

 private:
  bool on_ = false;
  const char* op_ = "";
  const char* kernel_ = "";
  GemmShape shape_;
  int64_t batch_ = 1;
  int threads_ = 1;
  std::chrono::steady_clock::time_point t0_;
};

// The "library:kernel" label of cpu_sgemm for shape s: "openblas:sgemm", "openblas:sgemv" (one
// row), or "tern:own_sgemm(neon)" where the build has no OpenBLAS.
const char* cpu_gemm_label(const GemmShape& s);

}  // namespace tern
