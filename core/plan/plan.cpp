#include "core/plan/plan.h"

namespace tern {

// Kernel objects are not measured (their parameters are of each kernel's own type): each step
// counts this much for its kernel and the heap's bookkeeping of the step's allocations, about what
// a transformer encoder's plans hold per step beyond the rest counted here (var_encoder: 127 KiB
// per plan in use on the heap against 69 KiB counted without it, 84 steps).
constexpr size_t kStepKernelBytes = 640;

size_t Plan::footprint() const {
  size_t bytes = sizeof(Plan) + values.capacity() * sizeof(PlannedValue) +
                 steps.capacity() * (sizeof(PlanStep) + kStepKernelBytes);
  for (const PlannedValue& v : values) bytes += v.shape.capacity() * sizeof(int64_t);
  for (const PlanStep& s : steps) {
    bytes += s.label.capacity() + (s.inputs.capacity() + s.outputs.capacity() + s.preds.capacity() +
                                   s.succs.capacity()) *
                                      sizeof(int);
  }
  for (const ArenaLayout& l : layouts) {
    bytes += (l.value_offset.capacity() + l.workspace_offset.capacity()) * sizeof(size_t);
  }
  for (const auto& t : known) bytes += sizeof(Tensor) + t->byte_size();
  for (const auto& t : device_constants) bytes += t->byte_size();
  return bytes;
}

std::shared_ptr<void> Plan::find_capture(size_t first_step, const std::vector<void*>& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = captures_.find({first_step, key});
  return it == captures_.end() ? nullptr : it->second;
}

void Plan::store_capture(size_t first_step, std::vector<void*> key, std::shared_ptr<void> c) const {
  std::lock_guard<std::mutex> lock(mu_);
  // Each arena (and each set of bound device inputs) has its own capture; a few per segment are
  // kept, the oldest dropped past that.
  constexpr size_t kPerSegment = 8;
  size_t n = 0;
  for (auto it = captures_.begin(); it != captures_.end();) {
    if (it->first.first == first_step && ++n >= kPerSegment) {
      it = captures_.erase(it);
    } else {
      ++it;
    }
  }
  captures_[{first_step, std::move(key)}] = std::move(c);
}

bool Plan::capture_failed(size_t first_step) const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_captures_.count(first_step) != 0;
}

void Plan::mark_capture_failed(size_t first_step) const {
  std::lock_guard<std::mutex> lock(mu_);
  failed_captures_.insert(first_step);
}

}  // namespace tern
