// Attention's K^T written as one Transpose from the [batch, seq, heads, dim] projection,
// perm [0, 2, 3, 1] (PyTorch folds k.transpose(1, 2).transpose(-2, -1) into it), becomes two:
// [0, 2, 1, 3] to [batch, heads, seq, dim], then [0, 1, 3, 2]. The second is the form the mha
// fastpath matches (attention_fusion.h), whose Attention node then reads K in the layout Q and V
// have. nn.MultiheadAttention's export folds the heads into the batch, K [seq, batch * heads,
// dim] with perm [1, 2, 0]: that becomes [1, 0, 2], then [0, 2, 1]. Only where the Transpose feeds
// a MatMul's B whose output goes on to a Softmax (through a scale and a mask): elsewhere the split
// would add a copy.
#include "core/opt/graph_util.h"
#include "core/opt/optimizer.h"

namespace tern {

namespace {

// Whether value v reaches a Softmax through at most a Div/Mul and an Add, each its only reader.
bool leads_to_softmax(const Graph& g, const ValueConsumers& consumers, int v) {
  for (int hops = 0; hops < 3; ++hops) {
    const auto c = consumers[static_cast<size_t>(v)];
    if (c.size() != 1) return false;
    const Node& n = g.nodes[c[0]];
    if (n.op_type == "Softmax") return true;
    if (n.op_type != "Div" && n.op_type != "Mul" && n.op_type != "Add") return false;
    if (n.outputs.empty() || n.outputs[0] < 0) return false;
    v = n.outputs[0];
  }
  return false;
}

}  // namespace

Status split_key_transposes(Graph& g, OptimizerReport* report) {
  if (!op_built(OptOp::kTranspose)) return Status::ok();  // a selective build without it
  const auto consumers = value_consumers(g);
  const size_t count = g.nodes.size();
  for (size_t t = 0; t < count; ++t) {
    Node& tr = g.nodes[t];
    if (tr.op_type != "Transpose" || !tr.domain.empty() || tr.inputs.size() != 1 ||
        tr.outputs.size() != 1 || tr.outputs[0] < 0) {
      continue;
    }
    auto perm = tr.attrs.get_ints("perm");
    if (!perm) continue;
    // The 4-D form, and the 3-D one of PyTorch's nn.MultiheadAttention export, whose heads are
    // folded into the batch: K [seq, batch * heads, dim], perm [1, 2, 0].
    const bool four = *perm == std::vector<int64_t>{0, 2, 3, 1};
    if (!four && *perm != std::vector<int64_t>{1, 2, 0}) continue;
    const auto readers = consumers[static_cast<size_t>(tr.outputs[0])];
    if (readers.size() != 1) continue;
    const Node& mm = g.nodes[readers[0]];
    if (mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.inputs[1] != tr.outputs[0] ||
        mm.outputs.empty() || mm.outputs[0] < 0 || !leads_to_softmax(g, consumers, mm.outputs[0])) {
      continue;
    }
    const int bhsd = g.add_value(g.unused_name(g.value_name(tr.inputs[0]) + "/bhsd"));
    Node first;
    first.name = tr.name + "/heads";
    first.op_type = "Transpose";
    first.inputs = tr.inputs;
    first.outputs = {bhsd};
    Attribute p;
    p.kind = Attribute::Kind::kInts;
    p.ints = four ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{1, 0, 2};
    first.attrs.set("perm", p);
    p.ints = four ? std::vector<int64_t>{0, 1, 3, 2} : std::vector<int64_t>{0, 2, 1};
    Node& second = g.nodes[t];  // (the reference above may move when a node is added)
    second.attrs.set("perm", p);
    second.inputs = {bhsd};
    g.nodes.push_back(std::move(first));
    ++report->key_transposes_split;
  }
  return Status::ok();
}

}  // namespace tern
