// The run arenas of one session, for every plan it runs: a run takes a buffer at least as large as
// its plan's arena and gives it back when it ends. A plan for a new shape therefore reuses the
// memory earlier runs released instead of mapping fresh memory (and faulting its pages in), and
// the session's arena memory stays what its largest concurrent runs need, however many plans it
// has made.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/backend.h"

namespace tern {

class ArenaPool {
 public:
  // Host memory when `device` is null, else that device's (Backend::allocate).
  explicit ArenaPool(Backend* device = nullptr) : device_(device) {}

  // A buffer of at least `bytes`, 64-byte aligned, back to the pool when the lease goes.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept { *this = std::move(o); }
    Lease& operator=(Lease&& o) noexcept {
      std::swap(pool_, o.pool_);
      std::swap(buffer_, o.buffer_);
      std::swap(capacity_, o.capacity_);
      return *this;
    }
    ~Lease();
    uint8_t* data() const { return static_cast<uint8_t*>(buffer_.get()); }

   private:
    friend class ArenaPool;
    ArenaPool* pool_ = nullptr;
    std::shared_ptr<void> buffer_;
    size_t capacity_ = 0;
  };
  Expected<Lease> acquire(size_t bytes);

  // Bytes the pool holds, leased or free.
  size_t bytes() const;

 private:
  void give_back(std::shared_ptr<void> buffer, size_t capacity);
  // Free buffers kept for reuse; smaller ones go first when there are more.
  static constexpr size_t kMaxFree = 4;
  Backend* device_;
  mutable std::mutex mu_;
  std::vector<std::pair<size_t, std::shared_ptr<void>>> free_;  // (capacity, buffer)
  size_t held_ = 0;
};

}  // namespace tern
