#include "core/weight_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>

#include "core/memory_budget.h"

namespace tern {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kChunk = 8 * kHugePage;  // address space only: untouched pages cost nothing
constexpr size_t kAlign = 64;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// Maps `bytes` (a multiple of kHugePage) at a 2 MiB boundary. Not advised for transparent huge
// pages yet: faulting huge pages in while the weights are written stalled session creation where
// the host discards freed guest memory (each 2 MiB page zeroed through host faults: GoogLeNet's
// session 16 ms or 60-110 ms at random); advise_huge_pages comes after the writes.
void* map_huge(size_t bytes) {
  const size_t mapped = bytes + kHugePage;
  void* m = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t start = round_up(base, kHugePage);
  if (start > base) ::munmap(m, start - base);
  const size_t tail = base + mapped - (start + bytes);
  if (tail) ::munmap(reinterpret_cast<void*>(start + bytes), tail);
  return reinterpret_cast<void*>(start);
}

// Shared chunks for small buffers: a bump pointer and a count of live buffers per chunk.
struct Chunk {
  uint8_t* base = nullptr;
  size_t used = 0;
  size_t live = 0;
};

class ChunkPool {
 public:
  std::shared_ptr<void> allocate(size_t bytes) {
    Chunk* c = nullptr;
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!current_ || current_->used + bytes > kChunk) {
        retire_current();
        void* m = map_huge(kChunk);
        if (!m) return nullptr;
        current_ = new (std::nothrow) Chunk{static_cast<uint8_t*>(m), 0, 0};
        if (!current_) {
          ::munmap(m, kChunk);
          return nullptr;
        }
      }
      c = current_;
      p = c->base + c->used;
      c->used += bytes;
      ++c->live;
    }
    // Outside the lock: when the control block cannot be allocated, shared_ptr calls the deleter,
    // and release() takes the lock itself.
    return std::shared_ptr<void>(p, [this, c](void*) { release(c); });
  }

 private:
  // A chunk no longer handed out from is unmapped once its last buffer goes.
  void retire_current() {
    if (current_ && current_->live == 0) {
      ::munmap(current_->base, kChunk);
      delete current_;
    }
    current_ = nullptr;
  }

  void release(Chunk* c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (--c->live > 0) return;
    if (c == current_) {
      // Keep the mapping for the next session, but give its pages back.
      ::madvise(c->base, round_up(c->used, kHugePage), MADV_DONTNEED);
      c->used = 0;
      return;
    }
    ::munmap(c->base, kChunk);
    delete c;
  }

  std::mutex mu_;
  Chunk* current_ = nullptr;
};

}  // namespace

void advise_huge_pages(const void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  // From the 2 MiB page the buffer starts in: its bytes before p belong to buffers written
  // before it (a chunk's buffers are written as they are carved) or to none (a mapping's start).
  const auto a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = a / kHugePage * kHugePage, end = (a + bytes) / kHugePage * kHugePage;
  // Advice only: khugepaged merges the pages in the background (without THP they stay 4 KiB).
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

std::shared_ptr<void> weight_buffer(size_t bytes) {
  if (bytes > (size_t{1} << 62)) return nullptr;
  bytes = round_up(bytes == 0 ? 1 : bytes, kAlign);
  if (bytes < kHugePage) {
    static ChunkPool* pool = new ChunkPool();  // never destroyed: buffers may outlive statics
    return allocate_charged(bytes, [bytes] { return pool->allocate(bytes); });
  }
  const size_t rounded = round_up(bytes, kHugePage);
  return allocate_charged(rounded, [rounded]() -> std::shared_ptr<void> {
    void* p = map_huge(rounded);
    if (!p) return nullptr;
    return std::shared_ptr<void>(p, [rounded](void* q) { ::munmap(q, rounded); });
  });
}

Expected<PackedData> packed_blob(size_t floats, const std::string& key,
                                 const std::function<void(float*)>& fill) {
  const size_t bytes = floats * sizeof(float);
  std::shared_ptr<void> buffer = weight_buffer(bytes ? bytes : 64);
  if (!buffer) return out_of_memory("packed weights '", key, "' of ", bytes, " bytes");
  auto* out = static_cast<float*>(buffer.get());
  fill(out);
  advise_huge_pages(out, bytes);
  return PackedData{
      key, Tensor::wrap(DType::kUInt8, {static_cast<int64_t>(bytes)}, out, std::move(buffer))};
}

Expected<PackedCopy> packed_copy(const TensorInfo& info, const std::string& key, size_t bytes,
                                 WeightCache* cache, const WeightCache::Packer& pack) {
  if (info.packed) {
    for (const PackedData& d : *info.packed) {
      if (d.key == key && d.data.byte_size() == bytes) return PackedCopy{d, false};
    }
  }
  if (cache && info.value) {
    TERN_ASSIGN_OR_RETURN(PackedData d, cache->packed(*info.value, key, pack));
    return PackedCopy{std::move(d), false};
  }
  TERN_ASSIGN_OR_RETURN(PackedData d, pack());
  return PackedCopy{std::move(d), true};
}

}  // namespace tern
