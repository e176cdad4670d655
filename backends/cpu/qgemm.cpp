// Tern's int8 GEMM (qgemm.h): packing, the portable path, the requantisation and the dispatch.
#include "backends/cpu/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_capability.h"
#include "core/parallel.h"
#include "core/weight_memory.h"

namespace tern::qgemm {
namespace {

constexpr int kTileRows = 4;
constexpr int64_t kRowBlock = 32;      // rows per work item (a multiple of kTileRows)
constexpr int64_t kPanelsPerTask = 4;  // panels per work item

// The portable tile: int32 sums of 4 rows x one panel, then the requantisation.
void portable_tile(const int8_t* const* l, const int8_t* panel, int64_t kd, int rows, int cols,
                   int64_t row0, int64_t col0, void* c, int64_t ldc, const Epilogue& e) {
  int32_t acc[kTileRows][kPanel] = {};
  for (int64_t g = 0; g < kd / 4; ++g) {
    const int8_t* b = panel + g * 4 * kPanel;
    for (int r = 0; r < kTileRows; ++r) {
      const int32_t a0 = l[r][4 * g], a1 = l[r][4 * g + 1], a2 = l[r][4 * g + 2],
                    a3 = l[r][4 * g + 3];
      for (int j = 0; j < kPanel; ++j) {
        acc[r][j] += a0 * b[4 * j] + a1 * b[4 * j + 1] + a2 * b[4 * j + 2] + a3 * b[4 * j + 3];
      }
    }
  }
  for (int r = 0; r < rows; ++r) {
    const int64_t row = row0 + r;
    if (e.out_i32) {
      store_int32_row(acc[r], cols, row, col0, c, ldc, e);
      continue;
    }
    auto* out = static_cast<uint8_t*>(c) + row * ldc + col0;
    for (int j = 0; j < cols; ++j) {
      const int64_t i = e.per_row ? row : col0 + j;
      out[j] = static_cast<uint8_t>(requantise(acc[r][j], e.bias[i], e.scale[i], e));
    }
  }
}

}  // namespace

const char* path_name(Path p) {
  return p == Path::kNeonDot ? "neon_dot" : "portable";
}

Path best_path(int64_t cap) {
#if defined(__aarch64__)
  // cpu.max_capability's enum: 0 auto, 7 SVE256 (core/flags.cpp); any other names DEFAULT or
  // another architecture's ISA, which leaves the portable code only.
  if ((cap == 0 || cap == 7) && cpu_features().neon_dotprod) return Path::kNeonDot;
#else
  (void)cap;
#endif
  return Path::kPortable;
}

std::vector<Path> available_paths() {
  std::vector<Path> p = {Path::kPortable};
#if defined(__aarch64__)
  if (cpu_features().neon_dotprod) p.push_back(Path::kNeonDot);
#endif
  return p;
}

Epilogue output_epilogue(const Tensor& y_zero_point, bool per_row, bool relu) {
  Epilogue e;
  e.per_row = per_row;
  e.out_u8 = y_zero_point.dtype() == DType::kUInt8;
  e.zero = static_cast<int32_t>(y_zero_point.int_at(0));
  e.lo = static_cast<float>((e.out_u8 ? 0 : -128) - e.zero);
  e.hi = static_cast<float>((e.out_u8 ? 255 : 127) - e.zero);
  if (relu) e.lo = std::max(e.lo, 0.0f);  // round(max(v, 0)) + zero
  return e;
}

int32_t requantise(int32_t acc, int32_t bias, float scale, const Epilogue& e) {
  // Wrapping add: the true sum fits int32, the parts may not (the kernels' bound).
  const auto a = static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(bias));
  const float v = std::min(std::max(static_cast<float>(a) * scale, e.lo), e.hi);
  return static_cast<int32_t>(std::nearbyint(v)) + e.zero;
}

void multiply(Path path, const int8_t* l, int64_t ldl, const int8_t* r, int64_t kd, int64_t n,
              void* c, int64_t ldc, const Epilogue& e, int64_t r0, int64_t r1, int64_t p0,
              int64_t p1) {
  auto tile = portable_tile;
#if defined(__aarch64__)
  if (path == Path::kNeonDot) tile = neon_dot_tile;
#else
  (void)path;
#endif
  for (int64_t p = p0; p < p1; ++p) {
    const int8_t* panel = r + p * kd * kPanel;
    const int cols = static_cast<int>(std::min(kPanel, n - p * kPanel));
    for (int64_t row = r0; row < r1; row += kTileRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kTileRows, r1 - row));
      const int8_t* rows_l[kTileRows];
      for (int i = 0; i < kTileRows; ++i) rows_l[i] = l + (row + std::min(i, rows - 1)) * ldl;
      tile(rows_l, panel, kd, rows, cols, row, p * kPanel, c, ldc, e);
    }
  }
}

void multiply_all(Path path, const int8_t* l, int64_t ldl, const int8_t* r, int64_t kd, int64_t m,
                  int64_t n, void* c, int64_t ldc, const Epilogue& e, int num_threads) {
  const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
  const int64_t groups = (panels(n) + kPanelsPerTask - 1) / kPanelsPerTask;
  parallel_for(blocks * groups, 1, num_threads, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / groups, g = t % groups;
      multiply(path, l, ldl, r, kd, n, c, ldc, e, b * kRowBlock, std::min(m, (b + 1) * kRowBlock),
               g * kPanelsPerTask, std::min(panels(n), (g + 1) * kPanelsPerTask));
    }
  });
}

Status PackedWeightsKernel::pack_weights(const OpContext& ctx, size_t i, const std::string& key,
                                         size_t bytes, bool shared,
                                         const std::function<void(int8_t*)>& fill) {
  const TensorInfo& info = ctx.inputs[i];
  input_ = i;
  shared_ = shared;
  own_copy_ = false;
  auto make = [&]() -> Expected<PackedData> {
    std::shared_ptr<void> buffer = weight_buffer(bytes);
    if (!buffer) return out_of_memory(ctx.where, ": packed int8 weights of ", bytes, " bytes");
    auto* out = static_cast<int8_t*>(buffer.get());
    std::memset(out, 0, bytes);
    fill(out);
    advise_huge_pages(out, bytes);
    return PackedData{
        key, Tensor::wrap(DType::kUInt8, {static_cast<int64_t>(bytes)}, out, std::move(buffer))};
  };
  bool found = false;
  if (shared && info.packed) {
    for (const PackedData& d : *info.packed) {
      if (d.key == key && d.data.byte_size() == bytes) {
        blob_ = d;
        found = true;
      }
    }
  }
  if (!found && shared && ctx.weights) {
    TERN_ASSIGN_OR_RETURN(blob_, ctx.weights->packed(*info.value, key, make));
  } else if (!found) {
    TERN_ASSIGN_OR_RETURN(blob_, make());
    own_copy_ = true;
  }
  w_ = static_cast<const int8_t*>(blob_.data.raw());
  return Status::ok();
}

}  // namespace tern::qgemm
