// Shared pieces of the oneDNN kernels: the engine, plain-layout tags, and per-thread scratchpads
// (user scratchpad mode, so concurrent runs of one primitive never share scratch memory).
#pragma once

#include <dnnl.hpp>

#include <memory>
#include <string>
#include <unordered_map>

#include "core/kernel.h"
#include "core/tensor.h"

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

// Activation layout for a rank-4 tensor whose channels are blocked by `block` (8 or 16, padded
// with zeros to a multiple of it), or the plain layout when block is 0.
inline dnnl::memory::format_tag layout_tag(size_t rank, int block) {
  using tag = dnnl::memory::format_tag;
  if (rank == 4 && block == 16) return tag::nChw16c;
  if (rank == 4 && block == 8) return tag::nChw8c;
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

// Reorders constant weights once into the layout the primitive chose.
inline Expected<dnnl::memory> pack_weights(const dnnl::memory::desc& plain,
                                           const dnnl::memory::desc& wanted, const Tensor& w) {
  try {
    dnnl::memory src(plain, engine(), w.raw());
    dnnl::memory dst(wanted, engine());
    dnnl::stream stream(engine());
    dnnl::reorder(src, dst).execute(stream, src, dst);
    stream.wait();
    return dst;
  } catch (const dnnl::error& e) {
    return internal_error("oneDNN weight reorder: ", e.what());
  }
}

}  // namespace tern::onednn
