// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool on oneDNN's pooling, for float32
// [N, C, H, W] in the plain or the channel-blocked layout (the planner keeps convolution chains
// blocked through their pooling). A global pool's [N, C, 1, 1] output has the same bytes in both
// layouts, so it is always handed on as plain.
#include <string>

#include "backends/cpu/cpu_capability.h"
#include "backends/cpu/onednn/onednn_common.h"
#include "core/kernel_registry.h"
#include "ops/common/window.h"

namespace tern {
namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class OnednnPool final : public Kernel {
 public:
  const char* name() const override { return name_; }

  static Expected<std::unique_ptr<Kernel>> create(const OpContext& ctx) {
    TERN_RETURN_IF_ERROR(onednn::require_onednn_sizes(ctx));
    const std::string& op = ctx.node->op_type;
    const bool global = op.rfind("Global", 0) == 0;
    const bool is_max = op == "MaxPool" || op == "GlobalMaxPool";
    const Shape& x = ctx.inputs[0].shape;
    if (ctx.inputs[0].dtype != DType::kFloat32 || x.size() < 3 || x.size() > 5) {
      return unsupported("oneDNN pooling here takes float32 [N, C, W] to [N, C, D, H, W]");
    }
    const size_t spatial = x.size() - 2;
    if (ctx.outputs.size() > 1 && ctx.outputs[1].present) {
      return unsupported("MaxPool's Indices output");
    }
    if (ctx.flag(FlagId::kDeterministicAlgorithms) && !is_max) {
      return unsupported("oneDNN average pooling's split depends on the thread count");
    }
    ops::Window w;
    bool include_pad = false, ceil_mode = false;
    if (global) {
      Attributes none;
      TERN_ASSIGN_OR_RETURN(w, ops::forward_window(none, x, Shape(x.begin() + 2, x.end()), false));
    } else {
      TERN_ASSIGN_OR_RETURN(int64_t ceil, ctx.attrs().get_int("ceil_mode", 0));
      TERN_ASSIGN_OR_RETURN(int64_t cip, ctx.attrs().get_int("count_include_pad", 0));
      TERN_ASSIGN_OR_RETURN(int64_t order, ctx.attrs().get_int("storage_order", 0));
      if (order != 0) return unsupported("MaxPool storage_order 1");
      ceil_mode = ceil != 0;
      include_pad = cip != 0;
      TERN_ASSIGN_OR_RETURN(w, ops::forward_window(ctx.attrs(), x, {}, ceil_mode));
    }
    dnnl::memory::dims pad_r;
    for (size_t i = 0; i < spatial; ++i) {
      if (w.dilations[i] != 1) return unsupported("dilated pooling");
      // ceil_mode's extra window reads past the end: express it as more end padding.
      int64_t r = (w.out[i] - 1) * w.strides[i] + w.kernel[i] - w.in[i] - w.pads_begin[i];
      if (r < 0) {
        // The last windows stop short of the input's end (80 rows, 3x3 stride 2: row 79 is never
        // read): no end padding; oneDNN's output size (rounding down) is still ours.
        r = 0;
        if ((w.in[i] + w.pads_begin[i] - w.kernel[i]) / w.strides[i] + 1 != w.out[i]) {
          return unsupported("pooling windows that stop short of the end padding");
        }
      }
      // Windows that reach past the declared end padding (ceil_mode's extra one) count only the
      // cells up to it in ONNX, all of the window in oneDNN; short of it, every window is whole.
      if (r > w.pads_end[i] && !is_max && include_pad) {
        return unsupported("AveragePool ceil_mode with count_include_pad");
      }
      pad_r.push_back(r);
    }
    auto k = std::make_unique<OnednnPool>();
    const int in_block = ctx.inputs[0].block;
    // A global pool writes [N, C, 1, 1]: identical bytes in the blocked and plain layouts.
    const int out_block = global ? in_block : ctx.outputs[0].block;
    Shape y = {x[0], x[1]};
    y.insert(y.end(), w.out.begin(), w.out.end());
    try {
      k->user_src_md_ =
          dnnl::memory::desc(onednn::to_dims(x), dt::f32, onednn::layout_tag(x.size(), in_block));
      k->user_dst_md_ =
          dnnl::memory::desc(onednn::to_dims(y), dt::f32, onednn::layout_tag(y.size(), out_block));
      const dnnl::algorithm a = is_max        ? dnnl::algorithm::pooling_max
                                : include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                              : dnnl::algorithm::pooling_avg_exclude_padding;
      auto make = [&](const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
        auto desc = dnnl::pooling_forward::desc(
            dnnl::prop_kind::forward_inference, a, src, dst, onednn::to_dims(w.strides),
            onednn::to_dims(w.kernel), onednn::to_dims(w.pads_begin), pad_r);
        return dnnl::pooling_forward::primitive_desc(desc, onednn::user_scratchpad_attr(),
                                                     onednn::engine());
      };
      k->src_md_ = k->user_src_md_;
      k->dst_md_ = k->user_dst_md_;
      auto pd = make(k->src_md_, k->dst_md_);
      // Plain [N, C, W] and [N, C, D, H, W] have only oneDNN's plain C++ loops (a 1-D max pool of
      // 64 x 576: 299 us); its JIT kernels take channel blocks, so the pool runs on a blocked copy
      // in the workspace, reordered there and back (the three steps: ~10 us).
      const CpuIsa isa = effective_cpu_isa(ctx.flag(FlagId::kCpuMaxCapability));
      const int blk = isa == CpuIsa::kAvx512 ? 16 : isa == CpuIsa::kAvx2 ? 8 : 0;
      if (blk && in_block == 0 && out_block == 0 &&
          std::string(pd.impl_info_str()).find("jit") == std::string::npos) {
        dnnl::memory::desc bs(onednn::to_dims(x), dt::f32, onednn::layout_tag(x.size(), blk));
        dnnl::memory::desc bd(onednn::to_dims(y), dt::f32, onednn::layout_tag(y.size(), blk));
        auto blocked = make(bs, bd);
        if (std::string(blocked.impl_info_str()).find("jit") != std::string::npos) {
          pd = std::move(blocked);
          k->src_md_ = bs;
          k->dst_md_ = bd;
          k->src_bytes_ = (bs.get_size() + 63) / 64 * 64;  // the blocked output 64-byte aligned
          k->dst_bytes_ = bd.get_size();
          k->to_blocked_ = dnnl::reorder(dnnl::reorder::primitive_desc(
              onednn::engine(), k->user_src_md_, onednn::engine(), bs));
          k->to_plain_ = dnnl::reorder(dnnl::reorder::primitive_desc(
              onednn::engine(), bd, onednn::engine(), k->user_dst_md_));
        }
      }
      k->name_ = onednn::impl_kernel_name(pd.impl_info_str());
      k->prim_ = dnnl::pooling_forward(pd);
      k->args_ = onednn::ArgPool({{DNNL_ARG_SRC, k->src_md_}, {DNNL_ARG_DST, k->dst_md_}},
                                 pd.scratchpad_desc());
    } catch (const dnnl::error& e) {
      return unsupported("oneDNN declined this pooling: ", e.what());
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  size_t workspace_bytes() const override { return src_bytes_ + dst_bytes_; }

  Status run(const KernelArgs& a, const ExecContext&) const override {
    if (src_bytes_ == 0) return args_.execute(prim_, {a.inputs[0]->raw(), a.outputs[0]->raw()});
    uint8_t* src = static_cast<uint8_t*>(a.workspace);
    uint8_t* dst = src + src_bytes_;
    TERN_RETURN_IF_ERROR(
        onednn::run_reorder(to_blocked_, user_src_md_, a.inputs[0]->raw(), src_md_, src));
    TERN_RETURN_IF_ERROR(args_.execute(prim_, {src, dst}));
    return onednn::run_reorder(to_plain_, dst_md_, dst, user_dst_md_, a.outputs[0]->raw());
  }

 private:
  const char* name_ = "onednn";
  dnnl::pooling_forward prim_;
  dnnl::memory::desc user_src_md_, user_dst_md_, src_md_, dst_md_;
  dnnl::reorder to_blocked_, to_plain_;  // plain <-> the blocked copies in the workspace
  size_t src_bytes_ = 0, dst_bytes_ = 0;
  onednn::ArgPool args_;
};

}  // namespace

TERN_REGISTRATION void register_cpu_onednn_pool(KernelRegistry& r) {
  for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}) {
    r.add(op, "cpu", DType::kFloat32, OnednnPool::create);
  }
}

}  // namespace tern
