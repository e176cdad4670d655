// Shared pieces of the oneDNN kernels: the engine, plain-layout tags, and per-thread scratchpads
// (user scratchpad mode, so concurrent runs of one primitive never share scratch memory).
#pragma once

#include <dnnl.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/kernel.h"
#include "core/tensor.h"
#include "core/weight_memory.h"

namespace tern::onednn {

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

inline dnnl::memory::dims to_dims(const std::vector<int64_t>& v) {
  return dnnl::memory::dims(v.begin(), v.end());
}

// Plain (row-major) activation layout for a rank-3/4/5 tensor.
inline dnnl::memory::format_tag activation_tag(size_t rank) {
  using tag = dnnl::memory::format_tag;
  return rank == 3 ? tag::ncw : rank == 4 ? tag::nchw : tag::ncdhw;
}

// Scratch memory for one primitive execution on the calling thread; grows, never shrinks.
inline void* thread_scratchpad(size_t bytes) {
  thread_local std::shared_ptr<void> buf;
  thread_local size_t size = 0;
  if (bytes > size) {
    buf = aligned_buffer(bytes);
    size = buf ? bytes : 0;
  }
  return buf.get();
}

// Activation layout for a rank-4 tensor whose channels are blocked by `block` (TensorInfo::block):
// 8 or 16 is oneDNN's nChw8c / nChw16c (padded with zeros to a multiple), any other count is one
// block of all channels, channels-last (NHWC), and 0 the plain layout.
inline dnnl::memory::format_tag layout_tag(size_t rank, int block) {
  using tag = dnnl::memory::format_tag;
  if (rank == 4 && block == 16) return tag::nChw16c;
  if (rank == 4 && block == 8) return tag::nChw8c;
  if (rank == 4 && block > 0) return tag::nhwc;
  return activation_tag(rank);
}

// One stream per thread: creating one per execution costs microseconds the small models feel.
inline dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(engine());
  return stream;
}

// Runs a primitive with the given arguments plus a scratchpad; maps oneDNN errors to Status.
inline Status execute(const dnnl::primitive& prim, const dnnl::memory::desc& scratch_md,
                      std::unordered_map<int, dnnl::memory>& args) {
  try {
    dnnl::stream& stream = thread_stream();
    size_t bytes = scratch_md.get_size();
    if (bytes) {
      void* p = thread_scratchpad(bytes);
      if (!p) return out_of_memory("oneDNN scratchpad of ", bytes, " bytes");
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratch_md, engine(), p));
    }
    prim.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return internal_error("oneDNN: ", e.what(), " (status ", static_cast<int>(e.status), ")");
  }
  return Status::ok();
}

inline dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Constant weights in the layout a primitive chose. They are reordered once at kernel creation,
// or found already packed in the model (PackedData saved by `tern convert --optimize`) and used in
// place from its mapping. The bytes are a header, the oneDNN layout description padded to 64,
// then the data; `blob` holds both so a saved model can carry them.
struct PackedWeights {
  dnnl::memory memory;
  PackedData blob;
  bool in_place = false;  // from the model: no copy of our own
  size_t bytes() const { return in_place ? 0 : blob.data.byte_size(); }
};

constexpr size_t kPackedHeader = (sizeof(dnnl_memory_desc_t) + 63) / 64 * 64;

// Names oneDNN's packed weights: the library version and the size of its layout description, so
// a model packed by another version is packed again rather than misread.
inline std::string packed_key() {
  const dnnl_version_t* v = dnnl_version();
  return str_cat("onednn ", v->major, ".", v->minor, ".", v->patch, " md",
                 sizeof(dnnl_memory_desc_t));
}

// Weights `w` (plain layout `plain`) in layout `wanted`: the model's packed copy when it has one
// with the same layout, else a reorder into memory of our own.
inline Expected<PackedWeights> pack_weights(const dnnl::memory::desc& plain,
                                            const dnnl::memory::desc& wanted, const TensorInfo& w) {
  PackedWeights packed;
  const size_t total = kPackedHeader + wanted.get_size();
  if (w.packed) {
    const std::string key = packed_key();
    for (const PackedData& d : *w.packed) {
      if (d.key != key || d.data.byte_size() != total) continue;
      dnnl_memory_desc_t stored;
      std::memcpy(&stored, d.data.raw(), sizeof(stored));
      if (!dnnl_memory_desc_equal(&stored, &wanted.data)) continue;
      auto* data = static_cast<uint8_t*>(const_cast<void*>(d.data.raw())) + kPackedHeader;
      try {
        packed.memory = dnnl::memory(wanted, engine(), data);  // only ever read
      } catch (const dnnl::error& e) {
        return internal_error("oneDNN packed weights: ", e.what());
      }
      packed.blob = d;
      packed.in_place = true;
      return packed;
    }
  }
  std::shared_ptr<void> buffer = weight_buffer(total);
  if (!buffer) return out_of_memory("packed weights of ", total, " bytes");
  auto* bytes = static_cast<uint8_t*>(buffer.get());
  std::memset(bytes, 0, kPackedHeader);
  std::memcpy(bytes, &wanted.data, sizeof(wanted.data));
  try {
    dnnl::memory src(plain, engine(), w.value->raw());
    packed.memory = dnnl::memory(wanted, engine(), bytes + kPackedHeader);
    dnnl::reorder(src, packed.memory).execute(thread_stream(), src, packed.memory);
    thread_stream().wait();
  } catch (const dnnl::error& e) {
    return internal_error("oneDNN weight reorder: ", e.what());
  }
  packed.blob = PackedData{packed_key(), Tensor::wrap(DType::kUInt8, {static_cast<int64_t>(total)},
                                                      bytes, std::move(buffer))};
  return packed;
}

}  // namespace tern::onednn
