// Convolutions and pooling on CUDA. Conv and FusedConv run on cuDNN when cudnn.enabled (math
// type by cudnn.allow_tf32; algorithms by cuDNN's heuristic, or timed per shape when
// cudnn.benchmark, trying cudnn.benchmark_limit of them; deterministic ones only when
// cudnn.deterministic or deterministic_algorithms) and on Tern's direct kernel otherwise; the bias,
// residual and activations of FusedConv run in one epilogue kernel after it. ConvTranspose and
// the pools run on Tern's kernels.
#include <map>
#include <mutex>
#include <tuple>

#include "backends/cuda/ops/cuda_ops.h"
#include "core/kernel_registry.h"
#include "ops/common/device_ops.h"
#include "ops/conv_transpose.h"
#include "ops/fused_conv.h"

namespace tern::cuda {

namespace {

Window3 window3(const ops::Window& w3, const Shape& x) {
  Window3 r;
  r.n = x[0];
  r.c = x[1];
  for (size_t d = 0; d < 3; ++d) {
    r.in[d] = w3.in[d];
    r.out[d] = w3.out[d];
    r.k[d] = w3.kernel[d];
    r.stride[d] = w3.strides[d];
    r.pad[d] = w3.pads_begin[d];
    r.pad_end[d] = w3.pads_end[d];
    r.dil[d] = w3.dilations[d];
  }
  return r;
}

Expected<ActChain> epilogue_chain(const std::vector<ops::FusedStep>& ep, const OpContext& ctx) {
  ActChain c;
  if (ep.size() > static_cast<size_t>(kMaxActs)) {
    return unsupported(ctx.where, ": more than ", kMaxActs, " fused activations");
  }
  for (const ops::FusedStep& s : ep) {
    ActStep st;
    switch (s.act) {
      case ops::FusedAct::kRelu:
        st.act = Act::kRelu;
        break;
      case ops::FusedAct::kLeakyRelu:
        st.act = Act::kLeakyRelu;
        break;
      case ops::FusedAct::kClip:
        st.act = Act::kClip;
        break;
      case ops::FusedAct::kSigmoid:
        st.act = Act::kSigmoid;
        break;
      case ops::FusedAct::kHardSigmoid:
        st.act = Act::kHardSigmoid;
        break;
      case ops::FusedAct::kHardSwish:
        st.act = Act::kHardSwish;
        break;
      case ops::FusedAct::kTanh:
        st.act = Act::kTanh;
        break;
      case ops::FusedAct::kAffine:
        st.act = Act::kAffine;
        break;
      case ops::FusedAct::kSwish:
        st.act = Act::kSwish;
        break;
    }
    st.p0 = s.params.size() > 0 ? s.params[0] : 0.f;
    st.p1 = s.params.size() > 1 ? s.params[1] : 0.f;
    c.steps[c.n++] = st;
  }
  return c;
}

// cuDNN descriptors of one convolution; destroyed with it.
struct CudnnConv {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;
  ~CudnnConv() {
    // (Destroying a valid descriptor cannot fail in a way left to handle.)
    if (x) (void)cudnnDestroyTensorDescriptor(x);
    if (y) (void)cudnnDestroyTensorDescriptor(y);
    if (w) (void)cudnnDestroyFilterDescriptor(w);
    if (conv) (void)cudnnDestroyConvolutionDescriptor(conv);
  }
};

// Algorithm choices (and their math types) per (shape, flags), so each distinct convolution is
// searched once.
using AlgoKey = std::tuple<std::vector<int64_t>, int, int, int, int>;
struct AlgoChoice {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math;
};
std::mutex g_algo_mu;
std::map<AlgoKey, AlgoChoice> g_algos;

// Gives the descriptor the chosen algorithm's math type (the search may have picked one another
// math type than the descriptor's) and asks cuDNN for that pair's workspace.
Status apply_choice(cudnnHandle_t h, const AlgoChoice& c, CudnnConv& d) {
  TERN_CUDA_CHECK(cudnnSetConvolutionMathType(d.conv, c.math));
  d.algo = c.algo;
  TERN_CUDA_CHECK(
      cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, d.algo, &d.workspace));
  return Status::ok();
}

struct ConvParams {
  ops::FusedConvParams fc;
  Window3 win;
  int64_t m = 0;
  ActChain chain;
  bool epilogue = false;             // bias, residual or activations after the convolution
  std::shared_ptr<CudnnConv> cudnn;  // null: Tern's direct kernel
};

Status setup_cudnn(const OpContext& ctx, ConvParams& p) {
  const ops::ConvParams& c = p.fc.conv;
  const size_t nd = c.x.size() - 2;
  if (nd < 1 || nd > 3) return unsupported(ctx.where, ": cuDNN convolution of ", nd, " dims");
  auto d = std::make_shared<CudnnConv>();
  // cuDNN takes 4-D and 5-D descriptors: a 1-D convolution is a 2-D one of height 1.
  auto dims4 = [&](const Shape& s) {
    std::vector<int> r(s.begin(), s.end());
    if (nd == 1) r.insert(r.begin() + 2, 1);
    return r;
  };
  auto strides_of = [](const std::vector<int>& s) {
    std::vector<int> st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
    return st;
  };
  const std::vector<int> xd = dims4(c.x), yd = dims4(c.y), wd = dims4(c.w);
  TERN_CUDA_CHECK(cudnnCreateTensorDescriptor(&d->x));
  TERN_CUDA_CHECK(cudnnCreateTensorDescriptor(&d->y));
  TERN_CUDA_CHECK(cudnnCreateFilterDescriptor(&d->w));
  TERN_CUDA_CHECK(cudnnCreateConvolutionDescriptor(&d->conv));
  const int rank = static_cast<int>(xd.size());
  TERN_CUDA_CHECK(
      cudnnSetTensorNdDescriptor(d->x, CUDNN_DATA_FLOAT, rank, xd.data(), strides_of(xd).data()));
  TERN_CUDA_CHECK(
      cudnnSetTensorNdDescriptor(d->y, CUDNN_DATA_FLOAT, rank, yd.data(), strides_of(yd).data()));
  TERN_CUDA_CHECK(
      cudnnSetFilterNdDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, rank, wd.data()));
  std::vector<int> pad, stride, dil;
  if (nd == 1) {
    pad.push_back(0);
    stride.push_back(1);
    dil.push_back(1);
  }
  const ops::Window& w = c.win;
  for (size_t i = 0; i < nd; ++i) {
    if (w.pads_begin[i] != w.pads_end[i]) {
      return unsupported(ctx.where, ": asymmetric pads (cuDNN pads both sides equally)");
    }
    pad.push_back(static_cast<int>(w.pads_begin[i]));
    stride.push_back(static_cast<int>(w.strides[i]));
    dil.push_back(static_cast<int>(w.dilations[i]));
  }
  TERN_CUDA_CHECK(cudnnSetConvolutionNdDescriptor(d->conv, static_cast<int>(pad.size()), pad.data(),
                                                  stride.data(), dil.data(),
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  TERN_CUDA_CHECK(cudnnSetConvolutionGroupCount(d->conv, static_cast<int>(c.group)));
  const bool tf32 = ctx.flag(FlagId::kCudnnAllowTf32) != 0;
  // FMA math keeps float32 convolutions off the TF32 tensor cores.
  TERN_CUDA_CHECK(cudnnSetConvolutionMathType(d->conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  const bool deterministic =
      ctx.flag(FlagId::kCudnnDeterministic) || ctx.flag(FlagId::kDeterministicAlgorithms);
  const bool benchmark = ctx.flag(FlagId::kCudnnBenchmark) != 0;
  const int limit = static_cast<int>(ctx.flag(FlagId::kCudnnBenchmarkLimit));
  std::vector<int64_t> shape_key = c.x;
  shape_key.insert(shape_key.end(), c.w.begin(), c.w.end());
  shape_key.insert(shape_key.end(), pad.begin(), pad.end());
  shape_key.insert(shape_key.end(), stride.begin(), stride.end());
  shape_key.insert(shape_key.end(), dil.begin(), dil.end());
  shape_key.push_back(c.group);
  const AlgoKey key{shape_key, tf32, deterministic, benchmark, benchmark ? limit : 0};
  TERN_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  {
    std::unique_lock<std::mutex> lock(g_algo_mu);
    auto it = g_algos.find(key);
    if (it != g_algos.end()) {
      const AlgoChoice known = it->second;
      lock.unlock();
      TERN_RETURN_IF_ERROR(apply_choice(h, known, *d));
      p.cudnn = std::move(d);
      return Status::ok();
    }
  }
  int max_algos = 0;
  TERN_CUDA_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_algos));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max_algos));
  int found = 0;
  if (benchmark) {
    // Times the candidates on scratch buffers of the real sizes (cuDNN's own search).
    const int want = limit == 0 ? max_algos : std::min(limit, max_algos);
    const size_t xb = numel(c.x) * 4, wb = numel(c.w) * 4, yb = numel(c.y) * 4;
    TERN_ASSIGN_OR_RETURN(auto xm, device_alloc(xb));
    TERN_ASSIGN_OR_RETURN(auto wm, device_alloc(wb));
    TERN_ASSIGN_OR_RETURN(auto ym, device_alloc(yb));
    TERN_ASSIGN_OR_RETURN(auto ws, device_alloc(kGemmWorkspace));
    TERN_CUDA_CHECK(cudaMemsetAsync(xm.get(), 0, xb, stream()));
    TERN_CUDA_CHECK(cudaMemsetAsync(wm.get(), 0, wb, stream()));
    TERN_CUDA_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, d->x, xm.get(), d->w, wm.get(),
                                                           d->conv, d->y, ym.get(), want, &found,
                                                           perf.data(), ws.get(), kGemmWorkspace));
  } else {
    TERN_CUDA_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y, max_algos,
                                                           &found, perf.data()));
  }
  bool chosen = false;
  AlgoChoice choice{};
  for (int i = 0; i < found && !chosen; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& a = perf[static_cast<size_t>(i)];
    if (a.status != CUDNN_STATUS_SUCCESS || a.memory > kGemmWorkspace) continue;
    if (deterministic && a.determinism != CUDNN_DETERMINISTIC) continue;
    // On float32, every math type but FMA may use TF32 tensor cores (DEFAULT_MATH does on
    // Ampere and later).
    if (!tf32 && a.mathType != CUDNN_FMA_MATH) continue;
    choice = AlgoChoice{a.algo, a.mathType};
    chosen = true;
  }
  if (!chosen) {
    return unsupported(ctx.where, ": no cuDNN algorithm fits (deterministic=", deterministic,
                       ", tf32=", tf32, ")");
  }
  TERN_RETURN_IF_ERROR(apply_choice(h, choice, *d));
  if (d->workspace > kGemmWorkspace) {
    return unsupported(ctx.where, ": cuDNN's algorithm needs ", d->workspace,
                       " bytes of workspace");
  }
  {
    std::lock_guard<std::mutex> lock(g_algo_mu);
    g_algos[key] = choice;
  }
  p.cudnn = std::move(d);
  return Status::ok();
}

Status run_conv(const ConvParams& p, const KernelArgs& a, const ExecContext&) {
  const float* x = a.inputs[0]->data<float>();
  const float* w = a.inputs[1]->data<float>();
  const float* b = p.fc.conv.has_bias ? a.inputs[2]->data<float>() : nullptr;
  const float* z = p.fc.has_sum ? a.inputs[3]->data<float>() : nullptr;
  float* y = a.outputs[0]->data<float>();
  const int64_t n = a.outputs[0]->numel();
  if (!p.cudnn) {
    TERN_RETURN_IF_ERROR(
        launched(conv_direct(x, w, b, y, p.win, p.m, p.fc.conv.group, stream()), "conv_direct"));
    if (!z && p.chain.n == 0) return Status::ok();
    return launched(
        bias_act(y, nullptr, z, n, p.m, n / std::max<int64_t>(1, p.win.n * p.m), p.chain, stream()),
        "bias_act");
  }
  TERN_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle());
  const float one = 1.f, zero = 0.f;
  const CudnnConv& d = *p.cudnn;
  TERN_CUDA_CHECK(cudnnConvolutionForward(h, &one, d.x, x, d.w, w, d.conv, d.algo, a.workspace,
                                          d.workspace, &zero, d.y, y));
  if (!p.epilogue) return Status::ok();
  return launched(
      bias_act(y, b, z, n, p.m, n / std::max<int64_t>(1, p.win.n * p.m), p.chain, stream()),
      "bias_act");
}

class ConvKernel final : public Kernel {
 public:
  explicit ConvKernel(ConvParams p) : p_(std::move(p)) {}
  const char* name() const override { return p_.cudnn ? "cudnn" : "cuda_conv_direct"; }
  Status run(const KernelArgs& a, const ExecContext& e) const override {
    return run_conv(p_, a, e);
  }
  size_t workspace_bytes() const override { return p_.cudnn ? p_.cudnn->workspace : 0; }

 private:
  ConvParams p_;
};

Expected<std::unique_ptr<Kernel>> make_conv(const OpContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.inputs[i].dtype != DType::kFloat32) {
      return unsupported(ctx.where, ": the CUDA convolutions take float32");
    }
  }
  ConvParams p;
  TERN_ASSIGN_OR_RETURN(p.fc, ops::parse_conv_or_fused(ctx));
  const ops::ConvParams& c = p.fc.conv;
  if (c.x.size() < 3 || c.x.size() > 5)
    return unsupported(ctx.where, ": CUDA conv of rank ", c.x.size());
  p.win = window3(ops::as_3d(c.win), c.x);
  p.m = c.w[0];
  TERN_ASSIGN_OR_RETURN(p.chain, epilogue_chain(p.fc.epilogue, ctx));
  p.epilogue = c.has_bias || p.fc.has_sum || p.chain.n > 0;
  if (ctx.flag(FlagId::kCudnnEnabled)) {
    Status st = setup_cudnn(ctx, p);
    if (!st.is_ok() && st.code() != Code::kUnsupported) return st;
    // A case cuDNN cannot take (asymmetric pads, ...) runs on the direct kernel.
  }
  return std::unique_ptr<Kernel>(std::make_unique<ConvKernel>(std::move(p)));
}

struct ConvTransposeParams {
  Window3 win;
  int64_t m, group;
  bool bias;
};

Expected<std::unique_ptr<Kernel>> make_conv_transpose(const OpContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.inputs[i].dtype != DType::kFloat32) {
      return unsupported(ctx.where, ": CUDA ConvTranspose takes float32");
    }
  }
  TERN_ASSIGN_OR_RETURN(ops::ConvTransposeParams c, ops::parse_conv_transpose(ctx));
  if (c.x.size() < 3 || c.x.size() > 5) return unsupported(ctx.where, ": rank ", c.x.size());
  ConvTransposeParams p{window3(ops::as_3d(c.win), c.x), c.y[1], c.group, c.has_bias};
  return make_kernel(
      "cuda_conv_transpose", p,
      [](const ConvTransposeParams& q, const KernelArgs& a, const ExecContext&) {
        return launched(
            conv_transpose_direct(a.inputs[0]->data<float>(), a.inputs[1]->data<float>(),
                                  q.bias ? a.inputs[2]->data<float>() : nullptr,
                                  a.outputs[0]->data<float>(), q.win, q.m, q.group, stream()),
            "conv_transpose_direct");
      });
}

struct PoolParams {
  PoolOp op;
  Window3 win;
};

Expected<std::unique_ptr<Kernel>> make_pool(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(ops::PoolSpec spec, ops::device_pool_spec(ctx));
  static const PoolOp kOps[] = {PoolOp::kMax, PoolOp::kAvgExcludePad, PoolOp::kAvgIncludePad,
                                PoolOp::kLp2};
  PoolParams p{kOps[static_cast<int>(spec.mode)],
               window3(ops::as_3d(spec.win), ctx.inputs[0].shape)};
  return make_kernel(
      "cuda_pool", p, [](const PoolParams& q, const KernelArgs& a, const ExecContext&) {
        return launched(
            pool(q.op, a.inputs[0]->data<float>(), a.outputs[0]->data<float>(), q.win, stream()),
            "pool");
      });
}

}  // namespace

}  // namespace tern::cuda

namespace tern {

void register_cuda_conv(KernelRegistry& r) {
  r.add("Conv", "cuda", DType::kFloat32, cuda::make_conv);
  r.add("FusedConv", "cuda", DType::kFloat32, cuda::make_conv);
  r.add("ConvTranspose", "cuda", DType::kFloat32, cuda::make_conv_transpose);
  for (const char* op : {"MaxPool", "AveragePool", "LpPool"}) {
    r.add(op, "cuda", DType::kFloat32, cuda::make_pool);
  }
}

}  // namespace tern
