// Einsum on the CPU: contracts operands pairwise in the order the opt_einsum flags choose
// (ops::einsum_path), each contraction a batched GEMM after moving letters into
// [batch, free, contracted] order. The path is part of the kernel name
// ("gemm.optimal(1,2)(0,3)"), so tests and profiles see the choice.
#include <string>
#include <vector>

#include "backends/cpu/blas_verbose.h"
#include "backends/cpu/cpu_gemm.h"
#include "core/kernel_registry.h"
#include "ops/einsum.h"

namespace tern {

namespace {

struct EinsumKernel {
  ops::EinsumSpec spec;
  ops::EinsumPath path;
};

struct Operand {
  std::string labels;
  std::vector<float> owned;
  const float* data = nullptr;
};

int64_t count_of(const ops::EinsumSpec& s, const std::string& labels) {
  int64_t n = 1;
  for (char c : labels) n *= s.dim[static_cast<int>(c)];
  return n;
}

// dst (labels `to`, a subset of `from`) = src summed over the letters `to` lacks.
void permute_sum(const ops::EinsumSpec& s, const float* src, const std::string& from,
                 const std::string& to, float* dst) {
  const int64_t n = count_of(s, from);
  if (from == to) {  // nothing to move or sum
    std::copy(src, src + n, dst);
    return;
  }
  std::fill(dst, dst + count_of(s, to), 0.0f);
  std::vector<int64_t> stride(from.size(), 0), dims(from.size());
  for (size_t d = 0; d < from.size(); ++d) {
    dims[d] = s.dim[static_cast<int>(from[d])];
    size_t pos = to.find(from[d]);
    if (pos == std::string::npos) continue;
    int64_t st = 1;
    for (size_t e = pos + 1; e < to.size(); ++e) st *= s.dim[static_cast<int>(to[e])];
    stride[d] = st;
  }
  std::vector<int64_t> idx(from.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    dst[off] += src[i];
    for (int d = static_cast<int>(from.size()) - 1; d >= 0; --d) {
      const size_t u = static_cast<size_t>(d);
      off += stride[u];
      if (++idx[u] < dims[u]) break;
      off -= stride[u] * dims[u];
      idx[u] = 0;
    }
  }
}

std::string pick(const std::string& labels, const std::string& a, const std::string& b, bool in_b,
                 const std::string& keep, bool kept) {
  std::string r;
  for (char c : labels) {
    bool ok = (a.find(c) != std::string::npos) && ((b.find(c) != std::string::npos) == in_b) &&
              ((keep.find(c) != std::string::npos) == kept);
    if (ok) r += c;
  }
  return r;
}

// One contraction as a batched GEMM. An operand already in [batch, free, contracted] or
// [batch, contracted, free] order is read in place (the GEMM transposes it), as attention's
// "bhid,bhjd->bhij" has both; others are permuted (and summed over letters no one keeps) first.
// `out`, when given, receives the result if its letters come out as `out_labels`.
Operand contract(const ops::EinsumSpec& s, const Operand& a, const Operand& b,
                 const std::string& keep, const ExecContext& exec, float* out = nullptr,
                 const std::string& out_labels = {}) {
  const std::string batch = pick(a.labels, a.labels, b.labels, true, keep, true);
  const std::string contracted = pick(a.labels, a.labels, b.labels, true, keep, false);
  const std::string free_a = pick(a.labels, a.labels, b.labels, false, keep, true);
  const std::string free_b = pick(b.labels, b.labels, a.labels, false, keep, true);
  const int64_t nb = count_of(s, batch), m = count_of(s, free_a), k = count_of(s, contracted),
                n = count_of(s, free_b);
  std::vector<float> ap, bp;
  const float* pa = a.data;
  const float* pb = b.data;
  bool trans_a = false, trans_b = false;
  if (a.labels == batch + contracted + free_a && a.labels != batch + free_a + contracted) {
    trans_a = true;
  } else if (a.labels != batch + free_a + contracted) {
    ap.resize(static_cast<size_t>(nb * m * k));
    permute_sum(s, a.data, a.labels, batch + free_a + contracted, ap.data());
    pa = ap.data();
  }
  if (b.labels == batch + free_b + contracted && b.labels != batch + contracted + free_b) {
    trans_b = true;
  } else if (b.labels != batch + contracted + free_b) {
    bp.resize(static_cast<size_t>(nb * k * n));
    permute_sum(s, b.data, b.labels, batch + contracted + free_b, bp.data());
    pb = bp.data();
  }
  Operand r;
  r.labels = batch + free_a + free_b;
  float* pc = out && r.labels == out_labels ? out : nullptr;
  if (!pc) {
    r.owned.assign(static_cast<size_t>(nb * m * n), 0.0f);
    pc = r.owned.data();
  } else if (k == 0) {
    std::fill(pc, pc + nb * m * n, 0.0f);
  }
  r.data = pc;
  if (m > 0 && n > 0 && k > 0) {
    std::vector<const float*> as, bs;
    std::vector<float*> cs;
    for (int64_t i = 0; i < nb; ++i) {
      as.push_back(pa + i * m * k);
      bs.push_back(pb + i * k * n);
      cs.push_back(pc + i * m * n);
    }
    const GemmShape g{trans_a, trans_b, m, n, k, trans_a ? m : k, trans_b ? k : n, n};
    BlasVerbose verbose(exec, "Einsum", cpu_gemm_label(g), g, nb);
    cpu_sgemm_batch(g, 1.0f, as.data(), bs.data(), 0.0f, cs.data(), nb, exec.num_threads,
                    exec.deterministic);
  }
  return r;
}

Status run_einsum(const EinsumKernel& e, const KernelArgs& a, const ExecContext& exec) {
  const ops::EinsumSpec& s = e.spec;
  std::vector<Operand> ops(a.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    ops[i].labels = s.inputs[i];
    ops[i].data = a.inputs[i]->data<float>();
  }
  std::vector<bool> alive(ops.size(), true);
  float* y = a.outputs[0]->data<float>();
  bool written = false;  // the last contraction wrote the output in place
  for (size_t step = 0; step < e.path.steps.size(); ++step) {
    const auto& st = e.path.steps[step];
    // Letters still needed: the output's and those of operands not in this step.
    std::string keep = s.output;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (alive[i] && static_cast<int>(i) != st.first && static_cast<int>(i) != st.second) {
        keep += ops[i].labels;
      }
    }
    const bool final_step = step + 1 == e.path.steps.size();
    Operand r = contract(s, ops[static_cast<size_t>(st.first)], ops[static_cast<size_t>(st.second)],
                         keep, exec, final_step ? y : nullptr, s.output);
    written = final_step && r.data == y;
    alive[static_cast<size_t>(st.first)] = alive[static_cast<size_t>(st.second)] = false;
    ops.push_back(std::move(r));
    if (!ops.back().owned.empty()) ops.back().data = ops.back().owned.data();
    alive.push_back(true);
  }
  if (written) return Status::ok();
  const Operand& last = ops.back();
  permute_sum(s, last.data, last.labels, s.output, y);
  return Status::ok();
}

const char* strategy_name(ops::EinsumStrategy st) {
  switch (st) {
    case ops::EinsumStrategy::kLeftToRight:
      return "left_to_right";
    case ops::EinsumStrategy::kGreedy:
      return "greedy";
    case ops::EinsumStrategy::kOptimal:
      return "optimal";
  }
  return "?";
}

Expected<std::unique_ptr<Kernel>> make_einsum(const OpContext& ctx) {
  TERN_ASSIGN_OR_RETURN(std::string eq, ctx.attrs().get_string("equation", ""));
  std::vector<Shape> shapes;
  for (const TensorInfo& t : ctx.inputs) {
    if (!t.present || t.dtype != DType::kFloat32) return unsupported("Einsum: float32 only");
    shapes.push_back(t.shape);
  }
  TERN_ASSIGN_OR_RETURN(ops::EinsumSpec spec, ops::parse_einsum(eq, shapes));
  const ops::EinsumStrategy st =
      ops::einsum_strategy(ctx.flag(FlagId::kOptEinsumEnabled) != 0,
                           ctx.flag(FlagId::kOptEinsumStrategy), spec.inputs.size());
  ops::EinsumPath path = ops::einsum_path(spec, st);
  std::string name = str_cat("gemm.", strategy_name(st), path.describe());
  return make_kernel(name, EinsumKernel{spec, path}, run_einsum);
}

}  // namespace

TERN_REGISTRATION void register_cpu_einsum(KernelRegistry& r) {
  r.add("Einsum", "cpu", DType::kFloat32, make_einsum);
}

}  // namespace tern
