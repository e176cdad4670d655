// The one place that knows which backends this build has (DESIGN pattern 9): each built kind's
// record comes from its own directory; a kind compiled out gets a record that says so.
#include "backends/registry.h"

#include <memory>

namespace tern::backends {

const Record& cpu_record();  // backends/cpu/cpu_record.cpp
#if defined(TERN_HAVE_CUDA)
const Record& cuda_record();  // backends/cuda/cuda_record.cpp
#endif
#if defined(TERN_HAVE_VULKAN)
const Record& vulkan_record();  // backends/vulkan/vulkan_record.cpp
#endif

namespace {

class NotBuilt final : public Record {
 public:
  NotBuilt(const char* name, const char* how) : name_(name), how_(how) {}
  const char* name() const override { return name_; }
  bool is_built() const override { return false; }
  int device_count() const override { return 0; }
  std::string report() const override { return str_cat("not built (", how_, ")"); }
  Expected<Backend*> device(int) const override {
    return Status(Code::kBackendUnavailable,
                  str_cat("backend '", name_, "' is not built into this library (", how_, ")"));
  }

 private:
  const char* name_;
  const char* how_;
};

}  // namespace

std::string Record::sdp_refusal(int sdp, const ops::SdpCase&) const {
  return str_cat(sdp_name(sdp), ": the ", name(), " backend has no attention kernel",
                 is_built() ? "" : " (not built)");
}

const char* sdp_name(int sdp) {
  static const char* names[] = {"MATH", "FLASH", "MEM_EFFICIENT", "CUDNN"};
  return sdp >= 0 && sdp < 4 ? names[sdp] : "unknown sdp backend";
}

const std::vector<const Record*>& records() {
  // Records of backends this build lacks: statics (the list lives to the process's end).
#if !defined(TERN_HAVE_CUDA)
  static const NotBuilt no_cuda(
      "cuda", "configure with the CUDA toolkit, cuBLAS and cuDNN: TERN_WITH_CUDA");
#endif
#if !defined(TERN_HAVE_VULKAN)
  static const NotBuilt no_vulkan(
      "vulkan", "configure with the Vulkan headers, loader and glslc: TERN_WITH_VULKAN");
#endif
  static const NotBuilt no_mps("mps", "Metal/MPS is built on Apple platforms only");
  static const std::vector<const Record*> all = {
    &cpu_record(),
#if defined(TERN_HAVE_CUDA)
    &cuda_record(),
#else
    &no_cuda,
#endif
#if defined(TERN_HAVE_VULKAN)
    &vulkan_record(),
#else
    &no_vulkan,
#endif
    &no_mps,
  };
  return all;
}

const Record* record(std::string_view kind) {
  for (const Record* r : records()) {
    if (kind == r->name()) return r;
  }
  return nullptr;
}

bool parse_name(const std::string& text, Name* out) {
  const size_t colon = text.find(':');
  Name n;
  n.kind = text.substr(0, colon);
  if (n.kind.empty()) return false;
  if (colon != std::string::npos) {
    const std::string digits = text.substr(colon + 1);
    if (digits.empty() || digits.size() > 3) return false;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
      n.index = n.index * 10 + (c - '0');
    }
  }
  if (out) *out = std::move(n);
  return true;
}

bool is_known(const std::string& name) {
  Name n;
  return parse_name(name, &n) && record(n.kind);
}

Expected<Backend*> get(const std::string& name) {
  Name n;
  const Record* r = parse_name(name, &n) ? record(n.kind) : nullptr;
  if (!r) {
    std::string known;
    for (const Record* k : records()) known += str_cat(known.empty() ? "" : ", ", k->name());
    return invalid_argument("unknown backend '", shorten(name), "' (known: ", known,
                            "; a device as kind:N, e.g. cuda:1)");
  }
  return r->device(n.index);
}

bool is_built(const std::string& name) {
  Name n;
  const Record* r = parse_name(name, &n) ? record(n.kind) : nullptr;
  return r && r->is_built();
}

bool is_available(const std::string& name) {
  Name n;
  const Record* r = parse_name(name, &n) ? record(n.kind) : nullptr;
  return r && n.index < r->device_count();
}

}  // namespace tern::backends
