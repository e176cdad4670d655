#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>

#include "backends/cpu/cpu_affinity.h"
#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/widened_kernel.h"
#include "core/kernel_registry.h"
#include "core/op_registry.h"

#if defined(TERN_HAVE_OPENMP)
#include <omp.h>
#endif
#if defined(TERN_HAVE_OPENBLAS)
#include <cblas.h>
// OpenBLAS's pthreads build starts its worker threads when it loads, and they spin for about
// 2^28 cycles before sleeping. Tern never uses them (OpenBLAS runs at one thread), so they are
// shut down. Weak: other OpenBLAS builds may not export it.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));
#endif
#if defined(TERN_HAVE_ONEDNN)
#include <dnnl.h>
#endif

namespace tern {

namespace {

std::atomic<int> g_last_run_threads{0};
std::atomic<int> g_verbose_applied{-1};
std::string g_onednn_max_isa;  // written once, under the call_once below

#if defined(TERN_HAVE_ONEDNN)
const char* onednn_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_all:
      return "all";
    default:
      return "other";
  }
}

void apply_verbose(int64_t level) {
  if (g_verbose_applied.exchange(static_cast<int>(level)) == level) return;
  dnnl_set_verbose(static_cast<int>(level));  // 0 off, 1 executions, 2 also creation
}
#endif

// Process-wide set-up of the CPU libraries, before any of them computes or reports.
void init_cpu_runtime() {
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(TERN_HAVE_OPENBLAS)
    openblas_set_num_threads(1);
    if (openblas_get_parallel() == 1 && blas_thread_shutdown_) blas_thread_shutdown_();
#endif
#if defined(TERN_HAVE_ONEDNN) && defined(__x86_64__)
    // oneDNN accepts a max ISA once, before its first JIT kernel: give it the cap now.
    const CpuIsa isa = effective_cpu_isa(Flags::global().get(FlagId::kCpuMaxCapability));
    dnnl_cpu_isa_t want = isa == CpuIsa::kAvx512 ? dnnl_cpu_isa_all
                          : isa == CpuIsa::kAvx2 ? dnnl_cpu_isa_avx2
                                                 : dnnl_cpu_isa_sse41;
    if (dnnl_set_max_cpu_isa(want) == dnnl_success) g_onednn_max_isa = onednn_isa_name(want);
    // oneDNN registers each JIT kernel with VTune by default, and its first kernel looks for
    // VTune's collector library: ~45 failed opens along the library path, 0.1 ms of every
    // process's first session. VTune names its collector to the profiled process
    // (INTEL_JIT_PROFILER64/32), and oneDNN's own setting is DNNL_JIT_PROFILE (ONEDNN_ on newer
    // releases): with none of them set there is no profiler to tell, so the look-up is skipped.
    const bool profiler_named =
        std::getenv("INTEL_JIT_PROFILER64") || std::getenv("INTEL_JIT_PROFILER32") ||
        std::getenv("DNNL_JIT_PROFILE") || std::getenv("ONEDNN_JIT_PROFILE");
    if (!profiler_named) dnnl_set_jit_profiling_flags(0);
#endif
  });
}

}  // namespace

CpuBackend::CpuBackend() {
  static std::once_flag once;
  std::call_once(once, [] { register_cpu_kernels(KernelRegistry::global()); });
  init_cpu_runtime();
}

bool CpuBackend::supports_op(const std::string& op_type) const {
  if (Backend::supports_op(op_type)) return true;
  const OpSchema* s = OpRegistry::global().find(op_type);
  return s && s->reference;
}

Expected<std::unique_ptr<Kernel>> CpuBackend::prepare_direct(const OpContext& ctx,
                                                             bool reference) const {
  auto optimised = Backend::prepare(ctx);
  // An optimised kernel may decline a case (a dtype, an attribute); the portable one then runs.
  if (optimised || optimised.status().code() != Code::kUnsupported || !reference) {
    return optimised;
  }
  const OpSchema* s = OpRegistry::global().find(ctx.node->op_type);
  if (!s || !s->reference) return optimised;
  return s->reference(ctx);
}

Expected<std::unique_ptr<Kernel>> CpuBackend::prepare(const OpContext& ctx) const {
  if (!has_half_values(ctx)) return prepare_direct(ctx, true);
  // float16/bfloat16: an optimised kernel of the node's own types, else the node's float32
  // kernel between conversions, else the portable kernel (plain loops over half elements).
  auto optimised = prepare_direct(ctx, false);
  if (optimised || optimised.status().code() != Code::kUnsupported) return optimised;
  // Ops that only move elements copy half elements as they are: their portable kernels copy
  // bytes, which widening would only slow down.
  static const std::set<std::string> moves = {
      "Reshape", "Flatten",      "Squeeze",      "Unsqueeze",     "Identity", "Concat",
      "Split",   "Slice",        "Gather",       "Expand",        "Tile",     "Transpose",
      "Pad",     "DepthToSpace", "SpaceToDepth", "GatherElements"};
  if (moves.count(ctx.node->op_type)) {
    auto portable = prepare_direct(ctx, true);
    if (portable || portable.status().code() != Code::kUnsupported) return portable;
  }
  auto widened =
      prepare_widened(ctx, [this](const OpContext& c) { return prepare_direct(c, true); });
  if (widened || widened.status().code() != Code::kUnsupported) return widened;
  auto portable = prepare_direct(ctx, true);
  if (portable || portable.status().code() != Code::kUnsupported) return portable;
  return unsupported(portable.status().message(),
                     "; through float32: ", widened.status().message());
}

int CpuBackend::conv_layout(const FlagValues& flags, const std::vector<ConvSite>& convs) const {
#if defined(TERN_HAVE_ONEDNN)
  // oneDNN's direct convolutions want channels blocked by the vector width. With deterministic
  // algorithms on, oneDNN's Conv declines and the plain-layout portable kernel runs instead.
  if (flags.on(FlagId::kDeterministicAlgorithms)) return 0;
  const CpuIsa isa = effective_cpu_isa(flags[FlagId::kCpuMaxCapability]);
  const int block = isa == CpuIsa::kAvx512 ? 16 : isa == CpuIsa::kAvx2 ? 8 : 0;
  if (block == 0) return 0;
  // Channels-last where oneDNN's brgemm convolutions beat its blocked direct ones: AVX-512 and
  // dense convolutions (ResNet-18 at one thread: 16.6 ms instead of 20.3). Grouped / depthwise
  // ones keep the blocked layout.
  const int64_t format = flags[FlagId::kCpuConvMemoryFormat];  // auto, blocked, channels_last
  if (format == 2) return kChannelsLast;
  if (format == 1) return block;
  if (block == 16) {
    const bool dense = std::all_of(convs.begin(), convs.end(), [](const ConvSite& c) {
      auto group = c.node->attrs.get_int("group", 1);
      return group && *group == 1;
    });
    if (dense) return kChannelsLast;
  }
  // Channels that are not whole blocks of 8 leave a convolution's activations plain (ShuffleNet's
  // 58, 116): where such convolutions do a quarter of the work (channels in x out x pixels; past
  // the first layer's few input channels), channels-last, where any count is one block
  // (ShuffleNetV2 at one thread: 2.5 ms instead of 4.2 on AVX-512, 2.8 instead of 5.6 on AVX2).
  double work = 0, partial = 0;
  for (const ConvSite& c : convs) {
    if (c.in_channels <= 4 || c.out_channels <= 0 || c.out_pixels <= 0) continue;
    const double w = static_cast<double>(c.in_channels) * static_cast<double>(c.out_channels) *
                     static_cast<double>(c.out_pixels);
    work += w;
    if (c.in_channels % 8 != 0 || c.out_channels % 8 != 0) partial += w;
  }
  if (work > 0 && partial * 4 >= work) return kChannelsLast;
  return block;
#else
  (void)flags;
  (void)convs;
  return 0;
#endif
}

LayoutRole CpuBackend::layout_role(const Node& node) const {
  const std::string& op = node.op_type;
  if (op == "Conv" || op == "FusedConv") return LayoutRole::kConvolution;
  // int8 convolutions keep their activations channels-last: what oneDNN's int8 kernels read
  // (VNNI), and, where those decline (no VNNI), what QConvViaFloat's float32 convolution reads as
  // it is after dequantisation.
  if (op == "QLinearConv" || op == "FusedQLinearConv") return LayoutRole::kConvolution;
  // Per-tensor (de)quantisation and QDQ additions are element-wise on any layout
  // (backends/cpu/kernels/quantize_vec, qlinear_add); a per-axis one declines blocked data and
  // gets it plain.
  if (op == "QuantizeLinear" || op == "DequantizeLinear" || op == "QLinearAdd") {
    return LayoutRole::kElementwise;
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return LayoutRole::kReadsBlocked;
  if (op == "MaxPool" || op == "AveragePool") {
    // oneDNN pools blocked data: 2-D windows without an Indices output or dilations.
    if (node.outputs.size() > 1 && node.outputs[1] >= 0) return LayoutRole::kPlain;
    auto dil = node.attrs.get_ints("dilations", {});
    auto order = node.attrs.get_int("storage_order", 0);
    auto ceil = node.attrs.get_int("ceil_mode", 0);
    auto cip = node.attrs.get_int("count_include_pad", 0);
    if (!dil || !order || !ceil || !cip || *order != 0) return LayoutRole::kPlain;
    if (op == "AveragePool" && *ceil != 0 && *cip != 0) return LayoutRole::kPlain;
    const bool plain_dil = std::all_of(dil->begin(), dil->end(), [](int64_t d) { return d == 1; });
    return plain_dil ? LayoutRole::kKeepsBlock : LayoutRole::kPlain;
  }
  // Per-channel scale and shift: blocked and channels-last rows alike (ops/batch_norm.cpp); the
  // training form's batch statistics read plain rows.
  if (op == "BatchNormalization" || op == "FusedBatchNormalization") {
    auto training = node.attrs.get_int("training_mode", 0);
    return training && *training == 0 ? LayoutRole::kKeepsBlock : LayoutRole::kPlain;
  }
  // Per-channel statistics summed in the block's lanes (backends/cpu/kernels/norm_vec.cpp).
  if (op == "InstanceNormalization" || op == "GroupNormalization") return LayoutRole::kKeepsBlock;
  // The binary kernel has a blocked case for an operand of one value per channel; these others
  // read and write every element in memory order.
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div"};
  static const std::set<std::string> elementwise = {
      "Relu", "Clip", "Sigmoid",  "HardSigmoid", "HardSwish", "LeakyRelu", "Tanh",
      "Elu",  "Selu", "Identity", "Max",         "Min",       "Swish"};
  if (op == "Transpose") {  // NCHW <-> NHWC as runs of blocks (backends/cpu/kernels/data_movement)
    auto perm = node.attrs.get_ints("perm", {});
    if (perm && *perm == std::vector<int64_t>{0, 2, 3, 1}) return LayoutRole::kReadsBlocked;
    if (perm && *perm == std::vector<int64_t>{0, 3, 1, 2}) return LayoutRole::kWritesBlocked;
    return LayoutRole::kPlain;
  }
  if (op == "Concat") {
    auto axis = node.attrs.get_int("axis", 0);
    if (axis && (*axis == 1 || *axis == -3)) return LayoutRole::kJoinsChannels;  // rank 4
    return LayoutRole::kPlain;
  }
  if (binary.count(op)) return LayoutRole::kElementwiseRows;
  if (elementwise.count(op)) return LayoutRole::kElementwise;
  return LayoutRole::kPlain;
}

void CpuBackend::set_num_threads(int n) {
  if (n < 1) n = 1;
#if defined(TERN_HAVE_OPENMP)
  // Per calling thread: OpenMP's pool serves our kernels and oneDNN alike.
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
#endif
}

#if defined(TERN_HAVE_ONEDNN)
bool CpuBackend::prepares_concurrently(const std::string& op_type) const {
  // The ops whose kernels make oneDNN primitives (JIT compilation: over half of a convolution
  // network's session creation) or pack weights. Their factories read the node's context, the
  // kernel registry and the flags, and use the session's weight store (locked) and oneDNN, whose
  // primitive creation is thread-safe.
  static const std::set<std::string> costly = {
      "Conv",          "FusedConv",   "ConvTranspose", "QLinearConv",       "FusedQLinearConv",
      "MatMul",        "FusedMatMul", "Gemm",          "QLinearMatMul",     "FusedQLinearMatMul",
      "MatMulInteger", "MaxPool",     "AveragePool",   "GlobalAveragePool", "GlobalMaxPool"};
  return costly.count(op_type) != 0;
}
#endif

void CpuBackend::begin_run(const FlagValues& flags) {
  g_last_run_threads.store(static_cast<int>(flags[FlagId::kNumThreads]));
  begin_run_affinity(flags);
#if defined(TERN_HAVE_ONEDNN)
  apply_verbose(flags[FlagId::kOnednnVerbose]);
#endif
}

void CpuBackend::end_run(const FlagValues& flags) {
  end_run_affinity();
#if defined(TERN_HAVE_OPENMP)
  // cpu.spin_us 0: nothing may spin after the run. OpenMP's idle workers spin as OMP_WAIT_POLICY /
  // GOMP_SPINCOUNT said at process start (libgomp's default, about 300,000 pauses, is
  // milliseconds), so the calling thread's team is released instead; the next run starts its
  // workers again.
  if (flags[FlagId::kCpuSpinUs] == 0 && flags[FlagId::kNumThreads] > 1) {
    omp_pause_resource_all(omp_pause_soft);
  }
#endif
#if defined(TERN_HAVE_ONEDNN)
  // A run-scoped verbose level lasts for that run only.
  if (flags.source[static_cast<size_t>(FlagId::kOnednnVerbose)] == FlagSource::kRun) {
    apply_verbose(Flags::global().get(FlagId::kOnednnVerbose));
  }
#else
  (void)flags;
#endif
}

const char* cpu_capability() {
  return effective_cpu_capability(Flags::global().get(FlagId::kCpuMaxCapability));
}

CpuThreadReport cpu_thread_report() {
  init_cpu_runtime();
  CpuThreadReport r;
  r.last_run_threads = g_last_run_threads.load();
#if defined(TERN_HAVE_OPENBLAS)
  r.openblas_threads = openblas_get_num_threads();
#endif
#if defined(TERN_HAVE_ONEDNN)
  r.onednn_max_isa = g_onednn_max_isa;
  r.onednn_effective = onednn_isa_name(dnnl_get_effective_cpu_isa());
#endif
  return r;
}

}  // namespace tern
