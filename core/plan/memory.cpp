#include "core/plan/memory.h"

#include <algorithm>

#include "core/plan/memory_plan.h"
#include "core/plan/schedule.h"

namespace tern {

namespace {

struct Buffer {
  size_t bytes;
  int value;  // -1 for a workspace
  int step;   // producer (or owner) step
  std::vector<int> readers;
  bool device = false;  // in the device arena
};

// One buffer per arena value and per step workspace, with its readers.
Expected<std::vector<Buffer>> collect_buffers(const Plan& plan,
                                              const std::vector<int>& graph_outputs,
                                              std::vector<int>* buffer_of_value) {
  const auto& values = plan.values;
  const size_t nsteps = plan.steps.size();
  std::vector<int> producer(values.size(), -1);
  for (size_t s = 0; s < nsteps; ++s) {
    for (int id : plan.steps[s].outputs) {
      if (id >= 0) producer[static_cast<size_t>(id)] = static_cast<int>(s);
    }
  }
  std::vector<Buffer> buffers;
  buffer_of_value->assign(values.size(), -1);
  for (size_t v = 0; v < values.size(); ++v) {
    if (values[v].where != PlannedValue::Where::kArena) continue;
    TERN_ASSIGN_OR_RETURN(int64_t n, checked_numel(values[v].shape));
    (*buffer_of_value)[v] = static_cast<int>(buffers.size());
    buffers.push_back(Buffer{static_cast<size_t>(n) * dtype_size(values[v].dtype),
                             static_cast<int>(v),
                             producer[v],
                             {},
                             !values[v].device.is_host()});
  }
  for (size_t s = 0; s < nsteps; ++s) {
    for (int id : plan.steps[s].inputs) {
      const int b = id < 0 ? -1 : (*buffer_of_value)[static_cast<size_t>(id)];
      if (b >= 0) buffers[static_cast<size_t>(b)].readers.push_back(static_cast<int>(s));
    }
  }
  for (size_t s = 0; s < nsteps; ++s) {
    if (size_t ws = plan.steps[s].kernel->workspace_bytes()) {
      buffers.push_back(Buffer{
          ws, -1, static_cast<int>(s), {static_cast<int>(s)}, !plan.steps[s].backend->is_host()});
    }
  }
  // Graph outputs kept in the device arena are copied out after the last step: they live to the
  // end of the run, past their last reader.
  for (int id : graph_outputs) {
    const int b = id < 0 ? -1 : (*buffer_of_value)[static_cast<size_t>(id)];
    if (b >= 0) buffers[static_cast<size_t>(b)].readers.push_back(static_cast<int>(nsteps));
  }
  for (Buffer& b : buffers) {
    if (b.readers.empty()) b.readers.push_back(b.step);
  }
  return buffers;
}

// In place: a step whose kernel allows it writes its output over an input that only it reads
// (same size and layout). The output's buffer joins the input's, which then lives until the
// output's last reader; returns, for every buffer, the one whose memory it uses.
std::vector<size_t> share_in_place(Plan* plan, std::vector<Buffer>& buffers,
                                   const std::vector<int>& buffer_of_value) {
  std::vector<size_t> owner(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) owner[i] = i;
  for (size_t s = 0; s < plan->steps.size(); ++s) {
    const PlanStep& st = plan->steps[s];
    const int k = st.kernel->inplace_input();
    if (k < 0 || static_cast<size_t>(k) >= st.inputs.size() || st.outputs.empty()) continue;
    const int in = st.inputs[static_cast<size_t>(k)], out = st.outputs[0];
    if (in < 0 || out < 0) continue;
    const int bi = buffer_of_value[static_cast<size_t>(in)];
    const int bo = buffer_of_value[static_cast<size_t>(out)];
    if (bi < 0 || bo < 0) continue;
    Buffer& src = buffers[owner[static_cast<size_t>(bi)]];
    const Buffer& dst = buffers[static_cast<size_t>(bo)];
    const auto& readers = buffers[static_cast<size_t>(bi)].readers;
    const bool only_reader = std::all_of(readers.begin(), readers.end(),
                                         [&](int r) { return r == static_cast<int>(s); });
    if (!only_reader || src.bytes != dst.bytes || src.device != dst.device ||
        plan->values[static_cast<size_t>(in)].block !=
            plan->values[static_cast<size_t>(out)].block) {
      continue;
    }
    src.readers.insert(src.readers.end(), dst.readers.begin(), dst.readers.end());
    owner[static_cast<size_t>(bo)] = owner[static_cast<size_t>(bi)];
    ++plan->in_place;
  }
  return owner;
}

}  // namespace

Status plan_arenas(const std::vector<int>& graph_outputs, Plan* plan) {
  std::vector<int> buffer_of_value;
  TERN_ASSIGN_OR_RETURN(std::vector<Buffer> buffers,
                        collect_buffers(*plan, graph_outputs, &buffer_of_value));
  const std::vector<size_t> owner = share_in_place(plan, buffers, buffer_of_value);
  std::vector<size_t> roots;                          // host buffers that own their memory
  std::vector<size_t> device_roots;                   // the same in the device arena
  std::vector<size_t> request_of(buffers.size(), 0);  // buffer -> index among its roots
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (owner[i] != i) continue;
    std::vector<size_t>& r = buffers[i].device ? device_roots : roots;
    request_of[i] = r.size();
    r.push_back(i);
  }
  const size_t nsteps = plan->steps.size();
  auto fill_layout = [&](const MemoryPlan& mp, ArenaLayout* l, bool device) {
    l->value_offset.assign(plan->values.size(), 0);
    l->workspace_offset.assign(nsteps, 0);
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (buffers[i].device != device) continue;
      const size_t offset = mp.offsets[request_of[owner[i]]];
      if (buffers[i].value >= 0) {
        l->value_offset[static_cast<size_t>(buffers[i].value)] = offset;
      } else {
        l->workspace_offset[static_cast<size_t>(buffers[i].step)] = offset;
      }
    }
    l->bytes = mp.arena_bytes;
    l->naive_bytes = mp.naive_bytes;
  };
  auto sequential = [&](const std::vector<size_t>& set, size_t align) {
    std::vector<BufferRequest> requests;
    for (size_t r : set) {
      const Buffer& b = buffers[r];
      const int last = *std::max_element(b.readers.begin(), b.readers.end());
      requests.push_back(BufferRequest{b.bytes, b.step, std::max(b.step, last)});
    }
    return plan_memory(requests, align);
  };
  fill_layout(sequential(roots, kArenaAlign), &plan->layouts[0], false);
  if (plan->device_backend) {
    fill_layout(sequential(device_roots, kDeviceArenaAlign), &plan->device_layout, true);
  }
  // Plans with device steps run step after step (the device orders its own work).
  if (plan->width > 1 && !plan->device_backend) {
    const StepSets anc = step_ancestors(*plan);
    std::vector<size_t> bytes;
    for (size_t r : roots) bytes.push_back(buffers[r].bytes);
    auto before = [&](const Buffer& x, const Buffer& y) {  // x is dead before y is written
      if (y.step < 0) return false;
      return std::all_of(x.readers.begin(), x.readers.end(), [&](int r) {
        return anc.test(static_cast<size_t>(y.step), static_cast<size_t>(r));
      });
    };
    fill_layout(plan_memory_general(bytes,
                                    [&](size_t i, size_t j) {
                                      const Buffer& x = buffers[roots[i]];
                                      const Buffer& y = buffers[roots[j]];
                                      return !before(x, y) && !before(y, x);
                                    }),
                &plan->layouts[1], false);
  }
  for (const PlanStep& st : plan->steps) plan->packed_weight_bytes += st.kernel->packed_bytes();
  plan->arena_bytes = plan->layouts[0].bytes;
  plan->naive_bytes = plan->layouts[0].naive_bytes;
  return Status::ok();
}

}  // namespace tern
