// Subgraphs for control-flow kernels (If's branches, Loop's and Scan's bodies): what a session
// gives those kernels to compile a subgraph once and run it many times. The session implements
// SubgraphCompiler (core/subgraph_sessions.h); kernels reach it through OpContext::subgraphs.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/kernel.h"

namespace tern {

// A subgraph compiled by the session: optimized once, planned once per input-shape signature
// (plans cached like the session's own), so an iteration costs the body's kernels and a small
// constant. Thread-safe.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;

  // What the body's outputs are for inputs of these types and shapes (one per Graph::inputs
  // entry; compiled-in constants are ignored): planned now for those shapes, the plan kept for
  // the runs. `*shapes_known` is false when the outputs' shapes depend on data computed inside
  // the body (its plan is dynamic); `outputs` then carries the dtypes only.
  virtual Status infer(const std::vector<TensorInfo>& inputs, std::vector<TensorInfo>* outputs,
                       bool* shapes_known) const = 0;

  // Runs the body. `inputs`: one per Graph::inputs entry (formal inputs, then captured values);
  // entries compiled in as constants are not read and may be null. `outputs` receives one host
  // tensor per graph output. `control` (may be null): the calling run's, checked before each of
  // the body's steps.
  virtual Status run(const std::vector<const Tensor*>& inputs, std::vector<Tensor>* outputs,
                     const RunControl* control) const = 0;

  // What the subgraph's compiled form holds: its most recent plan's arena, and its session's
  // plans, packed weights and run arenas (as SessionMemory counts them).
  struct Memory {
    size_t last_plan_arena_bytes = 0;
    size_t plans = 0, plan_bytes = 0, packed_weight_bytes = 0, arena_bytes = 0;
  };
  virtual Memory memory() const = 0;
};

class SubgraphCompiler {
 public:
  virtual ~SubgraphCompiler() = default;

  // Compiles `body`, a subgraph of the session's model (it must outlive the session), for inputs
  // of these dtypes (one per Graph::inputs entry). An input whose TensorInfo carries a value (a
  // constant of the graph around it) is compiled in as a constant, so its kernels pack and fold it
  // like any weight. Runs use `flags` (the plan's that holds the node). The same body, constants,
  // dtypes and flags give the same runner.
  virtual Expected<std::shared_ptr<const SubgraphRunner>> compile(
      const Graph& body, const std::vector<TensorInfo>& inputs, const FlagValues& flags) = 0;

  // A graph a kernel derives from `body` (a Loop body with its appended values taken out):
  // `derive(body, kind)` runs once per body and `kind`, and the graph is kept as long as this
  // compiler (the session), so it can be compiled like a subgraph of the model.
#if !defined(TERN_MINIMAL)  // (its one user, ops/loop.cpp's appending, is left out there)
  const Graph& derived(const Graph& body, int kind, Graph (*derive)(const Graph&, int));

 private:
  std::mutex derived_mu_;
  std::vector<std::pair<std::pair<const Graph*, int>, std::unique_ptr<const Graph>>> derived_;
#endif
};

}  // namespace tern
