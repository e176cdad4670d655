#include "core/progress.h"

#include "core/exceptions.h"

namespace tern {
namespace {
thread_local const ProgressSink* t_sink = nullptr;
}  // namespace

ProgressScope::ProgressScope(const ProgressSink* sink) : previous_(t_sink) {
  if (sink && *sink) {
    t_sink = sink;
    installed_ = true;
  }
}

ProgressScope::~ProgressScope() {
  if (installed_) t_sink = previous_;
}

const ProgressSink* progress_sink() {
  return t_sink;
}

void report_progress(const char* stage, size_t done, size_t total) {
  if (!t_sink) return;
  TERN_TRY {
    (*t_sink)(stage, done, total);
  }
  TERN_CATCH_ALL {}  // a tool's bar never fails a session
}

}  // namespace tern
