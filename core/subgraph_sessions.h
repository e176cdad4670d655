// The session's SubgraphCompiler: each subgraph a control-flow kernel asks for becomes a nested
// Session over the subgraph (the outer constants it reads compiled in), with the outer session's
// backends and flags, sharing its profiler (subgraph nodes show as events inside the step that
// runs them) and its memory limit. Nested sessions are kept per (subgraph, constants, dtypes,
// flags) for the outer session's lifetime, so every plan and every run of it shares one: weights
// packed once, plans cached per shape.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/subgraph.h"

namespace tern {

class Session;

class SubgraphSessions final : public SubgraphCompiler {
 public:
  explicit SubgraphSessions(Session* owner) : owner_(owner) {}
  ~SubgraphSessions() override;

  Expected<std::shared_ptr<const SubgraphRunner>> compile(const Graph& body,
                                                          const std::vector<TensorInfo>& inputs,
                                                          const FlagValues& flags) override;
  // Nested sessions made so far (their own nested ones not counted).
  size_t size() const;
  // Their memory, added up (SubgraphRunner::Memory; nested ones included).
  SubgraphRunner::Memory memory() const;

 private:
  Session* owner_;
  mutable std::mutex mu_;
  std::map<std::vector<int64_t>, std::shared_ptr<const SubgraphRunner>> runners_;
};

}  // namespace tern
