// The executor: runs a plan's steps in order (with CUDA-graph style capture and replay of device
// stretches) or, for plans with independent branches, on inter-op threads as their inputs become
// ready.
#include <algorithm>
#include <condition_variable>
#include <deque>

#include "core/session.h"
#include "core/thread_pool.h"

namespace tern {

namespace {

KernelArgs step_args(const Plan& plan, const PlanStep& step, std::vector<Tensor>& tensors,
                     uint8_t* base, uint8_t* device_base, int layout) {
  KernelArgs args;
  for (int id : step.inputs) args.inputs.push_back(id < 0 ? nullptr : &tensors[id]);
  for (int id : step.outputs) args.outputs.push_back(id < 0 ? nullptr : &tensors[id]);
  if (step.kernel->workspace_bytes()) {
    const size_t s = static_cast<size_t>(&step - plan.steps.data());
    args.workspace = step.backend->is_host() ? base + plan.layouts[layout].workspace_offset[s]
                                             : device_base + plan.device_layout.workspace_offset[s];
  }
  return args;
}

}  // namespace

Status Session::run_step(const Plan& plan, const PlanStep& step, std::vector<Tensor>& tensors,
                         uint8_t* base, uint8_t* device_base, int layout,
                         const ExecContext& exec) const {
  KernelArgs args = step_args(plan, step, tensors, base, device_base, layout);
  const auto t0 = profiler_ ? Profiler::Clock::now() : Profiler::Clock::time_point();
  Status st = step.kernel->run(args, exec);
  if (profiler_) record_step(step, args, t0, exec);
  if (!st.is_ok()) {
    return st.with_prefix(
        str_cat(step.label, " [", step.backend->name(), "/", step.kernel->name(), "]"));
  }
  return Status::ok();
}

void Session::record_step(const PlanStep& step, const KernelArgs& args,
                          Profiler::Clock::time_point t0, const ExecContext& exec) const {
  const Node& node = *step.op_node;
  ProfileEvent e{node.name.empty() ? step.label : node.name,
                 "node",
                 profiler_->since_start_us(t0),
                 0,
                 Profiler::thread_number(),
                 {}};
  e.dur_us = profiler_->since_start_us(Profiler::Clock::now()) - e.ts_us;
  auto shapes = [](const auto& tensors) {
    std::string s;
    for (const Tensor* t : tensors) {
      if (!s.empty()) s += ' ';
      s += t ? str_cat(dtype_name(t->dtype()), shape_str(t->shape())) : std::string("-");
    }
    return s;
  };
  e.args = {{"op", node.op_type},
            {"step", step.label},
            {"backend", step.backend->name()},
            {"kernel", step.kernel->name()},
            {"inputs", shapes(args.inputs)},
            {"outputs", shapes(args.outputs)},
            {"threads", std::to_string(exec.num_threads)}};
  profiler_->record(std::move(e));
}

Status Session::execute_sequential(const Plan& plan, std::vector<Tensor>& tensors, uint8_t* base,
                                   uint8_t* device_base, int threads, bool deterministic,
                                   bool capture) const {
  for (Backend* b : config_.backends) b->set_num_threads(threads);
  const ExecContext exec{threads, deterministic};
  Backend* dev = plan.device_backend;
  // Capture starts with the plan's second run: the first runs every kernel eagerly, so whatever a
  // kernel or library sets up on first use (handles, workspaces, lazily loaded code) is done
  // outside a capture, where allocating or synchronizing would break it.
  capture = capture && dev && dev->can_capture() && !profiler_ && plan.ran_eagerly();
  const size_t n = plan.steps.size();
  auto run_range = [&](size_t from, size_t to) -> Status {
    for (size_t i = from; i < to; ++i) {
      TERN_RETURN_IF_ERROR(run_step(plan, plan.steps[i], tensors, base, device_base, 0, exec));
    }
    return Status::ok();
  };
  for (size_t s = 0; s < n;) {
    const PlanStep& step = plan.steps[s];
    const bool device_kernel = !step.backend->is_host() && !step.transfer;
    if (!capture || !device_kernel) {
      TERN_RETURN_IF_ERROR(run_step(plan, step, tensors, base, device_base, 0, exec));
      ++s;
      continue;
    }
    // A segment of consecutive device kernels is captured once per set of addresses it touches
    // (arena, bound inputs) and replayed after: one launch instead of one per kernel.
    size_t e = s;
    std::vector<void*> key;
    while (e < n && !plan.steps[e].backend->is_host() && !plan.steps[e].transfer) {
      KernelArgs a = step_args(plan, plan.steps[e], tensors, base, device_base, 0);
      for (const Tensor* t : a.inputs) key.push_back(t ? t->raw() : nullptr);
      for (const Tensor* t : a.outputs) key.push_back(t ? t->raw() : nullptr);
      key.push_back(a.workspace);
      ++e;
    }
    if (plan.capture_failed(s)) {  // a segment whose capture failed runs eagerly from then on
      TERN_RETURN_IF_ERROR(run_range(s, e));
      s = e;
      continue;
    }
    std::shared_ptr<void> graph = plan.find_capture(s, key);
    if (!graph) {
      auto captured = dev->capture([&] { return run_range(s, e); });
      if (!captured) {
        // The launches were recorded, not run: run them now, and never try this segment again.
        plan.mark_capture_failed(s);
        Status eager = run_range(s, e);
        if (!eager.is_ok()) {
          return eager.with_prefix(str_cat("steps ", s, "..", e - 1,
                                           " (run eagerly after their "
                                           "cuda.graphs capture failed: ",
                                           captured.status().message(), ")"));
        }
        s = e;
        continue;
      }
      graph = std::move(captured).value();
      plan.store_capture(s, key, graph);
    }
    TERN_RETURN_IF_ERROR(dev->replay(graph.get()));
    s = e;
  }
  return Status::ok();
}

Status Session::execute_concurrent(const Plan& plan, std::vector<Tensor>& tensors, uint8_t* base,
                                   int threads, int interop, bool deterministic) const {
  // Dependency-driven: a step starts when the steps it reads from are done. Workers are this
  // thread plus (workers - 1) inter-op pool threads; each node gets an equal share of the
  // intra-op threads, so the run keeps max(intra, inter) cores busy at most.
  const int workers = std::min(interop, plan.width);
  const int per_node = std::max(1, threads / workers);
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int> pending;
    std::deque<int> ready;
    size_t done = 0, running = 0;
    int helpers_left = 0;
    Status error;
  } st;
  st.pending.resize(plan.steps.size());
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    st.pending[s] = static_cast<int>(plan.steps[s].preds.size());
    if (st.pending[s] == 0) st.ready.push_back(static_cast<int>(s));
  }
  const ExecContext exec{per_node, deterministic};
  auto work = [&] {
    for (Backend* b : config_.backends) b->set_num_threads(per_node);
    std::unique_lock<std::mutex> lock(st.mu);
    for (;;) {
      st.cv.wait(lock, [&] {
        return !st.ready.empty() || st.done == plan.steps.size() || !st.error.is_ok();
      });
      if (st.done == plan.steps.size() || !st.error.is_ok()) return;
      int s = st.ready.front();
      st.ready.pop_front();
      ++st.running;
      lock.unlock();
      Status r =
          run_step(plan, plan.steps[static_cast<size_t>(s)], tensors, base, nullptr, 1, exec);
      lock.lock();
      --st.running;
      ++st.done;
      if (!r.is_ok() && st.error.is_ok()) st.error = r;
      for (int n : plan.steps[static_cast<size_t>(s)].succs) {
        if (--st.pending[static_cast<size_t>(n)] == 0) st.ready.push_back(n);
      }
      st.cv.notify_all();
    }
  };
  st.helpers_left = workers - 1;
  InterOpPool::global().launch(workers - 1, [&] {
    work();
    std::lock_guard<std::mutex> lock(st.mu);
    --st.helpers_left;
    st.cv.notify_all();
  });
  work();
  std::unique_lock<std::mutex> lock(st.mu);
  // Helpers reference this frame: wait until each has left (after an error, until the steps
  // already started have finished).
  st.cv.wait(lock, [&] { return st.helpers_left == 0 && st.running == 0; });
  for (Backend* b : config_.backends) b->set_num_threads(threads);
  return st.error;
}

bool runs_concurrently(const Plan& plan, int threads, int interop) {
  // Independent branches run at the same time only where that beats running node after node:
  // with several intra-op threads each node already gets all of them (oneDNN and OpenBLAS split
  // one node better than branches split a graph), and handing steps between inter-op threads
  // costs a few microseconds each, so the branches must save more than that.
  if (interop <= 1 || plan.width <= 1 || threads > 1 || plan.device_backend) return false;
  const double workers = std::min(interop, plan.width);
  const double saved_ns = plan.total_cost - std::max(plan.critical_cost, plan.total_cost / workers);
  constexpr double kHandoffNs = 5000;
  return saved_ns > kHandoffNs * static_cast<double>(plan.steps.size());
}

}  // namespace tern
