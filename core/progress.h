// Progress of the long steps of preparing a model (constant folding, the graph rewrites, kernel
// preparation with its weight packing), for tools that draw a bar (`tern convert --optimize`).
// A step reports (stage, done, total) to the sink installed on the calling thread by a
// ProgressScope; with none installed a report costs one thread-local read. The sink is
// thread-local so that a session's creation (and a run that builds a plan) reports to its caller
// without a callback threaded through the session, the optimizer and the planner: they all run
// on the caller's thread.
#pragma once

#include <cstddef>
#include <functional>

namespace tern {

// stage: a static string ("fold constants", "optimize", "prepare kernels"); done of total steps.
using ProgressSink = std::function<void(const char* stage, size_t done, size_t total)>;

// Installs `sink` on this thread until destroyed (scopes nest: the previous sink comes back).
// An empty sink installs nothing.
class ProgressScope {
 public:
  explicit ProgressScope(const ProgressSink* sink);
  ~ProgressScope();
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;

 private:
  const ProgressSink* previous_;
  bool installed_ = false;
};

// Calls this thread's sink, if any. Never throws: a sink that throws is ignored.
void report_progress(const char* stage, size_t done, size_t total);
// This thread's sink (null: none), for work handed to another thread that relays its reports
// back (core/run_homes.cpp).
const ProgressSink* progress_sink();

}  // namespace tern
