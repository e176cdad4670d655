// The backend interface (DESIGN §2). Ops reach a backend only through the kernel registry, so a new
// op never edits this interface. Device backends (CUDA, Vulkan, MPS) implement the memory methods
// with device memory; the session inserts copies where a device partition meets the host.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/kernel.h"

namespace tern {

class KernelRegistry;

// How a node's kernel on a backend treats channel-blocked activations (TensorInfo::block); the
// planner (core/plan/layout.cpp) chooses layouts from these answers alone.
enum class LayoutRole {
  kPlain,            // reads and writes plain tensors only (the planner inserts reorders)
  kConvolution,      // reads blocked inputs and writes its output in the planned layout
  kKeepsBlock,       // pooling, Batch/Instance/GroupNormalization: reads input 0 blocked and
                     // may write its block
  kElementwise,      // computes alike on any layout its inputs and output share
  kElementwiseRows,  // kElementwise, and takes an operand of one value per channel (binary ops)
  kReadsBlocked,     // reads blocked inputs, writes plain output (global pooling, Transpose
                     // NCHW -> NHWC)
  kJoinsChannels,    // Concat on the channels: writes the block its inputs share, each input
                     // a whole number of blocks (the blocks then follow one another)
  kWritesBlocked,    // reads plain inputs, writes its output in the planned layout (Transpose
                     // NHWC -> NCHW: runs of a block's channels per pixel)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // The name its kernels are registered under (one for all devices of a kind: "cuda").
  virtual const char* kernel_backend() const { return name(); }
  virtual bool is_built() const = 0;
  virtual bool is_available() const = 0;
  // The memory this backend's kernels read and write; host backends use host memory directly.
  virtual Device device() const { return {}; }
  bool is_host() const { return device().is_host(); }
  // The registry its kernels are in: the process's one (KernelRegistry::global()) for backends
  // built into libtern; a backend module keeps its own, so its kernels live and die with it.
  virtual const KernelRegistry& kernels() const;
  // True when some kernel exists for the op type (any dtype): decides early whether a model can
  // run at all.
  virtual bool supports_op(const std::string& op_type) const;
  // The kernel for one node with concrete input types and shapes, or UNSUPPORTED.
  virtual Expected<std::unique_ptr<Kernel>> prepare(const OpContext& ctx) const;
#if !defined(TERN_MINIMAL)
  // Whether prepare() for nodes of this op may run on other threads beside the preparation of the
  // plan's other nodes, and is costly enough to be worth it (JIT-compiled kernels): such nodes
  // are prepared ahead on helper threads when the plan's runs use several (core/plan/partition).
  virtual bool prepares_concurrently(const std::string& op_type) const { return false; }
#endif
  // The activation layout this backend's convolutions run fastest with, for a graph whose
  // convolutions are `convs`, under these flags: a channel block (8, 16), kChannelsLast, or 0
  // when blocked layouts would not help (the planner then keeps every tensor plain).
  static constexpr int kChannelsLast = -1;
  struct ConvSite {
    const Node* node = nullptr;
    int64_t in_channels = 0, out_channels = 0;  // 0 when not known while planning
    int64_t out_pixels = 0;                     // output elements per channel
  };
  virtual int conv_layout(const FlagValues& flags, const std::vector<ConvSite>& convs) const {
    return 0;
  }
  // How this backend's kernel for `node` treats blocked layouts.
  virtual LayoutRole layout_role(const Node& node) const { return LayoutRole::kPlain; }
  // Intra-op threads for the next kernels run on the calling thread.
  virtual void set_num_threads(int n) {}
  // Called on the calling thread at the start and end of every run with the run's flags (for
  // settings that live in a library rather than in a kernel, like oneDNN's verbose mode).
  virtual void begin_run(const FlagValues& flags) {}
  virtual void end_run(const FlagValues& flags) {}
  // Waits until the work this thread queued on the device is done.
  virtual Status synchronize() { return Status::ok(); }
  // Called after each device step a stoppable run (cancel or deadline set) queued eagerly: a
  // backend whose launches return before the device has run them keeps the host from running far
  // ahead (CUDA: at most two chunks of steps in flight), so a stop between steps waits for little
  // queued work. A captured segment replays whole, without it.
  virtual Status pace() { return Status::ok(); }
  // The way out of a run that failed or was stopped (its outputs are dropped): discards the work
  // this thread queued that the device has not been given yet, where the backend holds such work
  // (Vulkan's command buffer being recorded), and waits for the rest, so the run's memory is free
  // again when it returns.
  virtual Status abandon() { return synchronize(); }
  // Device memory (host backends never call these). allocate() returns memory of device();
  // releasing the last reference frees it (device backends cache it for reuse).
  virtual Expected<std::shared_ptr<void>> allocate(size_t bytes);
  // Host -> device; queued on the calling thread's stream (the host buffer must stay valid until
  // the next synchronize()).
  virtual Status copy_to_device(const Tensor& host, Tensor& device);
  // Device -> host; complete when it returns.
  virtual Status copy_to_host(const Tensor& device, Tensor& host);
  // Device -> device, queued like copy_to_device.
  virtual Status copy_on_device(const Tensor& src, Tensor& dst);
  // Capture and replay of a sequence of kernel launches (CUDA graphs): capture() runs `body`
  // with the launches recorded instead of executed and returns the replayable result; replay()
  // queues it on the calling thread's stream. Backends without it answer UNSUPPORTED.
  virtual bool can_capture() const { return false; }
  virtual Expected<std::shared_ptr<void>> capture(const std::function<Status()>& body);
  virtual Status replay(void* captured);
};

}  // namespace tern
