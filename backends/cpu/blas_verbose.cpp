#include "backends/cpu/blas_verbose.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace tern {

BlasVerbose::BlasVerbose(const ExecContext& exec, const char* op, const char* kernel,
                         const GemmShape& s, int64_t batch) {
  if (!exec.blas_verbose) return;
  on_ = true;
  op_ = op;
  kernel_ = kernel;
  shape_ = s;
  batch_ = batch;
  threads_ = exec.num_threads;
  t0_ = std::chrono::steady_clock::now();
}

BlasVerbose::~BlasVerbose() {
  if (!on_) return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  // One fprintf per line: lines of concurrent runs do not interleave.
  std::fprintf(stdout,
               "tern_blas_verbose,exec,%s,%s,%c%c,m=%lld,n=%lld,k=%lld,batch=%lld,"
               "threads=%d,%.4f\n",
               op_, kernel_, shape_.trans_a ? 'T' : 'N', shape_.trans_b ? 'T' : 'N',
               static_cast<long long>(shape_.m), static_cast<long long>(shape_.n),
               static_cast<long long>(shape_.k), static_cast<long long>(batch_), threads_, ms);
  std::fflush(stdout);
}

const char* cpu_gemm_label(const GemmShape& s) {
  static const std::string own = std::string("tern:") + cpu_gemm_name();
  if (std::strcmp(cpu_gemm_name(), "openblas") == 0) {
    return s.m == 1 ? "openblas:sgemv" : "openblas:sgemm";
  }
  return own.c_str();
}

}  // namespace tern
