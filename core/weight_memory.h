// Memory for long-lived kernel data (weights packed into a kernel's layout at session creation),
// in 2 MiB-aligned regions. Once written, they are advised for transparent huge pages
// (advise_huge_pages), which khugepaged merges them into in the background: fewer TLB misses in
// the runs. Faulting them in as huge pages while packing was faster on a warm host but stalled
// session creation where the host had discarded the freed guest memory.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/kernel.h"

namespace tern {

// 64-byte aligned, null on failure. Buffers of 2 MiB and more get a mapping of their own; smaller
// ones are carved one after another from shared 2 MiB-aligned chunks, so a model's small packed
// weights share huge pages. A chunk is returned to the system when its last buffer is freed.
std::shared_ptr<void> weight_buffer(size_t bytes);

// Advises the 2 MiB pages from the one holding p to the last one [p, p + bytes) fills for
// transparent huge pages: call it once the weights there are written (a chunk's small buffers
// complete its pages one after another).
void advise_huge_pages(const void* p, size_t bytes);

// A packed layout `key` of `floats` floats in a fresh weight_buffer, written by `fill`, then
// advised for huge pages.
Expected<PackedData> packed_blob(size_t floats, const std::string& key,
                                 const std::function<void(float*)>& fill);

// The copy of a constant's packed layout a kernel uses.
struct PackedCopy {
  PackedData data;
  bool own = false;  // packed for this kernel alone (no session cache): its packed_bytes()
};
// The packed layout `key` (`bytes` bytes) of the constant input `info`: the one the model file
// carries (info.packed, as `tern convert --optimize` saves it), else the session's copy (`pack`
// on first use, shared by every plan and kernel), else one of the kernel's own.
Expected<PackedCopy> packed_copy(const TensorInfo& info, const std::string& key, size_t bytes,
                                 WeightCache* cache, const WeightCache::Packer& pack);

}  // namespace tern
