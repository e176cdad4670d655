// The CUDA backend's record (backends/registry.h), compiled into libtern: it opens the module
// libtern_cuda.so (backends/module_loader.h) the first time anything asks about CUDA, and answers
// from the module's interface table, or says what is missing: the module (and where it was looked
// for), a library it needs, or the driver.
#include "backends/cuda/cuda_module.h"
#include "backends/registry.h"

namespace tern::backends {

const CudaModule* cuda_module() {
  const ModuleLoad& m = load_module("cuda", sizeof(CudaModule));
  return m.loaded ? reinterpret_cast<const CudaModule*>(m.table) : nullptr;
}

namespace {

class CudaRecord final : public Record {
 public:
  const char* name() const override { return "cuda"; }
  bool is_built() const override { return load().found; }
  int device_count() const override {
    const CudaModule* m = cuda_module();
    return m ? m->device_count() : 0;
  }
  std::string report() const override {
    const CudaModule* m = cuda_module();
    if (!m) return module_report(load());
    return str_cat(m->device_report(), "; cuDNN ", m->cudnn_version(), "; ", module_report(load()));
  }
  Expected<Backend*> device(int index) const override {
    const std::string name = index == 0 ? "cuda" : str_cat("cuda:", index);
    const CudaModule* m = cuda_module();
    if (!m) {
      return Status(Code::kBackendUnavailable,
                    str_cat("backend '", name, "' needs its module, and ", module_report(load())));
    }
    const int count = m->device_count();
    if (count == 0) {
      return Status(
          Code::kBackendUnavailable,
          str_cat("backend '", name, "': no CUDA device usable here (", m->device_report(), ")"));
    }
    if (index >= count) {
      return Status(Code::kBackendUnavailable,
                    str_cat("backend '", name, "': there is no CUDA device ", index, " (",
                            m->device_report(), ")"));
    }
    return m->backend(index);
  }
  int64_t library_version(std::string_view lib) const override {
    const CudaModule* m = cuda_module();
    return lib == "cudnn" && m ? m->cudnn_version() : -1;
  }
  bool has_attention() const override { return true; }
  std::string sdp_refusal(int sdp, const ops::SdpCase& c) const override {
    const CudaModule* m = cuda_module();
    if (!m || m->device_count() == 0) {
      return str_cat(sdp_name(sdp), " on CUDA: there is no CUDA device (", report(), ")");
    }
    return m->sdp_refusal(sdp, c);
  }

 private:
  static const ModuleLoad& load() { return load_module("cuda", sizeof(CudaModule)); }
};

}  // namespace

const Record& cuda_record() {
  static const CudaRecord r;
  return r;
}

}  // namespace tern::backends
