#include "core/tensor.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <sys/sysinfo.h>

#include "core/half.h"
#include "core/low_float.h"
#include "core/memory_budget.h"

namespace tern {

namespace {

constexpr size_t kMappedBytes = size_t{256} << 10;

// Whether `bytes` exceed this machine's memory and swap: such a block can never be backed. Where
// the kernel overcommits without limit (vm.overcommit_memory=1) mapping it succeeds, and writing
// it (a tensor's zeros) gets the process killed instead of an OUT_OF_MEMORY status: a 2^42-float
// tensor (16 TiB) on a 128 GiB machine did.
// (Read at each new mapping: a system call beside the mmap. The minimal library has no room for
// the check in its size and maps as asked.)
bool beyond_memory(size_t bytes) {
#if defined(TERN_MINIMAL)
  (void)bytes;
  return false;
#else
  struct sysinfo info {};
  return sysinfo(&info) == 0 && info.mem_unit > 0 &&
         bytes / info.mem_unit > info.totalram + info.totalswap;
#endif
}

// Large buffers (run arenas, big tensors and outputs) have pages of their own, and when freed are
// kept, a few at a time, for the next request they fit (at most twice its size). Through malloc
// they would teach it to keep freed blocks of their size (glibc raises its mmap threshold to the
// largest block freed), and a process whose shapes vary would grow with freed memory its heap
// cannot return; unmapped at once, every run would fault their pages in again (a few us each in a
// VM). Kept blocks are already resident: reusing them keeps the resident set flat.
class LargeBlocks {
 public:
  static LargeBlocks& get() {
    static LargeBlocks* blocks = new LargeBlocks();  // never destroyed: buffers die at exit too
    return *blocks;
  }
  std::shared_ptr<void> allocate(size_t bytes) {
    void* p = nullptr;
    size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second >= bytes && it->second <= 2 * bytes &&
            (best == free_.end() || it->second < best->second)) {
          best = it;
        }
      }
      if (best != free_.end()) {
        p = best->first;
        size = best->second;
        free_.erase(best);
      }
    }
    if (!p) {
      if (beyond_memory(bytes)) return nullptr;
      size = mapped_size(bytes);
      p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return nullptr;
    }
    return std::shared_ptr<void>(p, [this, size](void* q) { give_back(q, size); });
  }

 private:
  static constexpr size_t kKept = 8;
  // A new block is mapped at the next power of two, so that the block a growing tensor frees (a
  // Loop's carried value one row longer each iteration) serves its next sizes: its pages are
  // resident, where a mapping of the exact size would be faulted in afresh every iteration. The
  // slack is address space: only pages written become resident. (bytes: 256 kB to 2^62.)
  static size_t mapped_size(size_t bytes) { return size_t{1} << (64 - __builtin_clzll(bytes - 1)); }
  void give_back(void* p, size_t size) {
    std::pair<void*, size_t> evicted{nullptr, 0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.emplace_back(p, size);
      if (free_.size() > kKept) {  // the least recently freed goes back to the system
        evicted = free_.front();
        free_.erase(free_.begin());
      }
    }
    if (evicted.first) munmap(evicted.first, evicted.second);
  }
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> free_;  // least recently freed first
};

}  // namespace

Expected<int64_t> checked_numel(const Shape& shape) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d < 0) return invalid_argument("dim ", i, " is negative (", d, ")");
    if (d != 0 && n > (int64_t{1} << 62) / d) {
      return invalid_argument("shape ", shape_str(shape), " has more than 2^62 elements");
    }
    n *= d;
  }
  return n;
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::shared_ptr<void> aligned_buffer(size_t bytes) {
  if (bytes > SIZE_MAX / 4) return nullptr;  // (LargeBlocks' size classes stay in range)
  size_t rounded = (bytes + Tensor::kAlignment - 1) / Tensor::kAlignment * Tensor::kAlignment;
  if (rounded == 0) rounded = Tensor::kAlignment;
  return allocate_charged(rounded, [rounded]() -> std::shared_ptr<void> {
    if (rounded >= kMappedBytes) return LargeBlocks::get().allocate(rounded);
    void* p = std::aligned_alloc(Tensor::kAlignment, rounded);
    if (!p) return nullptr;
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  });
}

std::shared_ptr<void> mapped_buffer(size_t bytes) {
  constexpr size_t kPage = 4096;
  if (bytes > SIZE_MAX - kPage) return nullptr;
  const size_t size = std::max<size_t>((bytes + kPage - 1) / kPage * kPage, kPage);
  return allocate_charged(size, [size]() -> std::shared_ptr<void> {
    if (beyond_memory(size)) return nullptr;
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    return std::shared_ptr<void>(p, [size](void* q) { munmap(q, size); });
  });
}

namespace {

// String elements are std::string objects: constructed on allocation, destroyed with the buffer.
std::shared_ptr<void> string_buffer(size_t n) {
  auto buf = aligned_buffer(n * sizeof(std::string));  // (n is at most 2^62 / that)
  if (!buf) return nullptr;
  auto* p = static_cast<std::string*>(buf.get());
  for (size_t i = 0; i < n; ++i) new (p + i) std::string();
  return std::shared_ptr<void>(p, [buf, n](void* q) {
    auto* s = static_cast<std::string*>(q);
    for (size_t i = 0; i < n; ++i) s[i].~basic_string();
  });
}

}  // namespace

Expected<Tensor> Tensor::allocate(DType dtype, Shape shape) {
  TERN_ASSIGN_OR_RETURN(Tensor t, allocate_uninitialized(dtype, std::move(shape)));
  if (t.dtype_ != DType::kString) std::memset(t.data_, 0, t.byte_size());
  return t;
}

Expected<Tensor> Tensor::allocate_uninitialized(DType dtype, Shape shape) {
  const size_t elem = dtype_size(dtype);  // (a string element is a std::string)
  if (elem == 0) {
    return unsupported("tensors of dtype ", dtype_name(dtype), " are not supported");
  }
  TERN_ASSIGN_OR_RETURN(int64_t n, checked_numel(shape));
  if (static_cast<uint64_t>(n) > (uint64_t{1} << 62) / elem) {
    return invalid_argument("tensor of shape ", shape_str(shape), " is too large");
  }
  size_t bytes = static_cast<size_t>(n) * elem;
  auto buf =
      dtype == DType::kString ? string_buffer(static_cast<size_t>(n)) : aligned_buffer(bytes);
  if (!buf)
    return out_of_memory("cannot allocate ", bytes, " bytes for a tensor of shape ",
                         shape_str(shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = buf.get();
  t.keepalive_ = std::move(buf);
  return t;
}

Tensor Tensor::wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> keepalive,
                    Device device) {
  Tensor t;
  t.device_ = device;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.keepalive_ = std::move(keepalive);
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::sequence(DType elem, std::vector<Tensor> items) {
  auto data = std::make_shared<SequenceData>();
  data->elem = elem;
  data->items = std::move(items);
  Tensor t;
  t.dtype_ = DType::kSequence;
  t.data_ = data.get();
  t.keepalive_ = std::move(data);
  return t;
}

Tensor Tensor::optional(DType elem, DType seq_elem, std::optional<Tensor> value) {
  auto data = std::make_shared<OptionalData>();
  data->elem = elem;
  data->seq_elem = seq_elem;
  if (value) data->value = std::make_shared<const Tensor>(std::move(*value));
  Tensor t;
  t.dtype_ = DType::kOptional;
  t.data_ = data.get();
  t.keepalive_ = std::move(data);
  return t;
}

Expected<Tensor> Tensor::clone() const {
  // Sequences and optionals: a new payload holding copies of the elements.
  if (const SequenceData* s = as_sequence()) {
    std::vector<Tensor> items;
    for (const Tensor& item : s->items) {
      TERN_ASSIGN_OR_RETURN(Tensor c, item.clone());
      items.push_back(std::move(c));
    }
    return sequence(s->elem, std::move(items));
  }
  if (const OptionalData* o = as_optional()) {
    std::optional<Tensor> v;
    if (o->value) {
      TERN_ASSIGN_OR_RETURN(v, o->value->clone());
    }
    return optional(o->elem, o->seq_elem, std::move(v));
  }
  if (!on_host()) {
    return internal_error("clone of a tensor on ", device_.name(), " (needs its backend's copy)");
  }
  TERN_ASSIGN_OR_RETURN(Tensor t, allocate(dtype_, shape_));
  if (dtype_ == DType::kString) {
    std::copy(data<std::string>(), data<std::string>() + numel(), t.data<std::string>());
  } else if (byte_size()) {
    std::memcpy(t.raw(), data_, byte_size());
  }
  return t;
}

int64_t Tensor::int_at(int64_t i) const {
  switch (dtype_) {
    case DType::kInt64:
      return data<int64_t>()[i];
    case DType::kInt32:
      return data<int32_t>()[i];
    case DType::kInt16:
      return data<int16_t>()[i];
    case DType::kInt8:
      return data<int8_t>()[i];
    case DType::kUInt8:
      return data<uint8_t>()[i];
    case DType::kUInt16:
      return data<uint16_t>()[i];
    case DType::kUInt32:
      return data<uint32_t>()[i];
    case DType::kUInt64:
      return static_cast<int64_t>(data<uint64_t>()[i]);
    case DType::kBool:
      return data<uint8_t>()[i] != 0;
    case DType::kInt4:  // stored sign-extended, one per byte
    case DType::kInt2:
      return data<int8_t>()[i];
    case DType::kUInt4:
    case DType::kUInt2:
      return data<uint8_t>()[i];
    case DType::kString:
      return 0;
    default: {  // the float types; NaN and out-of-range values give 0 / the int64 limits
      const double v = float_at(i);
      if (std::isnan(v)) return 0;
      if (v <= -9.2e18) return INT64_MIN;
      return v >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(v);
    }
  }
}

double Tensor::float_at(int64_t i) const {
  if (dtype_is_low_float(dtype_)) return low_float_to_float(dtype_, data<uint8_t>()[i]);
  switch (dtype_) {
    case DType::kFloat32:
      return data<float>()[i];
    case DType::kFloat64:
      return data<double>()[i];
    case DType::kFloat16:
      return half_to_float(data<uint16_t>()[i]);
    case DType::kBFloat16:
      return bfloat16_to_float(data<uint16_t>()[i]);
    case DType::kUInt64:
      return static_cast<double>(data<uint64_t>()[i]);
    case DType::kString:
    case DType::kUndefined:
      return std::nan("");
    default:  // the integer types, bool (the float8/float4 types are decoded above)
      return static_cast<double>(int_at(i));
  }
}

}  // namespace tern
