// Tensor: a dtype, a concrete shape and a pointer to element data whose lifetime is shared
// (owned storage, a caller's borrowed buffer, or a slice of a mapped model file).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/status.h"

namespace tern {

using Shape = std::vector<int64_t>;

// Element count of a shape, or an error naming the problem (negative dim, overflow past 2^62).
Expected<int64_t> checked_numel(const Shape& shape);
int64_t numel(const Shape& shape);  // for shapes already validated
std::string shape_str(const Shape& shape);

class Tensor;

// The payloads of the values that are not tensors (DType kSequence, kOptional).
struct SequenceData {
  DType elem = DType::kUndefined;  // every element's dtype
  std::vector<Tensor> items;
};
struct OptionalData {
  DType elem = DType::kUndefined;       // a tensor dtype, or kSequence
  DType seq_elem = DType::kUndefined;   // elem kSequence: the sequence's element dtype
  std::shared_ptr<const Tensor> value;  // null: the optional holds nothing
};

class Tensor {
 public:
  Tensor() = default;
  // A sequence of tensors of dtype `elem` (any shapes): a rank-0 value of dtype kSequence whose
  // payload holds them. Immutable; copies share the payload.
  static Tensor sequence(DType elem, std::vector<Tensor> items);
  // An optional holding `value` (a tensor or a sequence) or nothing: a rank-0 value of dtype
  // kOptional. `elem`/`seq_elem` describe what it may hold (see OptionalData).
  static Tensor optional(DType elem, DType seq_elem, std::optional<Tensor> value);
  // The payload of a kSequence / kOptional value (null for any other dtype).
  const SequenceData* as_sequence() const {
    return dtype_ == DType::kSequence ? static_cast<const SequenceData*>(data_) : nullptr;
  }
  const OptionalData* as_optional() const {
    return dtype_ == DType::kOptional ? static_cast<const OptionalData*>(data_) : nullptr;
  }
  // Owned, zero-initialised storage, aligned to kAlignment.
  static Expected<Tensor> allocate(DType dtype, Shape shape);
  // The same without the zeroing (strings are still constructed empty): for a tensor that is
  // written wholly before anyone reads it (a plan's output, which its step writes).
  static Expected<Tensor> allocate_uninitialized(DType dtype, Shape shape);
  // Wraps existing data; `keepalive` owns whatever must outlive the tensor (may be null).
  // `device` says whose memory `data` is (host unless given).
  static Tensor wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> keepalive,
                     Device device = {});

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return tern::numel(shape_); }
  size_t byte_size() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return dtype_ != DType::kUndefined; }
  // Host tensors are read and written through raw(); a device tensor's raw() is a device
  // address that only its backend's kernels and copies may use.
  const Device& device() const { return device_; }
  bool on_host() const { return device_.is_host(); }

  void* raw() const { return data_; }
  // True when this tensor alone keeps its storage alive: no copy, view or wrapper of it shares
  // the buffer (wrapped memory without an owner never qualifies). Its buffer may then be handed
  // on without a copy.
  bool owns_storage_alone() const { return keepalive_ && keepalive_.use_count() == 1; }
  template <class T>
  T* data() const {
    return static_cast<T*>(data_);
  }

  // Same storage, new shape of equal element count.
  Tensor reshaped(Shape shape) const;
  // Deep copy into owned host storage (host tensors only: device tensors are copied by their
  // backend, see backends::copy_tensor); a sequence's or optional's elements are copied too.
  Expected<Tensor> clone() const;
  // Reads element i converted to int64 (integer and bool tensors) or double (floats). Every
  // dtype is covered: the float8/float4 types decode, strings read as 0 / NaN.
  int64_t int_at(int64_t i) const;
  double float_at(int64_t i) const;

  static constexpr size_t kAlignment = 64;

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<void> keepalive_;
  Device device_;
};

// 64-byte aligned allocation; returns null on failure.
std::shared_ptr<void> aligned_buffer(size_t bytes);
// Pages of its own, returned to the system when released (never kept for reuse the way large
// aligned_buffer blocks are): for memory a pool of its own keeps, such as the run arenas, whose
// pool drops a buffer exactly when it should stop being resident. Null on failure.
std::shared_ptr<void> mapped_buffer(size_t bytes);

}  // namespace tern
