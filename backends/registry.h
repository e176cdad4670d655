// The backend registry: one record per backend kind Tern knows (cpu, cuda, vulkan, mps), built or
// not. The C API, the CLI and sessions ask a kind's record whether it is built and available, how
// many devices it has, what to report, and for the backend object of one device; nothing outside
// backends/ names a backend's own functions or tests TERN_HAVE_* for one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "ops/attention.h"

namespace tern::backends {

class Record {
 public:
  virtual ~Record() = default;
  // The kind's name: "cpu", "cuda", "vulkan", "mps".
  virtual const char* name() const = 0;
  // Compiled into this library; for a backend built as a module, its module file was found.
  virtual bool is_built() const = 0;
  // Devices usable here: 0 when the backend is not built, a library or driver it needs is
  // missing, or there is no device. The CPU is one device.
  virtual int device_count() const = 0;
  bool is_available() const { return device_count() > 0; }
  // One line for tern info: the devices and libraries, or why there are none (and, for a module,
  // where it was looked for).
  virtual std::string report() const = 0;
  // The backend object of device `index` (`cuda:1` is the cuda record's device 1): created on
  // first use and never destroyed. BACKEND_UNAVAILABLE says why there is none.
  virtual Expected<Backend*> device(int index) const = 0;
  // The version number of a library this backend runs on ("cudnn" -> 91900), -1 when it has none
  // by that name or it cannot be loaded.
  virtual int64_t library_version(std::string_view library) const { return -1; }
  // Whether the backend has scaled-dot-product attention kernels (tern_sdp_can_use asks those).
  virtual bool has_attention() const { return false; }
  // Why the attention kernel `sdp` (tern_sdp_backend: 0 MATH, 1 FLASH, 2 MEM_EFFICIENT, 3 CUDNN)
  // of this backend would not run case `c`; "" when it would.
  virtual std::string sdp_refusal(int sdp, const ops::SdpCase& c) const;
  // The instruction set or device generation the backend dispatches to ("AVX512"), "" if none.
  virtual const char* capability() const { return ""; }
  // tern_parallel_info's lines about this backend's threads and thread pools ("" when it has
  // none of its own), given the intra-op and inter-op counts and where they came from.
  virtual std::string threads_report(int intra, const std::string& intra_source, int interop,
                                     const std::string& interop_source) const {
    return "";
  }
};

// "MATH", "FLASH", "MEM_EFFICIENT", "CUDNN" (tern_sdp_backend 0..3).
const char* sdp_name(int sdp);

// Every kind, in the order tern info lists them: cpu, cuda, vulkan, mps.
const std::vector<const Record*>& records();
// The record of a kind, or null for an unknown kind.
const Record* record(std::string_view kind);

// Backend names: a kind ("cuda", device 0) or a kind and a device index ("cuda:1").
struct Name {
  std::string kind;
  int index = 0;
};
// False for text that is neither (the kind is not checked against the records here).
bool parse_name(const std::string& text, Name* out);
// A name whose kind has a record.
bool is_known(const std::string& name);
// The backend object; INVALID_ARGUMENT for an unknown name, BACKEND_UNAVAILABLE for one that is not
// built or has no such device here.
Expected<Backend*> get(const std::string& name);
bool is_built(const std::string& name);
bool is_available(const std::string& name);

}  // namespace tern::backends
