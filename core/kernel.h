// What shape inference and kernels see of one node, and the kernel interface.
// Prepare, then execute: a KernelFactory runs once per input-shape signature (it may pack weights
// and build primitives); Kernel::run only computes and must be safe to call from several threads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/flags.h"
#include "core/graph.h"
#include "core/run_control.h"
#include "core/status.h"
#include "core/tensor.h"

namespace tern {

struct TensorInfo {
  bool present = false;  // false for an omitted optional input/output
  DType dtype = DType::kUndefined;
  Shape shape;
  const Tensor* value = nullptr;  // data, when known before the run (constants, shape math)
  // `value` is a constant of the graph (an initializer or a folded constant): the same for every
  // plan and run, unlike values computed while planning or during a dynamic run.
  bool graph_constant = false;
  // For a constant of the model: its data packed ahead of time for kernels (PackedData), or null.
  const std::vector<PackedData>* packed = nullptr;
  // Memory layout the planner chose: 0 is plain row-major; 8 or 16 means a rank-4 activation
  // whose channels are blocked by that many (oneDNN's nChw8c / nChw16c), padded to a multiple;
  // the channel count itself is one block of all channels: channels-last (NHWC).
  // Only kernels of ops whose Backend::layout_role takes blocked layouts ever see non-zero.
  int block = 0;
};

// Back to a default TensorInfo, keeping the shape's storage (contexts made again for other shapes).
inline void reset_info(TensorInfo* t) {
  t->present = false;
  t->dtype = DType::kUndefined;
  t->shape.clear();
  t->value = nullptr;
  t->graph_constant = false;
  t->packed = nullptr;
  t->block = 0;
}

// Whether `s` ([1, C, 1, 1] or [C, 1, 1]) holds one value per channel of the rank-4 [N, C, H, W]
// `out`, broadcasting over the rest: its memory order is the same in plain and blocked layouts.
inline bool is_channel_vector(const Shape& s, const Shape& out) {
  if (out.size() != 4 || s.size() < 3 || s.size() > 4 || s == out) return false;
  const size_t lead = 4 - s.size();
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] != (d + lead == 1 ? out[1] : 1)) return false;
  }
  return true;
}

// Packed layouts of model constants shared by every kernel of a session (WeightStore implements
// it): a kernel whose weights need a layout of their own asks for (constant, key), and the layout
// is made once per session whatever the activation shapes of the plans that ask. Thread-safe.
class WeightCache {
 public:
  virtual ~WeightCache() = default;
  using Packer = std::function<Expected<PackedData>()>;
  // The packed layout `key` of constant `w`: `pack`'s result on the first call for (w, key),
  // shared after. `w` must live as long as the cache (a constant of the session's graph).
  virtual Expected<PackedData> packed(const Tensor& w, const std::string& key,
                                      const Packer& pack) = 0;
  // The layouts of `w` made so far whose key starts with `prefix`: a kernel whose library may
  // choose among layouts per shape (oneDNN) tries these first, so one copy serves every shape.
  virtual std::vector<PackedData> layouts(const Tensor& w, const std::string& prefix) const = 0;
};

class SubgraphCompiler;  // core/subgraph.h

// One node with concrete input types and shapes. Shape inference fills `outputs` (dtype, shape)
// and, when an output is computable from shapes alone (Shape, Size), `output_values`.
struct OpContext {
  const Node* node = nullptr;
  std::string where;  // "node 'x' (Conv)", for messages
  int64_t opset = 0;
  std::vector<TensorInfo> inputs;
  std::vector<std::string> input_names;  // graph value names, for messages
  std::vector<TensorInfo> outputs;
  std::vector<std::optional<Tensor>> output_values;
  // The flag values the plan is built under (kernel choice may depend on them); null means the
  // global values.
  const FlagValues* flags = nullptr;
  // The session's packed weights (null outside a session: a kernel then packs for itself).
  WeightCache* weights = nullptr;
  // The session's compiled subgraphs, for control-flow kernels (If, Loop, Scan); null outside a
  // session, where those kernels decline.
  SubgraphCompiler* subgraphs = nullptr;
  // Set when inference stopped because an input in the schema's value_inputs has no known value:
  // the session then computes this graph node by node at run time (dynamic execution).
  bool needs_values = false;
  // Set by an inference that knows its outputs' dtypes but not their shapes, which only running
  // the node tells (an If whose branches give different shapes, a Loop that stops on a computed
  // condition): the graph runs node by node, and the kernel allocates its outputs (KernelArgs).
  bool outputs_from_run = false;

  const Attributes& attrs() const { return node->attrs; }
  int64_t flag(FlagId id) const { return flags ? (*flags)[id] : Flags::global().get(id); }
  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].present; }
  const TensorInfo& input(size_t i) const { return inputs[i]; }
  void set_output(size_t i, DType dtype, Shape shape) {
    outputs[i].dtype = dtype;
    outputs[i].shape = std::move(shape);
  }
};

// Execution-time settings passed to every kernel.
struct ExecContext {
  int num_threads = 1;         // intra-op threads this node may use
  bool deterministic = false;  // deterministic_algorithms: fixed work partitions
  // The run's cancel flag and deadline (null when nothing can stop it): kernels that loop over a
  // subgraph check it between iterations and hand it to the subgraph's runs.
  const RunControl* control = nullptr;
  // blas.verbose: GEMM kernels print each product they run (backends/cpu/blas_verbose.h).
  bool blas_verbose = false;
};

struct KernelArgs {
  std::vector<const Tensor*> inputs;  // nullptr for an omitted optional input
  // nullptr for an omitted optional output. For a node whose inference set outputs_from_run,
  // undefined tensors the kernel assigns.
  std::vector<Tensor*> outputs;
  void* workspace = nullptr;  // workspace_bytes() of scratch, 64-byte aligned
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Which implementation this is ("onednn", "openblas", "reference", ...), for profiles and tests.
  virtual const char* name() const = 0;
  virtual Status run(const KernelArgs& args, const ExecContext& exec) const = 0;
  // Scratch memory one run needs; the memory planner places it in the run arena.
  virtual size_t workspace_bytes() const { return 0; }
  // Bytes of weight copies this kernel holds in its own layout (counted in the plan's memory).
  virtual size_t packed_bytes() const { return 0; }
  // Weights this kernel uses in a layout of its own (packed now or found packed in the model),
  // so a saved optimized model can carry them: `input` is the constant's input slot.
  struct PackedWeight {
    size_t input;
    PackedData packed;
  };
  virtual std::vector<PackedWeight> packed_weights() const { return {}; }
  // The input whose memory output 0 may overwrite (-1: none): the kernel reads every input element
  // an output element needs before it writes that element (element-wise ops; row-wise ones that
  // read a whole row first). The memory planner then gives the output that input's buffer when
  // this step is the input's only reader.
  virtual int inplace_input() const { return -1; }
};

using KernelFactory = Expected<std::unique_ptr<Kernel>> (*)(const OpContext& ctx);

// Marks the functions that fill the registries (register_op_*, register_cpu_*...): they run once,
// at a process's first model load, so they are optimized for size and placed together in the
// library's text (GCC's cold section). Spread over every source file's code, they cost the first
// load a page fault for each.
#define TERN_REGISTRATION [[gnu::cold]]
using InferFn = Status (*)(OpContext& ctx);

// A kernel made of parsed params and a function; most kernels are this. One class for every
// params type: the params and the function live in a box behind a plain pointer, with a run and a
// destroy function per type, so each kind of kernel costs those two small functions, not a
// vtable (8 slots, each a dynamic relocation) and five virtual functions of its own.
class FunctionKernel final : public Kernel {
 public:
  template <class Params, class RunFn>
  FunctionKernel(std::string name, Params params, RunFn run, size_t workspace, int inplace = -1)
      : name_(std::move(name)),
        box_(new Box<Params, RunFn>{std::move(params), std::move(run)}),
        run_(&Box<Params, RunFn>::call),
        destroy_(&Box<Params, RunFn>::destroy),
        workspace_(workspace),
        inplace_(inplace) {}
  FunctionKernel(const FunctionKernel&) = delete;
  FunctionKernel& operator=(const FunctionKernel&) = delete;
  ~FunctionKernel() override { destroy_(box_); }
  const char* name() const override { return name_.c_str(); }
  Status run(const KernelArgs& args, const ExecContext& exec) const override {
    return run_(box_, args, exec);
  }
  size_t workspace_bytes() const override { return workspace_; }
  int inplace_input() const override { return inplace_; }

 private:
  template <class Params, class RunFn>
  struct Box {
    Params params;
    RunFn fn;
    static Status call(const void* box, const KernelArgs& args, const ExecContext& exec) {
      const Box* b = static_cast<const Box*>(box);
      return b->fn(b->params, args, exec);
    }
    static void destroy(void* box) { delete static_cast<Box*>(box); }
  };

  std::string name_;
  void* box_;
  Status (*run_)(const void*, const KernelArgs&, const ExecContext&);
  void (*destroy_)(void*);
  size_t workspace_;
  int inplace_;
};

template <class Params, class RunFn>
std::unique_ptr<Kernel> make_kernel(std::string name, Params params, RunFn run,
                                    size_t workspace = 0) {
  return std::make_unique<FunctionKernel>(std::move(name), std::move(params), std::move(run),
                                          workspace);
}

// An element-wise kernel whose output may overwrite input `input` (Kernel::inplace_input).
template <class Params, class RunFn>
std::unique_ptr<Kernel> make_elementwise_kernel(std::string name, Params params, RunFn run,
                                                int input = 0) {
  return std::make_unique<FunctionKernel>(std::move(name), std::move(params), std::move(run), 0,
                                          input);
}

}  // namespace tern
