#include "core/profiler.h"

#include <atomic>
#include <cstdio>
#include <memory>

namespace tern {

namespace {

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace

uint32_t Profiler::thread_number() {
  static std::atomic<uint32_t> next{1};
  thread_local uint32_t id = next++;
  return id;
}

void Profiler::record(ProfileEvent e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

size_t Profiler::event_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::vector<ProfileEvent> Profiler::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

Status Profiler::write() const {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < events_.size(); ++i) {
      const ProfileEvent& e = events_[i];
      char nums[128];
      std::snprintf(nums, sizeof nums,
                    ",\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f", e.tid, e.ts_us,
                    e.dur_us);
      out += "{\"name\":";
      append_json_string(out, e.name);
      out += ",\"cat\":";
      append_json_string(out, e.cat);
      out += nums;
      out += ",\"args\":{";
      for (size_t a = 0; a < e.args.size(); ++a) {
        if (a) out += ',';
        append_json_string(out, e.args[a].first);
        out += ':';
        append_json_string(out, e.args[a].second);
      }
      out += i + 1 < events_.size() ? "}},\n" : "}}\n";
    }
  }
  out += "]}\n";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path_.c_str(), "wb"), std::fclose);
  if (!f) return io_error("cannot open the profile file '", path_, "' for writing");
  if (std::fwrite(out.data(), 1, out.size(), f.get()) != out.size()) {
    return io_error("cannot write the profile file '", path_, "'");
  }
  return Status::ok();
}

}  // namespace tern
