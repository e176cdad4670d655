// The flags registry (DESIGN §2): every tunable of the engine is one typed flag with a name, a
// default, an optional environment variable for its initial value, a doc line and a scope. The
// typed C functions (tern_cuda_matmul_set_allow_tf32, ...) and the generic tern_flag_* functions
// read and write the same registry.
//
// Values are held as int64: bools are 0/1, ints are themselves, enums are the index of their
// choice, CPU lists the id of the interned list (core/cpu_set.h). Global values change at any time
// (atomically); a run reads one consistent FlagValues at its start (global values overlaid with the
// session's overrides, then the run's), so a change takes effect at the next run boundary.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tern {

enum class FlagId : int {
  kNumThreads,
  kNumInteropThreads,
  kCpuMaxCapability,
  kDeterministicAlgorithms,
  kOnednnVerbose,
  kOptEinsumEnabled,
  kOptEinsumStrategy,
  kSdpMath,
  kSdpFlash,
  kSdpMemEfficient,
  kSdpCudnn,
  kMhaFastpath,
  kCudaAllowTf32,
  kCudaAllowFp16Reduced,
  kCudaAllowBf16Reduced,
  kCudaBlasLibrary,
  kCudaLinalgLibrary,
  kCudnnEnabled,
  kCudnnAllowTf32,
  kCudnnDeterministic,
  kCudnnBenchmark,
  kCudnnBenchmarkLimit,
  kCpuConvMemoryFormat,
  kCudaGraphs,
  kVulkanAllowFp16,
  kVulkanFp16Arithmetic,
  kVulkanConvAlgorithm,
  kCpuMatmulAllowBf16,
  kCpuConvAllowBf16,
  kCpuAffinity,
  kGraphOptimize,
  kCpuThreadBudget,
  kCpuThreadBudgetWait,
  kCpuAdaptiveThreads,
  kCpuSpinUs,
  kCpuRunHomes,
  kBlasVerbose,
  kSdpFp16Bf16ReductionMath,
  kCpuConvWinograd,
  kCpuFloat16InFloat32,
  kCount
};
constexpr size_t kFlagCount = static_cast<size_t>(FlagId::kCount);

// kCpuList values are ids of interned CPU lists (core/cpu_set.h), 0 the empty list.
enum class FlagType { kBool, kInt, kEnum, kCpuList };
// Where a value came from, widest to narrowest.
enum class FlagSource : int { kDefault, kEnvironment, kApi, kSession, kRun };
// The narrowest level at which a flag may be overridden: kGlobal flags are process-wide only,
// kSession flags may also be set in session options, kRun flags also in run options.
enum class FlagScope : int { kGlobal, kSession, kRun };
// Whether a flag's value changes what a plan is made of (kernel choice, fusions, layouts): plans
// are cached per the values of the flags marked kKernels (Flags::plan_key), so a change of one
// takes effect at the next run. kNone flags are read while running, or have no effect.
enum class PlanEffect : int { kNone, kKernels };

const char* flag_type_name(FlagType t);      // "bool" | "int" | "enum" | "cpulist"
const char* flag_source_name(FlagSource s);  // "default" | "environment" | "api" | ...
const char* flag_scope_name(FlagScope s);    // "global" | "session" | "run"

struct FlagDef {
  FlagId id;
  const char* name;  // PyTorch's dotted path without "torch.backends.": "cudnn.benchmark"
  FlagType type;
  FlagScope scope;
  PlanEffect plan;      // whether plans depend on its value
  const char* backend;  // the backend whose kernels read it ("cpu", "cuda", "vulkan"), "" for all
  int64_t default_value;
  const char* env;  // variable(s) read once for the initial value, "" when none
  const char* doc;
  std::vector<const char*> choices = {};  // kEnum: the allowed texts (matched case-insensitively)
  int64_t min = 0, max = 1;               // kInt: inclusive range
};

// Parses text for a flag; the error names the allowed values.
Expected<int64_t> parse_flag_value(const FlagDef& def, std::string_view text);
std::string flag_value_text(const FlagDef& def, int64_t value);

// The effective values for one run (or one session).
struct FlagValues {
  std::array<int64_t, kFlagCount> value{};
  std::array<FlagSource, kFlagCount> source{};
  int64_t operator[](FlagId id) const { return value[static_cast<size_t>(id)]; }
  bool on(FlagId id) const { return value[static_cast<size_t>(id)] != 0; }
};

// Values set for one session or one run, on top of the global ones.
class FlagOverrides {
 public:
  // Checks the name, the scope (at least `level`) and the value.
  Status set(std::string_view name, std::string_view text, FlagScope level);
  void set(FlagId id, int64_t value) {
    set_[static_cast<size_t>(id)] = true, value_[static_cast<size_t>(id)] = value;
  }
  void clear(FlagId id) { set_[static_cast<size_t>(id)] = false; }
  bool has(FlagId id) const { return set_[static_cast<size_t>(id)]; }
  int64_t get(FlagId id) const { return value_[static_cast<size_t>(id)]; }

 private:
  std::array<bool, kFlagCount> set_{};
  std::array<int64_t, kFlagCount> value_{};
};

class Flags {
 public:
  // The process-wide registry; initial values are read from the environment on first use.
  static Flags& global();

  static const std::vector<FlagDef>& defs();
  static const FlagDef& def(FlagId id) { return defs()[static_cast<size_t>(id)]; }
  static const FlagDef* find(std::string_view name);

  int64_t get(FlagId id) const;
  bool on(FlagId id) const { return get(id) != 0; }
  FlagSource source(FlagId id) const;
  // The environment variable that supplied the value (source kEnvironment), or a note about an
  // environment value that was present but invalid and therefore ignored; "" otherwise.
  std::string env_note(FlagId id) const;
  // Checks the range and records source kApi.
  Status set(FlagId id, int64_t value);
  Status set_text(std::string_view name, std::string_view text);
  std::string text(FlagId id) const { return flag_value_text(def(id), get(id)); }

  // Globals overlaid with session overrides, then run overrides (either may be null).
  FlagValues resolve(const FlagOverrides* session, const FlagOverrides* run) const;

  // The values of the flags plans depend on (PlanEffect::kKernels) for a session on
  // `kernel_backends` (Backend::kernel_backend names): general flags and those of the listed
  // backends, in table order. Plans are cached per this key.
  static std::vector<int64_t> plan_key(const FlagValues& values,
                                       const std::vector<std::string>& kernel_backends);

 private:
  Flags();
  struct Impl;
  Impl* impl_;
};

}  // namespace tern
