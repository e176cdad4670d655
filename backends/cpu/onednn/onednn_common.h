// Shared pieces of the oneDNN kernels: the engine, plain-layout tags, and per-thread scratchpads
// (user scratchpad mode, so concurrent runs of one primitive never share scratch memory).
#pragma once

#include <dnnl.hpp>
#if defined(TERN_HAVE_OPENMP)
#include <omp.h>
#endif

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_libraries.h"
#include "backends/cpu/onednn/winograd.h"
#include "core/kernel.h"
#include "core/tensor.h"
#include "core/threading.h"
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

// Activation layout for a tensor of rank 3 to 5 whose channels are blocked by `block`
// (TensorInfo::block): 8 or 16 is oneDNN's nCw8c / nChw8c / nCdhw8c or the 16 ones (padded with
// zeros to a multiple), any other count is one block of all channels, channels-last (NWC, NHWC,
// NDHWC), and 0 the plain layout. (The planner blocks rank-4 tensors only; kernels use the other
// ranks for their own copies.)
inline dnnl::memory::format_tag layout_tag(size_t rank, int block) {
  using tag = dnnl::memory::format_tag;
  if (block <= 0 || rank < 3 || rank > 5) return activation_tag(rank);
  if (block == 16) return rank == 3 ? tag::nCw16c : rank == 4 ? tag::nChw16c : tag::nCdhw16c;
  if (block == 8) return rank == 3 ? tag::nCw8c : rank == 4 ? tag::nChw8c : tag::nCdhw8c;
  return rank == 3 ? tag::nwc : rank == 4 ? tag::nhwc : tag::ndhwc;
}
inline bool is_channels_last(dnnl::memory::format_tag t) {
  using tag = dnnl::memory::format_tag;
  return t == tag::nwc || t == tag::nhwc || t == tag::ndhwc;
}

// One stream per thread: creating one per execution costs microseconds the small models feel.
inline dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(engine());
  return stream;
}

// The memory objects of a primitive's arguments, made once and reused: creating them on every run
// (plus the argument map) costs allocations and microseconds a model of 50 small convolutions
// feels. Each run takes a set from the pool (a new one when all are in use, so concurrent runs
// never share one), points it at this run's buffers and gives it back.
class ArgPool {
 public:
  ArgPool() = default;
  // `args`: (DNNL_ARG_*, layout) per argument, in the order execute() gets their buffers.
  ArgPool(std::vector<std::pair<int, dnnl::memory::desc>> args, dnnl::memory::desc scratch)
      : args_(std::move(args)), scratch_(std::move(scratch)) {}
  ArgPool(const ArgPool&) = delete;
  ArgPool& operator=(const ArgPool&) = delete;
  ArgPool(ArgPool&& o) noexcept { *this = std::move(o); }
  ArgPool& operator=(ArgPool&& o) noexcept {
    args_ = std::move(o.args_);
    scratch_ = std::move(o.scratch_);
    free_ = std::move(o.free_);
    return *this;
  }

  // The source, weights, optional bias and destination of a convolution or matmul.
  static ArgPool weighted(const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
                          const dnnl::memory::desc* bias, const dnnl::memory::desc& dst,
                          dnnl::memory::desc scratch) {
    std::vector<std::pair<int, dnnl::memory::desc>> args = {{DNNL_ARG_SRC, src},
                                                            {DNNL_ARG_WEIGHTS, weights}};
    if (bias) args.emplace_back(DNNL_ARG_BIAS, *bias);
    args.emplace_back(DNNL_ARG_DST, dst);
    return ArgPool(std::move(args), std::move(scratch));
  }
  // Runs a pool made by weighted(); `bias` is not read when it was made without one.
  Status execute_weighted(const dnnl::primitive& prim, void* src, void* weights, void* bias,
                          void* dst) const {
    return args_.size() == 4 ? execute(prim, {src, weights, bias, dst})
                             : execute(prim, {src, weights, dst});
  }

  Status execute(const dnnl::primitive& prim, std::initializer_list<void*> handles) const {
    if (handles.size() != args_.size() || args_.size() > kMaxArgs) {
      return internal_error("oneDNN: ", handles.size(), " buffers for ", args_.size(),
                            " arguments");
    }
    std::unique_ptr<Set> set;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        set = std::move(free_.back());
        free_.pop_back();
      }
    }
    try {
      if (!set) {
        set = std::make_unique<Set>();
        for (const auto& a : args_)
          set->mems.emplace_back(a.second, engine(), nullptr);  // no buffer yet
      }
      dnnl_exec_arg_t exec[kMaxArgs + 1];
      size_t n = 0;
      for (void* h : handles) {
        set->mems[n].set_data_handle(h);
        exec[n] = {args_[n].first, set->mems[n].get()};
        ++n;
      }
      if (size_t bytes = scratch_.get_size()) {
        void* p = thread_scratchpad(bytes);
        if (!p) return out_of_memory("oneDNN scratchpad of ", bytes, " bytes");
        if (!set->scratch) set->scratch = dnnl::memory(scratch_, engine(), nullptr);
        set->scratch.set_data_handle(p);
        exec[n++] = {DNNL_ARG_SCRATCHPAD, set->scratch.get()};
      }
      dnnl::stream& stream = thread_stream();
      const dnnl_status_t st =
          dnnl_primitive_execute(prim.get(), stream.get(), static_cast<int>(n), exec);
      if (st != dnnl_success) {
        return internal_error("oneDNN: primitive execution failed (status ", static_cast<int>(st),
                              ")");
      }
      stream.wait();
    } catch (const dnnl::error& e) {
      return internal_error("oneDNN: ", e.what(), " (status ", static_cast<int>(e.status), ")");
    }
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(set));
    return Status::ok();
  }

 private:
  static constexpr size_t kMaxArgs = 8;
  struct Set {
    std::vector<dnnl::memory> mems;
    dnnl::memory scratch;
  };
  std::vector<std::pair<int, dnnl::memory::desc>> args_;
  dnnl::memory::desc scratch_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Set>> free_;
};

// oneDNN's primitives divide by dimensions and index in 32 bits in places (a declared batch of
// 2^32 made its matmul divide by zero): tensors with no elements or more than 2^31 - 1 go to the
// portable kernels instead (UNSUPPORTED here passes the node on to them).
inline Status require_onednn_sizes(const OpContext& ctx) {
  for (const auto* list : {&ctx.inputs, &ctx.outputs}) {
    for (const TensorInfo& t : *list) {
      if (!t.present) continue;
      int64_t n = 1;
      for (int64_t d : t.shape) {
        if (d <= 0) return unsupported("oneDNN: a tensor with no elements");
        if (d > INT32_MAX || (n *= d) > INT32_MAX) {
          return unsupported("oneDNN: a tensor of 2^31 elements or more");
        }
      }
    }
  }
  return Status::ok();
}

// A kernel name for the implementation oneDNN chose (its impl_info_str: "jit:avx512_core",
// "gemm:jit", "ref:any", ...): profiles and `tern bench` tell its reference code apart.
inline const char* impl_kernel_name(const std::string& impl) {
  if (impl.rfind("ref", 0) == 0) return "onednn(ref)";
  if (impl.find("wino") != std::string::npos) return "onednn(winograd)";
  // (brdgmm: oneDNN's batch-reduce kernel for depthwise convolutions)
  if (impl.find("brg") != std::string::npos || impl.find("brdgmm") != std::string::npos) {
    return "onednn(brgemm)";
  }
  if (impl.find("gemm") != std::string::npos) return "onednn(gemm)";
  if (impl.find("jit") != std::string::npos) return "onednn(jit)";
  return "onednn";
}

// bfloat16 nodes on oneDNN's bf16 kernels (bf16 products, float32 accumulation): only where
// oneDNN may use AVX-512 BF16 or AMX (cpu.max_capability caps it process-wide); elsewhere it
// would emulate them, slower than the float32 kernels between conversions, which then run.
inline Status require_native_bf16() {
  if (onednn_native_bf16()) return Status::ok();
  return unsupported(
      "oneDNN: no AVX-512 BF16 here (CPU or cpu.max_capability), bfloat16 "
      "runs widened to float32");
}

// Runs reorder `r` from `src` (layout `from`) into `dst` (layout `to`) on this thread's stream.
inline Status run_reorder(const dnnl::reorder& r, const dnnl::memory::desc& from, void* src,
                          const dnnl::memory::desc& to, void* dst) {
  try {
    dnnl::memory f(from, engine(), src), t(to, engine(), dst);
    r.execute(thread_stream(), f, t);
  } catch (const dnnl::error& e) {
    return internal_error("oneDNN reorder: ", e.what());
  }
  return Status::ok();
}

// Whether oneDNN's uint8 x int8 kernels sum exactly in int32 here: with VNNI (VPDPBUSD) they do;
// without it (AVX2, AVX-512 before VNNI) they add pairs of products in 16 bits with saturation
// (VPMADDUBSW), which int8 weights beyond +-64 can overflow. `weights`: the int8 weights.
inline Status require_exact_int8(const Tensor& weights) {
  if (onednn_int8_vnni()) return Status::ok();
  const auto* w = static_cast<const int8_t*>(weights.raw());
  for (int64_t i = 0; i < weights.numel(); ++i) {
    if (w[i] > 64 || w[i] < -64) {
      return unsupported(
          "oneDNN int8 without VNNI saturates 16-bit pair sums: weights beyond "
          "+-64 (7-bit) run Tern's own int8 kernels");
    }
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
// a model packed by another version is packed again rather than misread, and the variant: how
// the kernel derived the weights it packed from the model's (empty: as they are; a convolution
// may cut taps or merge groups), so two derivations with the same layout are never confused.
inline std::string packed_key(const std::string& variant = {}) {
  const dnnl_version_t* v = dnnl_version();
  return str_cat("onednn ", v->major, ".", v->minor, ".", v->patch, " md",
                 sizeof(dnnl_memory_desc_t), variant.empty() ? "" : " ", variant);
}

// The stored layout description at the head of a packed blob.
inline dnnl_memory_desc_t stored_desc(const PackedData& d) {
  dnnl_memory_desc_t stored;
  std::memcpy(&stored, d.data.raw(), sizeof(stored));
  return stored;
}

// Within its scope (when `on`) the calling thread's parallel regions run on it alone. Weights are
// packed while a session is made: a parallel region there gives the thread a team whose idle
// workers then spin (OMP_WAIT_POLICY / GOMP_SPINCOUNT) through the rest of the creation,
// contending with it for the cores; 2-thread sessions took 3-21 ms to make instead of 2.5 on 2
// cores. The primitives are still made for the run's threads: only the packing runs on one.
class OneThread {
 public:
#if defined(TERN_HAVE_OPENMP)
  explicit OneThread(bool on) : was_(on ? omp_get_max_threads() : 1) {
    if (was_ != 1) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (was_ != 1) omp_set_num_threads(was_);
  }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int was_;
#else
  explicit OneThread(bool) {}
#endif
};

// Weights of this many bytes or more are reordered on the session's threads: there the parallel
// reorder pays (a large model's widest layers on many cores), below it would only start a team.
constexpr size_t kParallelReorderBytes = size_t{1} << 22;

// `w` reordered from `plain` into `wanted`, as a blob (the layout description, then the data).
inline Expected<PackedData> reorder_weights(const dnnl::memory::desc& plain,
                                            const dnnl::memory::desc& wanted, const Tensor& w,
                                            const std::string& variant) {
  const size_t total = kPackedHeader + wanted.get_size();
  std::shared_ptr<void> buffer = weight_buffer(total);
  if (!buffer) return out_of_memory("packed weights of ", total, " bytes");
  auto* bytes = static_cast<uint8_t*>(buffer.get());
  std::memset(bytes, 0, kPackedHeader);
  std::memcpy(bytes, &wanted.data, sizeof(wanted.data));
  // Winograd layouts from plain 3x3 weights: Tern's packing (winograd.h), several times faster
  // than oneDNN's reorder.
  if (wanted.data.format_kind == dnnl_format_kind_wino && w.dtype() == DType::kFloat32 &&
      plain.data.ndims == 4 && plain.data.dims[2] == 3 && plain.data.dims[3] == 3 &&
      plain == dnnl::memory::desc(plain.dims(), dnnl::memory::data_type::f32,
                                  dnnl::memory::format_tag::oihw) &&
      pack_winograd_weights(wanted.data.format_desc.wino_desc, w.data<float>(), plain.data.dims[0],
                            plain.data.dims[1], reinterpret_cast<float*>(bytes + kPackedHeader))) {
    advise_huge_pages(bytes, total);
    return PackedData{
        packed_key(variant),
        Tensor::wrap(DType::kUInt8, {static_cast<int64_t>(total)}, bytes, std::move(buffer))};
  }
  try {
    dnnl::memory src(plain, engine(), w.raw());
    dnnl::memory dst(wanted, engine(), bytes + kPackedHeader);
    // Always where kernels are prepared on helpers (core/threading.h): the other threads are
    // busy, and a helper lives for one plan's preparation (its OpenMP team would go with it).
    OneThread one(w.byte_size() < kParallelReorderBytes || beside_helpers());
    dnnl::reorder(src, dst).execute(thread_stream(), src, dst);
    thread_stream().wait();
  } catch (const dnnl::error& e) {
    return internal_error("oneDNN weight reorder: ", e.what());
  }
  advise_huge_pages(bytes, total);
  return PackedData{packed_key(variant), Tensor::wrap(DType::kUInt8, {static_cast<int64_t>(total)},
                                                      bytes, std::move(buffer))};
}

// A kernel's derivation of its weights' value (taps cut, groups merged, widened to float32).
using DeriveWeights = std::function<Expected<Tensor>()>;

// Weights `w` (plain layout `plain`) in layout `wanted`: the model's packed copy when it has one
// with the same layout, else the session's copy (packed once per session and layout, shared by
// every plan: `cache`, may be null), else a reorder into memory of the kernel's own. With
// `derive`, what is packed is its result (named by `variant`), still cached as a layout of w; it
// is called only when the weights are packed here: a model packed ahead (an optimized .tern)
// skips the derivation, a full copy of the weights (14 MB for one of R3D-18's convolutions).
inline Expected<PackedWeights> pack_weights(const dnnl::memory::desc& plain,
                                            const dnnl::memory::desc& wanted, const TensorInfo& w,
                                            WeightCache* cache, const std::string& variant = {},
                                            const DeriveWeights& derive = {}) {
  std::optional<Tensor> derived;
  auto source = [&]() -> Expected<const Tensor*> {
    if (!derive) return w.value;
    if (!derived) {
      TERN_ASSIGN_OR_RETURN(Tensor t, derive());
      derived = std::move(t);
    }
    return &*derived;
  };
  PackedWeights packed;
  const size_t total = kPackedHeader + wanted.get_size();
  auto use = [&](const PackedData& d, bool own) -> Status {
    auto* data = static_cast<uint8_t*>(const_cast<void*>(d.data.raw())) + kPackedHeader;
    try {
      packed.memory = dnnl::memory(wanted, engine(), data);  // only ever read
    } catch (const dnnl::error& e) {
      return internal_error("oneDNN packed weights: ", e.what());
    }
    packed.blob = d;
    packed.in_place = !own;
    return Status::ok();
  };
  if (w.packed) {
    const std::string key = packed_key(variant);
    for (const PackedData& d : *w.packed) {
      if (d.key != key || d.data.byte_size() != total) continue;
      const dnnl_memory_desc_t stored = stored_desc(d);
      if (!dnnl_memory_desc_equal(&stored, &wanted.data)) continue;
      TERN_RETURN_IF_ERROR(use(d, false));
      return packed;
    }
  }
  if (cache) {
    // Keyed by the layout description's bytes: each layout once per session.
    const auto* md = reinterpret_cast<const unsigned char*>(&wanted.data);
    uint64_t hash = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(wanted.data); ++i) hash = (hash ^ md[i]) * 1099511628211ull;
    TERN_ASSIGN_OR_RETURN(PackedData d,
                          cache->packed(*w.value, str_cat(packed_key(variant), " #", hash),
                                        [&]() -> Expected<PackedData> {
                                          TERN_ASSIGN_OR_RETURN(const Tensor* from, source());
                                          return reorder_weights(plain, wanted, *from, variant);
                                        }));
    const dnnl_memory_desc_t stored = stored_desc(d);
    if (d.data.byte_size() == total && dnnl_memory_desc_equal(&stored, &wanted.data)) {
      TERN_RETURN_IF_ERROR(use(d, false));
      return packed;
    }
  }
  TERN_ASSIGN_OR_RETURN(const Tensor* from, source());
  TERN_ASSIGN_OR_RETURN(PackedData d, reorder_weights(plain, wanted, *from, variant));
  TERN_RETURN_IF_ERROR(use(d, true));
  return packed;
}

// The layouts of `w` the session has packed so far, for a primitive to try before it lets oneDNN
// choose: one packed copy then serves every shape the library accepts it for.
inline std::vector<dnnl::memory::desc> known_layouts(const TensorInfo& w, WeightCache* cache,
                                                     const std::string& variant = {}) {
  std::vector<dnnl::memory::desc> out;
  if (!cache || !w.value) return out;
  for (const PackedData& d : cache->layouts(*w.value, packed_key(variant) + " #")) {
    out.emplace_back(stored_desc(d));
  }
  return out;
}

// A kernel holding its constant weights (input 1) in a oneDNN layout: counted in the plan's
// memory and carried by a saved optimized model.
class PackedWeightKernel : public Kernel {
 public:
  size_t packed_bytes() const override { return packed_w_.bytes(); }
  std::vector<PackedWeight> packed_weights() const override {
    if (!packed_w_.blob.data.raw()) return {};
    return {PackedWeight{1, packed_w_.blob}};
  }

 protected:
  PackedWeights packed_w_;
};

}  // namespace tern::onednn
