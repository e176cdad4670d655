// The planner's schedule facts: which steps always finish before which (for the concurrent arena
// layout), the widest level of the step graph, and rough work estimates (for the executor's
// choice between running steps one after another and on inter-op threads).
#pragma once

#include <cstdint>
#include <vector>

#include "core/plan/plan.h"

namespace tern {

// Bit sets over steps: ancestors(s) holds every step that finishes before s starts.
class StepSets {
 public:
  explicit StepSets(size_t n) : words_((n + 63) / 64), bits_(n * words_, 0) {}
  bool test(size_t set, size_t s) const { return (bits_[set * words_ + s / 64] >> (s % 64)) & 1; }
  void add(size_t set, size_t s) { bits_[set * words_ + s / 64] |= uint64_t{1} << (s % 64); }
  void merge(size_t into, size_t from) {
    for (size_t w = 0; w < words_; ++w) bits_[into * words_ + w] |= bits_[from * words_ + w];
  }

 private:
  size_t words_;
  std::vector<uint64_t> bits_;
};

// Every step's ancestors (steps are in dependency order).
StepSets step_ancestors(const Plan& plan);
// Sets plan->width, total_cost, critical_cost and step_cost.
void estimate_schedule(Plan* plan);

// Estimated run time of a plan with `threads` intra-op threads: node after node, each on all of
// them, or on min(interop, width) workers running independent steps at once, each node on
// threads / workers of them (inter-op handing steps between threads costs a few microseconds each).
struct ScheduleEstimate {
  double sequential_ns = 0, concurrent_ns = 0;
};
ScheduleEstimate estimate_schedule_time(const Plan& plan, int threads, int interop);

}  // namespace tern
