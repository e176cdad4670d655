// QDQ convolutions become QLinearConv: in the QDQ form most quantizers export,
//   x_q -> DequantizeLinear -> Conv(., DequantizeLinear(w_q), [DequantizeLinear(b_q) | b])
//       [-> Relu] -> QuantizeLinear -> y_q
// is one int8 convolution with the requantisation inside, as the QOperator form writes it:
// QLinearConv(x_q, x_scale, x_zero, w_q, w_scale, w_zero, y_scale, y_zero, b_q), with a Relu
// FusedQLinearConv (Tern's own op: the same and an "activation"). Conditions: per-tensor activation
// scales and zero points, weights int8/uint8 quantised per tensor or per output channel (axis 0, no
// blocks), all constant, the source's zero point given (it says the source's type); the bias int32
// with scale x_scale * w_scale and zero point 0, or a float constant quantised so (as the QOperator
// form stores it); the float results read by nothing else. It runs before constant folding, which
// would otherwise turn the weights' DequantizeLinear into float weights.
// The same holds around the other ops of a quantized graph, so that its values stay int8 and a
// float op runs only where nothing quantised can:
// - MatMul of a dequantised activation by constant int8 weights, or by a second dequantised
//   activation (attention's scores and context), becomes QLinearMatMul;
// - Add of two dequantised activations (residuals) or of one and a float32 constant (a bias),
//   with a Relu after it or not, becomes QLinearAdd (ops/qlinear_add.cpp), bit for bit;
// - ops that only move or select elements (Reshape, Transpose, MaxPool...) between a
//   DequantizeLinear and a QuantizeLinear of the same scale and zero point move the int8 values.
#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {
namespace {

bool int8_type(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

// Whether a DequantizeLinear writes float32 (its output_dtype absent or float32; a float16 or
// bfloat16 output would make the float ops after it compute in that type).
bool float32_output(const Node& dq) {
  auto out = dq.attrs.get_int("output_dtype", 0);
  return out && (*out == 0 || *out == static_cast<int64_t>(DType::kFloat32));
}

// A DequantizeLinear node's inputs when they are a per-tensor (or, with `channels` > 0, one per
// channel along axis `axis`) constant scale and zero point; x itself may be anything.
struct Dq {
  const Node* node = nullptr;
  int x = -1, scale = -1, zero = -1;  // value ids (zero -1: absent, i.e. 0)
};
std::optional<Dq> dq_of(PatternView& pv, int v, int64_t channels, int64_t axis, size_t rank) {
  const Node* n = pv.node_at(v, "DequantizeLinear");
  if (!n || n->inputs.size() < 2) return std::nullopt;
  const Graph& g = pv.g;
  const Tensor* s = constant_of(g, n->inputs[1]);
  const int z = n->inputs.size() > 2 ? n->inputs[2] : -1;
  const Tensor* zt = z >= 0 ? constant_of(g, z) : nullptr;
  if (!s || s->dtype() != DType::kFloat32 || (z >= 0 && !zt)) return std::nullopt;
  auto block = n->attrs.get_int("block_size", 0);
  if (!block || *block != 0 || !float32_output(*n)) return std::nullopt;
  if (s->numel() != 1) {
    auto a = n->attrs.get_int("axis", 1);
    if (!a || channels <= 0 || s->rank() != 1 || s->numel() != channels) return std::nullopt;
    const int64_t ax = *a < 0 ? *a + static_cast<int64_t>(rank) : *a;
    if (ax != axis) return std::nullopt;
  }
  if (zt && zt->numel() != s->numel()) return std::nullopt;
  return Dq{n, n->inputs[0], n->inputs[1], z};
}

// Whether node `q` is a QuantizeLinear to int8/uint8 with a constant per-tensor scale and zero
// point (the zero point gives the output's type).
bool quantizes_per_tensor(const Graph& g, const Node& q) {
  if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.inputs.size() < 3 ||
      q.inputs[2] < 0) {
    return false;
  }
  const Tensor* ys = constant_of(g, q.inputs[1]);
  const Tensor* yz = constant_of(g, q.inputs[2]);
  if (!ys || !yz || ys->numel() != 1 || yz->numel() != 1 || ys->dtype() != DType::kFloat32 ||
      !int8_type(yz->dtype())) {
    return false;
  }
  auto out_dtype = q.attrs.get_int("output_dtype", 0);
  return out_dtype && (*out_dtype == 0 || *out_dtype == static_cast<int64_t>(yz->dtype()));
}

// x's DequantizeLinear when per tensor with a constant zero point of an 8-bit type (it says x's
// type: intermediate values may carry no type before shape inference).
std::optional<Dq> source_dq(PatternView& pv, int v) {
  auto d = dq_of(pv, v, 0, 0, 0);
  const Tensor* z = d && d->zero >= 0 ? constant_of(pv.g, d->zero) : nullptr;
  if (!z || z->numel() != 1 || !int8_type(z->dtype())) return std::nullopt;
  return d;
}

// Ops that only move or select elements: on quantised values they give what they give on the
// dequantised ones, quantised alike (MaxPool too: dequantisation keeps the order for a positive
// scale).
bool moves_elements(const Node& n) {
  static const std::set<std::string> ops = {"Reshape",   "Flatten",  "Squeeze",      "Unsqueeze",
                                            "Transpose", "Identity", "DepthToSpace", "SpaceToDepth",
                                            "MaxPool",   "Slice"};
  if (!n.domain.empty() || !ops.count(n.op_type) || n.inputs.empty()) return false;
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    if (n.outputs[i] >= 0) return false;  // MaxPool's Indices
  }
  return true;
}

// Two per-tensor quantisation parameters (scale and zero point values) that are equal.
bool same_qparams(const Graph& g, int s1, int z1, int s2, int z2) {
  const Tensor *a = constant_of(g, s1), *b = constant_of(g, s2);
  const Tensor* za = z1 >= 0 ? constant_of(g, z1) : nullptr;
  const Tensor* zb = z2 >= 0 ? constant_of(g, z2) : nullptr;
  if (!a || !b || !za || !zb || a->numel() != 1 || b->numel() != 1 || za->numel() != 1 ||
      zb->numel() != 1 || a->dtype() != DType::kFloat32 || b->dtype() != DType::kFloat32) {
    return false;
  }
  // Quantising the dequantised value gives it back only for a finite scale whose products
  // with the 8-bit range stay finite.
  const double scale = a->float_at(0);
  return scale == b->float_at(0) && scale > 0 && std::isfinite(static_cast<float>(scale * 256)) &&
         za->dtype() == zb->dtype() && za->int_at(0) == zb->int_at(0);
}

// The bias `bv` of a Conv or Gemm with m output channels as int32 in units of
// x_scale * w_scale[c]: a DequantizeLinear of int32 at that scale (relative 1e-5) with zero point
// 0, or a float32 constant quantised so (as the QOperator form stores it). Returns its value id,
// or -1 when it is neither.
Expected<int> int32_bias(PatternView& pv, int bv, int64_t m, const Tensor& xs, const Tensor& ws,
                         const std::string& name) {
  Graph& g = pv.g;
  auto bdq = dq_of(pv, bv, m, 0, 1);
  const Tensor* b_q = bdq ? constant_of(g, bdq->x) : nullptr;
  const Tensor* b_f = constant_of(g, bv);
  auto unit = [&](int64_t c) {
    return static_cast<double>(xs.float_at(0)) * ws.float_at(ws.numel() == 1 ? 0 : c);
  };
  if (b_q && b_q->dtype() == DType::kInt32 && b_q->numel() == m) {
    const Tensor* bs = constant_of(g, bdq->scale);
    const Tensor* bz = bdq->zero >= 0 ? constant_of(g, bdq->zero) : nullptr;
    for (int64_t c = 0; c < m; ++c) {
      const double want = unit(c), got = bs->float_at(bs->numel() == 1 ? 0 : c);
      if (std::fabs(got - want) > 1e-5 * std::fabs(want) ||
          (bz && bz->int_at(bz->numel() == 1 ? 0 : c) != 0)) {
        return -1;
      }
    }
    return bdq->x;
  }
  if (!b_f || b_f->dtype() != DType::kFloat32 || b_f->numel() != m) return -1;
  TERN_ASSIGN_OR_RETURN(Tensor b32, Tensor::allocate(DType::kInt32, {m}));
  for (int64_t c = 0; c < m; ++c) {
    const double r = std::nearbyint(b_f->float_at(c) / unit(c));
    if (!(std::fabs(r) < 2147483647.0)) return -1;
    b32.data<int32_t>()[c] = static_cast<int32_t>(r);
  }
  return add_constant(g, name + "/bias_int32", std::move(b32));
}

// The weights' zero point `wz`, or a new 0 of the weights' type where it is absent.
Expected<int> weight_zero(Graph& g, int wz, DType type, const std::string& name) {
  if (wz >= 0) return wz;
  TERN_ASSIGN_OR_RETURN(Tensor z, Tensor::allocate(type, {}));
  std::memset(z.raw(), 0, z.byte_size());
  return add_constant(g, name + "/w_zero_point", std::move(z));
}

// The QuantizeLinear node qi becomes `fused`, which writes its output; the float op `taken` and
// the Relu between them, where there is one, go: the Relu becomes fused's "activation".
void replace_quantize(PatternView& pv, size_t qi, Node fused, const Node* taken, const Node* relu) {
  if (relu) {
    Attribute a;
    a.kind = Attribute::Kind::kString;
    a.s = "Relu";
    fused.attrs.set("activation", a);
    pv.removed[pv.index_of(relu)] = true;
  }
  pv.removed[pv.index_of(taken)] = true;
  fused.outputs = {pv.g.nodes[qi].outputs[0]};
  pv.g.nodes[qi] = std::move(fused);
}

// DequantizeLinear(a) -> Gemm(., DequantizeLinear(constant int8 W) [, bias]) -> QuantizeLinear with
// alpha 1, beta 1 and A not transposed: QLinearMatMul by W as [K, N] (transposed once where
// transB), FusedQLinearMatMul with the bias as int32. Returns whether it fused.
Expected<bool> fuse_qdq_gemm(PatternView& pv, size_t qi, Node& gemm) {
  Graph& g = pv.g;
  Node& q = g.nodes[qi];
  auto attr_f = [&](const char* a) { return gemm.attrs.get_float(a, 1.0f); };
  auto attr_i = [&](const char* a) { return gemm.attrs.get_int(a, 0); };
  auto alpha = attr_f("alpha"), beta = attr_f("beta");
  auto trans_a = attr_i("transA"), trans_b = attr_i("transB");
  if (!alpha || !beta || !trans_a || !trans_b || *alpha != 1.0f || *trans_a != 0 ||
      gemm.inputs.size() < 2) {
    return false;
  }
  auto adq = source_dq(pv, gemm.inputs[0]);
  const Node* wn = pv.node_at(gemm.inputs[1], "DequantizeLinear");
  const Tensor* w_q = wn && !wn->inputs.empty() ? constant_of(g, wn->inputs[0]) : nullptr;
  if (!adq || !w_q || w_q->rank() != 2 || !int8_type(w_q->dtype())) return false;
  const bool tb = *trans_b != 0;
  const int64_t k = w_q->shape()[tb ? 1 : 0], n = w_q->shape()[tb ? 0 : 1];
  auto wdq = dq_of(pv, gemm.inputs[1], n, tb ? 0 : 1, 2);
  if (!wdq) return false;
  const std::string name = gemm.name.empty() ? q.name : gemm.name;
  int bias = -1;
  const int bv = gemm.inputs.size() > 2 ? gemm.inputs[2] : -1;
  if (bv >= 0) {
    // One value per column: [N] or [1, N].
    const Tensor* bt = constant_of(g, bv);
    const Node* bn = bt ? nullptr : pv.node_at(bv, "DequantizeLinear");
    if (bn) bt = constant_of(g, bn->inputs[0]);
    if (*beta != 1.0f || !bt || bt->numel() != n || (bt->rank() == 2 && bt->shape()[0] != 1) ||
        bt->rank() > 2) {
      return false;
    }
    TERN_ASSIGN_OR_RETURN(bias, int32_bias(pv, bv, n, *constant_of(g, adq->scale),
                                           *constant_of(g, wdq->scale), name));
    if (bias < 0) return false;
  }
  int w = wn->inputs[0];
  if (tb) {
    const Tensor& src = *constant_of(g, w);
    TERN_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(src.dtype(), {k, n}));
    const auto* from = static_cast<const uint8_t*>(src.raw());
    auto* to = static_cast<uint8_t*>(t.raw());
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) to[c * n + r] = from[r * k + c];
    w = add_constant(g, name + "/weights_kn", std::move(t));
  }
  TERN_ASSIGN_OR_RETURN(const int wz, weight_zero(g, wdq->zero, constant_of(g, w)->dtype(), name));
  Node fused;
  fused.name = name;
  fused.op_type = bias >= 0 ? "FusedQLinearMatMul" : "QLinearMatMul";
  fused.inputs = {adq->x, adq->scale, adq->zero, w, wdq->scale, wz, q.inputs[1], q.inputs[2]};
  if (bias >= 0) fused.inputs.push_back(bias);
  replace_quantize(pv, qi, std::move(fused), &gemm, nullptr);
  return true;
}

}  // namespace

Status fuse_qdq_add(Graph& g, OptimizerReport* report) {
  // (no QDQ in a selective build without it)
  if (!op_built(OptOp::kDequantizeLinear)) return Status::ok();
  if (!op_built("QLinearAdd")) return Status::ok();  // a selective build without it
  PatternView pv{g};
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    Node& q = g.nodes[qi];
    if (pv.removed[qi] || !quantizes_per_tensor(g, q)) continue;
    const int v = q.inputs[0];
    Node* relu = pv.node_at(v, "Relu");
    if (relu && !pv.only(v, &q)) continue;
    const int sum = relu ? relu->inputs[0] : v;
    Node* add = pv.node_at(sum, "Add");
    if (!add || add->inputs.size() != 2 || !pv.only(sum, relu ? relu : &q)) continue;
    // Both operands dequantised per tensor, or one of them a float32 constant (a bias).
    std::optional<Dq> da = source_dq(pv, add->inputs[0]), db = source_dq(pv, add->inputs[1]);
    auto float_constant = [&](int id) {
      const Tensor* t = constant_of(g, id);
      return t && t->dtype() == DType::kFloat32;
    };
    std::vector<int> operands;
    if (da && db) {
      operands = {da->x, da->scale, da->zero, db->x, db->scale, db->zero};
    } else if (da && float_constant(add->inputs[1])) {
      operands = {da->x, da->scale, da->zero, add->inputs[1], -1, -1};
    } else if (db && float_constant(add->inputs[0])) {
      operands = {db->x, db->scale, db->zero, add->inputs[0], -1, -1};
    } else {
      continue;
    }
    Node fused;
    fused.name = add->name.empty() ? q.name : add->name;
    fused.op_type = "QLinearAdd";
    fused.inputs = operands;
    fused.inputs.push_back(q.inputs[1]);
    fused.inputs.push_back(q.inputs[2]);
    replace_quantize(pv, qi, std::move(fused), add, relu);
    ++report->qdq_adds_fused;
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

Status fold_qdq_moves(Graph& g, OptimizerReport* report) {
  // (no QDQ in a selective build without it)
  if (!op_built(OptOp::kDequantizeLinear)) return Status::ok();
  PatternView pv{g};
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    Node& q = g.nodes[qi];
    if (pv.removed[qi] || !quantizes_per_tensor(g, q)) continue;
    // Back from the QuantizeLinear through ops that move elements, each read only by the next,
    // to a DequantizeLinear of the same scale and zero point.
    std::vector<Node*> chain;
    const Node* reader = &q;
    int v = q.inputs[0];
    const Node* dq = nullptr;
    while (v >= 0) {
      const int p = pv.producers[static_cast<size_t>(v)];
      if (p < 0 || pv.removed[static_cast<size_t>(p)]) break;
      Node& n = g.nodes[static_cast<size_t>(p)];
      if (n.op_type == "DequantizeLinear" && n.domain.empty()) {
        dq = &n;
        break;
      }
      if (!moves_elements(n) || !pv.only(v, reader)) break;
      chain.push_back(&n);
      reader = &n;
      v = n.inputs[0];
    }
    if (!dq || chain.empty() || dq->inputs.size() < 3) continue;
    auto block = dq->attrs.get_int("block_size", 0);
    if (!block || *block != 0 || !float32_output(*dq) ||
        !same_qparams(g, dq->inputs[1], dq->inputs[2], q.inputs[1], q.inputs[2])) {
      continue;
    }
    // The chain now moves the quantised values: it reads the DequantizeLinear's input and writes
    // the QuantizeLinear's output; its inner values take the quantised type.
    const DType type = constant_of(g, q.inputs[2])->dtype();
    chain.back()->inputs[0] = dq->inputs[0];
    for (size_t i = 1; i < chain.size(); ++i) {
      g.values[static_cast<size_t>(chain[i]->outputs[0])].type.dtype = type;
    }
    chain.front()->outputs[0] = q.outputs[0];
    pv.removed[qi] = true;
    ++report->qdq_moves_folded;
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

Status fuse_qdq_matmul(Graph& g, OptimizerReport* report) {
  // (no QDQ in a selective build without it)
  if (!op_built(OptOp::kDequantizeLinear)) return Status::ok();
  if (!op_built("QLinearMatMul")) return Status::ok();  // a selective build without it
  PatternView pv{g};
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    Node& q = g.nodes[qi];
    if (pv.removed[qi] || !quantizes_per_tensor(g, q)) continue;
    if (Node* gemm = pv.node_at(q.inputs[0], "Gemm");
        gemm && pv.only(q.inputs[0], &q) && op_built("FusedQLinearMatMul")) {
      TERN_ASSIGN_OR_RETURN(bool fused, fuse_qdq_gemm(pv, qi, *gemm));
      report->qdq_matmuls_fused += fused;
      continue;
    }
    Node* mm = pv.node_at(q.inputs[0], "MatMul");
    if (!mm || !pv.only(q.inputs[0], &q) || mm->inputs.size() != 2) continue;
    auto adq = source_dq(pv, mm->inputs[0]);
    if (!adq) continue;
    const Node* wn = pv.node_at(mm->inputs[1], "DequantizeLinear");
    const Tensor* w_q = wn && !wn->inputs.empty() ? constant_of(g, wn->inputs[0]) : nullptr;
    if (!w_q) {
      // Activation x activation (attention's scores and context): B per tensor too.
      auto bdq = source_dq(pv, mm->inputs[1]);
      if (!bdq) continue;
      Node fused;
      fused.name = mm->name.empty() ? q.name : mm->name;
      fused.op_type = "QLinearMatMul";
      fused.inputs = {adq->x,     adq->scale, adq->zero,   bdq->x,
                      bdq->scale, bdq->zero,  q.inputs[1], q.inputs[2]};
      replace_quantize(pv, qi, std::move(fused), mm, nullptr);
      ++report->qdq_matmuls_fused;
      continue;
    }
    if (w_q->rank() != 2 || !int8_type(w_q->dtype())) continue;
    // B's scale per tensor or per column (axis 1 of [K, N]); its zero point given or 0.
    auto wdq = dq_of(pv, mm->inputs[1], w_q->shape()[1], 1, 2);
    if (!wdq) continue;
    TERN_ASSIGN_OR_RETURN(const int wz, weight_zero(g, wdq->zero, w_q->dtype(), mm->name));
    Node fused;
    fused.name = mm->name.empty() ? q.name : mm->name;
    fused.op_type = "QLinearMatMul";
    fused.inputs = {adq->x,     adq->scale, adq->zero,   wn->inputs[0],
                    wdq->scale, wz,         q.inputs[1], q.inputs[2]};
    replace_quantize(pv, qi, std::move(fused), mm, nullptr);
    ++report->qdq_matmuls_fused;
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

Status fuse_qdq_conv(Graph& g, OptimizerReport* report) {
  // (no QDQ in a selective build without it)
  if (!op_built(OptOp::kDequantizeLinear)) return Status::ok();
  PatternView pv{g};
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    Node& q = g.nodes[qi];
    if (pv.removed[qi] || !quantizes_per_tensor(g, q)) continue;
    // Conv [-> Relu] -> here.
    int v = q.inputs[0];
    Node* relu = pv.node_at(v, "Relu");
    if (relu && !pv.only(v, &q)) continue;
    const int conv_out = relu ? relu->inputs[0] : v;
    Node* conv = pv.node_at(conv_out, "Conv");
    if (!conv || !pv.only(conv_out, relu ? relu : &q) || conv->inputs.size() < 2) continue;
    if (!op_built(relu ? "FusedQLinearConv" : "QLinearConv")) continue;
    const Tensor* w_q = nullptr;
    auto xdq = dq_of(pv, conv->inputs[0], 0, 0, 0);
    if (!xdq) continue;
    const int wv = conv->inputs[1];
    const Node* wn = pv.node_at(wv, "DequantizeLinear");
    if (!wn || wn->inputs.empty() || !(w_q = constant_of(g, wn->inputs[0])) || w_q->rank() < 3) {
      continue;
    }
    const int64_t m = w_q->shape()[0];
    auto wdq = dq_of(pv, wv, m, 0, w_q->rank());
    const Tensor* xs = constant_of(g, xdq->scale);
    const Tensor* xz = xdq->zero >= 0 ? constant_of(g, xdq->zero) : nullptr;
    if (!wdq || !int8_type(w_q->dtype()) || xs->numel() != 1 || (xz && xz->numel() != 1) ||
        (xz && !int8_type(xz->dtype()))) {
      continue;
    }
    // Types now: add_constant below may move the values (and the tensors they hold). x's type
    // is its zero point's (intermediate values may carry no type before shape inference).
    if (!xz) continue;
    const DType w_type = w_q->dtype();
    const Tensor* ws = constant_of(g, wdq->scale);
    int bias = -1;
    if (conv->inputs.size() > 2 && conv->inputs[2] >= 0) {
      TERN_ASSIGN_OR_RETURN(bias, int32_bias(pv, conv->inputs[2], m, *xs, *ws, conv->name));
      if (bias < 0) continue;
    }
    TERN_ASSIGN_OR_RETURN(const int wz, weight_zero(g, wdq->zero, w_type, conv->name));
    const int xzv = xdq->zero;
    // The QuantizeLinear node becomes the QLinearConv (its output is y_q); the Conv, the Relu
    // and DequantizeLinears read only here go (dead-node removal takes unread DQs).
    Node fused;
    fused.name = conv->name.empty() ? q.name : conv->name;
    fused.op_type = relu ? "FusedQLinearConv" : "QLinearConv";
    fused.inputs = {xdq->x,     xdq->scale, xzv,         wn->inputs[0],
                    wdq->scale, wz,         q.inputs[1], q.inputs[2]};
    if (bias >= 0) fused.inputs.push_back(bias);
    fused.attrs = conv->attrs;
    replace_quantize(pv, qi, std::move(fused), conv, relu);
    ++report->qdq_convs_fused;
  }
  erase_nodes(g, pv.removed);
  return Status::ok();
}

}  // namespace tern
