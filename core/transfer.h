// The copy steps the planner inserts where a value produced in one memory (host or a device) is
// read by a kernel of the other (DESIGN §2: unsupported nodes fall back to the next backend with
// copies inserted). ONNX Runtime calls the same nodes MemcpyToHost / MemcpyFromHost.
#pragma once

#include <memory>
#include <vector>

#include "core/backend.h"

namespace tern {

enum class TransferDirection { kToDevice, kToHost };

// Copies input 0 into output 0 through `device`'s copy functions. A tensor that is already where
// the output must be (a caller's device tensor bound as a model input: IO binding) is passed on
// as it is, without a copy.
std::unique_ptr<Kernel> make_transfer_kernel(Backend* device, TransferDirection dir);

// A copy of host tensor `host` in `device`'s memory, complete when it returns (constants that
// device kernels read).
Expected<std::unique_ptr<Tensor>> upload(const Tensor& host, Backend* device);

// The backend among `backends` whose memory is `d` (null: none).
Backend* backend_for(const std::vector<Backend*>& backends, const Device& d);
// `t` in `to`'s memory through one of `backends`: itself when already there, else a copy
// (complete when it returns).
Expected<Tensor> moved_to(const Tensor& t, const Device& to, const std::vector<Backend*>& backends);

}  // namespace tern
