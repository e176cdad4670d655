#include "core/exec/executor.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <set>

#include "core/cpu_set.h"
#include "core/exceptions.h"
#include "core/plan/schedule.h"
#include "core/thread_budget.h"
#include "core/thread_pool.h"
#include "core/transfer.h"

namespace tern {

Status Executor::run(const Plan& plan, std::vector<const Tensor*> inputs,
                     const std::vector<int>& wanted, const FlagValues& flags,
                     const Device& output_device, std::vector<Tensor>* outputs,
                     const RunControl* control) const {
  // Device inputs that host kernels read (or that the plan's device cannot use) are staged to
  // host memory; the others are passed to the device kernels as they are.
  std::vector<Tensor> staged;
  staged.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = *inputs[i];
    if (t.on_host()) continue;
    const bool device_only = !plan.dynamic && plan.device_backend &&
                             plan.device_backend->device() == t.device() &&
                             !plan.input_read_on_host[i];
    if (device_only) continue;
    auto host = moved_to(t, Device{}, backends_);
    if (!host) return host.status().with_prefix(str_cat("input '", inputs_[i].name, "'"));
    staged.push_back(std::move(*host));
    inputs[i] = &staged.back();
  }
  // The backends this run uses: the host ones and the plan's device (dynamic runs compute on the
  // host). Only they get begin_run/end_run, so a listed device the plan does not use cannot change
  // the calling thread's state (a CUDA backend makes its device current until end_run).
  std::vector<Backend*> used;
  for (Backend* b : backends_) {
    if (b->is_host() || (!plan.dynamic && b == plan.device_backend)) used.push_back(b);
  }
  for (Backend* b : used) b->begin_run(flags);
  Status st = plan.dynamic
                  ? run_dynamic(plan, inputs, wanted, flags, outputs, control)
                  : run_static(plan, inputs, wanted, flags, output_device, outputs, control);
  for (Backend* b : used) b->end_run(flags);
  TERN_RETURN_IF_ERROR(st);
  for (Tensor& t : *outputs) {
    if (t.device() != output_device) {
      TERN_ASSIGN_OR_RETURN(t, moved_to(t, output_device, backends_));
    }
  }
  if (!plan.dynamic && plan.device_backend) {
    TERN_RETURN_IF_ERROR(plan.device_backend->synchronize());
  }
  return Status::ok();
}

namespace {

// The tensor of every value of the plan for one run: constants and inputs as they are, arena
// values at their offsets, graph outputs in fresh storage.
Status bind_values(const Plan& plan, const Graph& g, const std::vector<const Tensor*>& inputs,
                   uint8_t* base, uint8_t* device_base, int layout, std::vector<Tensor>* tensors) {
  tensors->assign(plan.values.size(), Tensor());
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const PlannedValue& pv = plan.values[v];
    Tensor& t = (*tensors)[v];
    switch (pv.where) {
      case PlannedValue::Where::kNone:
        break;
      case PlannedValue::Where::kConstant:
        t = *pv.constant;
        break;
      case PlannedValue::Where::kInput:
        t = *inputs[pv.input_index];
        break;
      case PlannedValue::Where::kArena:
        t = pv.device.is_host()
                ? Tensor::wrap(pv.dtype, pv.shape, base + plan.layouts[layout].value_offset[v],
                               nullptr)
                : Tensor::wrap(pv.dtype, pv.shape, device_base + plan.device_layout.value_offset[v],
                               nullptr, pv.device);
        break;
      case PlannedValue::Where::kOutput: {
        auto out = Tensor::allocate_uninitialized(pv.dtype, pv.shape);  // its step writes it
        if (!out) {
          return out.status().with_prefix(
              str_cat("output '", g.value_name(static_cast<int>(v)), "'"));
        }
        t = std::move(*out);
        break;
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status Executor::run_static(const Plan& plan, const std::vector<const Tensor*>& inputs,
                            const std::vector<int>& wanted, const FlagValues& f,
                            const Device& output_device, std::vector<Tensor>* outputs,
                            const RunControl* control) const {
  const int threads = static_cast<int>(f[FlagId::kNumThreads]);
  const int interop = static_cast<int>(f[FlagId::kNumInteropThreads]);
  const bool concurrent = runs_concurrently(plan, threads, interop);
  const int layout = concurrent ? 1 : 0;
  // The arenas go back to the session's pools on every exit path (the device's only after the
  // device is done with it: the synchronize below comes first).
  TERN_ASSIGN_OR_RETURN(ArenaPool::Lease lease, host_arenas_.acquire(plan.layouts[layout].bytes));
  uint8_t* base = lease.data();
  ArenaPool::Lease device_lease;
  uint8_t* device_base = nullptr;
  if (plan.device_backend) {
    auto a = device_arenas(plan.device_backend).acquire(plan.device_layout.bytes);
    if (!a) {
      return a.status().with_prefix(
          str_cat("the ", plan.device_layout.bytes, "-byte device arena"));
    }
    device_lease = std::move(*a);
    device_base = device_lease.data();
  }
  std::vector<Tensor> tensors;
  TERN_RETURN_IF_ERROR(bind_values(plan, graph_, inputs, base, device_base, layout, &tensors));
  const bool det = f.on(FlagId::kDeterministicAlgorithms);
  const auto t0 = profiler_ ? Profiler::Clock::now() : Profiler::Clock::time_point();
  // A cancelled or late run leaves here like a failed one: the device work already queued is
  // waited for below, the arenas go back to the pools, no output is returned.
  Status st =
      concurrent
          ? execute_concurrent(plan, tensors, base, interop,
                               ExecContext{threads, det, control, f.on(FlagId::kBlasVerbose)},
                               f[FlagId::kCpuAffinity])
          : execute_sequential(plan, tensors, base, device_base,
                               ExecContext{threads, det, control, f.on(FlagId::kBlasVerbose)},
                               f.on(FlagId::kCudaGraphs));
  if (plan.device_backend) {
    // The device arena goes back to the pool (and host buffers read by queued copies may go
    // away) only once the device is done with them. A failed or stopped run's work that the
    // device has not been given is dropped rather than run.
    Status sync = st.is_ok() ? plan.device_backend->synchronize() : plan.device_backend->abandon();
    if (st.is_ok()) st = sync;
  }
  if (st.is_ok()) plan.set_ran_eagerly();
  if (profiler_) {
    ProfileEvent e{run_category_,
                   run_category_,
                   profiler_->since_start_us(t0),
                   0,
                   Profiler::thread_number(),
                   {}};
    e.dur_us = profiler_->since_start_us(Profiler::Clock::now()) - e.ts_us;
    e.args = {{"steps", std::to_string(plan.steps.size())},
              {"threads", std::to_string(threads)},
              {"interop", std::to_string(concurrent ? interop : 1)},
              {"arena_bytes", std::to_string(plan.layouts[layout].bytes)}};
    profiler_->record(std::move(e));
  }
  TERN_RETURN_IF_ERROR(st);
  std::vector<Tensor> result;
  std::set<int> moved;
  for (int id : wanted) {
    const PlannedValue& pv = plan.values[static_cast<size_t>(id)];
    if (pv.where == PlannedValue::Where::kOutput && moved.insert(id).second) {
      result.push_back(tensors[static_cast<size_t>(id)]);
      continue;
    }
    const Tensor& t = tensors[static_cast<size_t>(id)];
    if (t.on_host()) {
      TERN_ASSIGN_OR_RETURN(Tensor copy, t.clone());
      result.push_back(std::move(copy));
    } else if (t.device() != output_device) {
      // In the device arena (or a bound input): copied out before the arena is reused.
      TERN_ASSIGN_OR_RETURN(Tensor copy, moved_to(t, Device{}, backends_));
      result.push_back(std::move(copy));
    } else {
      Backend* dev = plan.device_backend;
      TERN_ASSIGN_OR_RETURN(std::shared_ptr<void> mem, dev->allocate(t.byte_size()));
      void* raw = mem.get();
      Tensor copy = Tensor::wrap(t.dtype(), t.shape(), raw, std::move(mem), t.device());
      TERN_RETURN_IF_ERROR(dev->copy_on_device(t, copy));
      result.push_back(std::move(copy));
    }
  }
  *outputs = std::move(result);
  return Status::ok();
}

namespace {

Status check_step(const ExecContext& exec, const PlanStep& step) {
  return check_run(exec.control, step.label);
}

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

Status Executor::run_step(const Plan& plan, const PlanStep& step, std::vector<Tensor>& tensors,
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

void Executor::record_step(const PlanStep& step, const KernelArgs& args,
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

Status Executor::execute_sequential(const Plan& plan, std::vector<Tensor>& tensors, uint8_t* base,
                                    uint8_t* device_base, const ExecContext& exec,
                                    bool capture) const {
  for (Backend* b : backends_) b->set_num_threads(exec.num_threads);
  Backend* dev = plan.device_backend;
  // Capture starts with the plan's second run: the first runs every kernel eagerly, so whatever a
  // kernel or library sets up on first use (handles, workspaces, lazily loaded code) is done
  // outside a capture, where allocating or synchronizing would break it.
  capture = capture && dev && dev->can_capture() && !profiler_ && plan.ran_eagerly();
  const size_t n = plan.steps.size();
  // A run that can be stopped keeps little device work queued ahead of the host (Backend::pace).
  const bool pacing = dev && exec.control && exec.control->can_stop();
  // Inside a capture nothing may stop the recording half way: `check` is off there, and a
  // captured segment replays whole.
  auto run_range = [&](size_t from, size_t to, bool check) -> Status {
    for (size_t i = from; i < to; ++i) {
      if (check) TERN_RETURN_IF_ERROR(check_step(exec, plan.steps[i]));
      TERN_RETURN_IF_ERROR(run_step(plan, plan.steps[i], tensors, base, device_base, 0, exec));
      if (check && pacing) TERN_RETURN_IF_ERROR(dev->pace());
    }
    return Status::ok();
  };
  for (size_t s = 0; s < n;) {
    const PlanStep& step = plan.steps[s];
    const bool device_kernel = !step.backend->is_host() && !step.transfer;
    TERN_RETURN_IF_ERROR(check_step(exec, step));
    if (!capture || !device_kernel) {
      TERN_RETURN_IF_ERROR(run_step(plan, step, tensors, base, device_base, 0, exec));
      if (device_kernel && pacing) TERN_RETURN_IF_ERROR(dev->pace());
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
      TERN_RETURN_IF_ERROR(run_range(s, e, /*check=*/true));
      s = e;
      continue;
    }
    std::shared_ptr<void> graph = plan.find_capture(s, key);
    if (!graph) {
      auto captured = dev->capture([&] { return run_range(s, e, /*check=*/false); });
      if (!captured) {
        // The launches were recorded, not run: run them now, and never try this segment again.
        plan.mark_capture_failed(s);
        Status eager = run_range(s, e, /*check=*/false);
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

Status Executor::execute_concurrent(const Plan& plan, std::vector<Tensor>& tensors, uint8_t* base,
                                    int interop, const ExecContext& run_exec,
                                    int64_t cpu_affinity) const {
  const int threads = run_exec.num_threads;
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
  const ExecContext exec{per_node, run_exec.deterministic, run_exec.control, run_exec.blas_verbose};
  auto work = [&] {
    for (Backend* b : backends_) b->set_num_threads(per_node);
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
      // On a pool thread an exception would end the process: it becomes the run's error.
      Status r = check_step(exec, plan.steps[static_cast<size_t>(s)]);
      if (r.is_ok()) {
        r = status_of_call(
            [&] {
              return run_step(plan, plan.steps[static_cast<size_t>(s)], tensors, base, nullptr, 1,
                              exec);
            },
            plan.steps[static_cast<size_t>(s)].label);
      }
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
  // The helpers that could not be launched (no thread to be had) leave their share to this
  // thread: the steps are taken from one queue, so the run completes either way.
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.helpers_left = workers - 1;
  }
  // The calling thread was pinned by the CPU backend's begin_run; pool threads serve every
  // session, so they are pinned for this run's work only.
  const CpuList cpus = cpu_affinity ? interned_cpu_list(cpu_affinity) : CpuList{};
  const int launched = InterOpPool::global().launch(workers - 1, [&] {
    {
      ScopedThreadAffinity pin(cpus);
      GrantedThreadScope granted(per_node);  // the run's budget covers this thread's work
      work();
    }
    std::lock_guard<std::mutex> lock(st.mu);
    --st.helpers_left;
    st.cv.notify_all();
  });
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.helpers_left -= workers - 1 - launched;
  }
  work();
  std::unique_lock<std::mutex> lock(st.mu);
  // Helpers reference this frame: wait until each has left (after an error, until the steps
  // already started have finished).
  st.cv.wait(lock, [&] { return st.helpers_left == 0 && st.running == 0; });
  for (Backend* b : backends_) b->set_num_threads(threads);
  return st.error;
}

ArenaPool& Executor::device_arenas(Backend* device) const {
  std::lock_guard<std::mutex> lock(pools_mu_);
  auto& p = device_arenas_[device];
  if (!p) p = std::make_unique<ArenaPool>(device);
  return *p;
}

size_t Executor::arena_bytes() const {
  size_t bytes = host_arenas_.bytes();
  std::lock_guard<std::mutex> lock(pools_mu_);
  for (const auto& [d, p] : device_arenas_) bytes += p->bytes();
  return bytes;
}

bool runs_concurrently(const Plan& plan, int threads, int interop) {
  // Independent branches run at the same time only where the estimate says that beats running
  // node after node with every intra-op thread on each (core/plan/schedule.h): with one intra-op
  // thread when the branches carry more work than handing steps between threads costs; with
  // several when the nodes are too small to split well, so that giving each branch its share of
  // the threads beats splitting every node (oneDNN and OpenBLAS split big nodes well).
  if (interop <= 1 || plan.width <= 1 || plan.device_backend) return false;
  const int64_t key = (static_cast<int64_t>(threads) << 32 | interop) << 1;
  const int64_t memo = plan.concurrent_memo.load(std::memory_order_relaxed);
  if (memo >= 0 && (memo & ~int64_t{1}) == key) return memo & 1;
  const ScheduleEstimate e = estimate_schedule_time(plan, threads, interop);
  // With several intra-op threads the estimate of how well each node splits is the rough part
  // (ssdlite's 391 steps: 3% promised, 18% slower measured): the split must promise 15%.
  const double margin = threads > 1 ? 0.85 : 1.0;
  const bool concurrent = e.concurrent_ns < margin * e.sequential_ns;
  plan.concurrent_memo.store(key | (concurrent ? 1 : 0), std::memory_order_relaxed);
  return concurrent;
}

}  // namespace tern
