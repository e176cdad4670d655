#include "backends/cpu/panel_gemm.h"

#include <algorithm>
#include <array>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#define TERN_AVX512 __attribute__((target("avx512f,fma")))
#define TERN_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace tern::panel {
namespace {

constexpr int kMaxRows = kTileRows;
constexpr int kMaxPanels = 4;  // panels per tile (AVX-512)

struct TileArgs {
  const float* a;  // the tile's first row of A
  int64_t lda;
  const float* b;  // the tile's first panel
  int64_t k;       // depth (panel stride is k * 16)
  float* c;        // the tile's top-left element of C
  int64_t ldc;
  const float* bias;  // at the tile's first column, or null
  const float* z;     // the residual's element at the tile's top-left, or null
  int64_t ldz;
  float alpha;
  bool relu;
  int cols;  // valid columns in the tile (the last tile of a row may be narrower)
};
using TileFn = void (*)(const TileArgs&);

// ---- Tiles --------------------------------------------------------------------------------------

// Portable: plain loops the compiler vectorises (the baseline of every architecture).
void tile_portable(const TileArgs& t, int rows, int panels) {
  float acc[kMaxRows][kMaxPanels * kPanel] = {};
  const int width = panels * static_cast<int>(kPanel);
  for (int64_t kk = 0; kk < t.k; ++kk) {
    for (int p = 0; p < panels; ++p) {
      const float* bp = t.b + (p * t.k + kk) * kPanel;
      for (int r = 0; r < rows; ++r) {
        const float av = t.a[r * t.lda + kk];
        float* row = acc[r] + p * kPanel;
        for (int l = 0; l < kPanel; ++l) row[l] += av * bp[l];
      }
    }
  }
  for (int r = 0; r < rows; ++r) {
    float* c = t.c + r * t.ldc;
    for (int j = 0; j < std::min(width, t.cols); ++j) {
      float v = acc[r][j] * t.alpha + (t.bias ? t.bias[j] : 0.0f);
      if (t.z) v += t.z[r * t.ldz + j];
      c[j] = t.relu ? std::max(v, 0.0f) : v;
    }
  }
}

#if defined(__x86_64__)

template <int R, int P>
TERN_AVX512 void tile512(const TileArgs& t) {
  // Two accumulator sets over even and odd k where the tile is small: each FMA chain then waits
  // on every other k only.
  constexpr int U = R * P <= 8 ? 2 : 1;
  __m512 acc[U][R][P];
  for (int u = 0; u < U; ++u)
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) acc[u][r][p] = _mm512_setzero_ps();
  const int64_t ps = t.k * kPanel;
  int64_t kk = 0;
  for (; kk + U <= t.k; kk += U) {
    for (int u = 0; u < U; ++u) {
      __m512 bv[P];
      for (int p = 0; p < P; ++p) bv[p] = _mm512_load_ps(t.b + p * ps + (kk + u) * kPanel);
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_set1_ps(t.a[r * t.lda + kk + u]);
        for (int p = 0; p < P; ++p) acc[u][r][p] = _mm512_fmadd_ps(av, bv[p], acc[u][r][p]);
      }
    }
  }
  for (; kk < t.k; ++kk) {
    for (int p = 0; p < P; ++p) {
      const __m512 bv = _mm512_load_ps(t.b + p * ps + kk * kPanel);
      for (int r = 0; r < R; ++r) {
        acc[0][r][p] = _mm512_fmadd_ps(_mm512_set1_ps(t.a[r * t.lda + kk]), bv, acc[0][r][p]);
      }
    }
  }
  const __m512 alpha = _mm512_set1_ps(t.alpha);
  for (int p = 0; p < P; ++p) {
    const int left = t.cols - p * static_cast<int>(kPanel);
    const __mmask16 m = left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1);
    const __m512 bias =
        t.bias ? _mm512_maskz_loadu_ps(m, t.bias + p * kPanel) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      __m512 v = U == 2 ? _mm512_add_ps(acc[0][r][p], acc[U - 1][r][p]) : acc[0][r][p];
      v = _mm512_fmadd_ps(v, alpha, bias);
      if (t.z) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, t.z + r * t.ldz + p * kPanel));
      // (The all-lanes masked form: GCC 12 warns inside _mm512_max_ps.)
      if (t.relu) v = _mm512_mask_max_ps(v, 0xFFFF, v, _mm512_setzero_ps());
      _mm512_mask_storeu_ps(t.c + r * t.ldc + p * kPanel, m, v);
    }
  }
}

template <int R>
TERN_AVX2 void tile256(const TileArgs& t) {
  constexpr int U = R <= 2 ? 2 : 1;
  __m256 acc[U][R][2];
  for (int u = 0; u < U; ++u)
    for (int r = 0; r < R; ++r) acc[u][r][0] = acc[u][r][1] = _mm256_setzero_ps();
  int64_t kk = 0;
  for (; kk + U <= t.k; kk += U) {
    for (int u = 0; u < U; ++u) {
      const float* bp = t.b + (kk + u) * kPanel;
      const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 av = _mm256_broadcast_ss(t.a + r * t.lda + kk + u);
        acc[u][r][0] = _mm256_fmadd_ps(av, b0, acc[u][r][0]);
        acc[u][r][1] = _mm256_fmadd_ps(av, b1, acc[u][r][1]);
      }
    }
  }
  for (; kk < t.k; ++kk) {
    const float* bp = t.b + kk * kPanel;
    const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(t.a + r * t.lda + kk);
      acc[0][r][0] = _mm256_fmadd_ps(av, b0, acc[0][r][0]);
      acc[0][r][1] = _mm256_fmadd_ps(av, b1, acc[0][r][1]);
    }
  }
  const __m256 alpha = _mm256_set1_ps(t.alpha);
  for (int h = 0; h < 2; ++h) {
    const int left = t.cols - h * 8;
    if (left <= 0) break;
    alignas(32) int32_t lanes[8];
    for (int l = 0; l < 8; ++l) lanes[l] = l < left ? -1 : 0;
    const __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
    const __m256 bias = t.bias ? _mm256_maskload_ps(t.bias + h * 8, m) : _mm256_setzero_ps();
    for (int r = 0; r < R; ++r) {
      __m256 v = U == 2 ? _mm256_add_ps(acc[0][r][h], acc[U - 1][r][h]) : acc[0][r][h];
      v = _mm256_fmadd_ps(v, alpha, bias);
      if (t.z) v = _mm256_add_ps(v, _mm256_maskload_ps(t.z + r * t.ldz + h * 8, m));
      if (t.relu) v = _mm256_max_ps(v, _mm256_setzero_ps());
      _mm256_maskstore_ps(t.c + r * t.ldc + h * 8, m, v);
    }
  }
}

template <int P, size_t... Rs>
constexpr std::array<TileFn, kMaxRows> rows512(std::index_sequence<Rs...>) {
  return {{&tile512<static_cast<int>(Rs) + 1, P>...}};
}
// kTiles512[panels - 1][rows - 1]
const std::array<std::array<TileFn, kMaxRows>, kMaxPanels> kTiles512 = {
    rows512<1>(std::make_index_sequence<kMaxRows>()),
    rows512<2>(std::make_index_sequence<kMaxRows>()),
    rows512<3>(std::make_index_sequence<kMaxRows>()),
    rows512<4>(std::make_index_sequence<kMaxRows>())};
template <size_t... Rs>
constexpr std::array<TileFn, kMaxRows> rows256(std::index_sequence<Rs...>) {
  return {{&tile256<static_cast<int>(Rs) + 1>...}};
}
const std::array<TileFn, kMaxRows> kTiles256 = rows256(std::make_index_sequence<kMaxRows>());

#endif  // __x86_64__

}  // namespace

void pack(const float* b, int64_t k, int64_t n, int64_t k_stride, int64_t n_stride, float* out) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
#if defined(__x86_64__)
  // The layouts attention packs per head at run time (a Kᵀ and a V of 32 x 32 took a quarter of
  // an 8-head attention's time in the element loop below): whole panels copied, or transposed,
  // without a bound check per element; only the last panel's missing columns are zeroed.
  if (n_stride == 1 || k_stride == 1) {
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t c0 = p * kPanel, width = std::min(kPanel, n - c0);
      float* panel = out + p * k * kPanel;
      if (width < kPanel) std::fill(panel, panel + k * kPanel, 0.0f);
      if (n_stride == 1) {  // rows of B contiguous: a row of the panel is one run
        for (int64_t kk = 0; kk < k; ++kk) {
          std::copy(b + kk * k_stride + c0, b + kk * k_stride + c0 + width, panel + kk * kPanel);
        }
      } else {  // columns of B contiguous (Bᵀ row-major): a column of the panel is one run
        for (int64_t l = 0; l < width; ++l) {
          const float* col = b + (c0 + l) * n_stride;
          for (int64_t kk = 0; kk < k; ++kk) panel[kk * kPanel + l] = col[kk];
        }
      }
    }
    return;
  }
#endif
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t kk = 0; kk < k; ++kk) {
      float* row = out + (p * k + kk) * kPanel;
      const float* src = b + kk * k_stride;
      for (int64_t l = 0; l < kPanel; ++l) {
        const int64_t col = p * kPanel + l;
        row[l] = col < n ? src[col * n_stride] : 0.0f;
      }
    }
  }
}

int64_t panels_per_tile(CpuIsa isa) {
  return isa == CpuIsa::kAvx512 ? kMaxPanels : isa == CpuIsa::kAvx2 ? 1 : 2;
}

void multiply(CpuIsa isa, const float* a, int64_t lda, const float* packed, int64_t k, int64_t n,
              float* c, int64_t ldc, const Epilogue& e, int64_t r0, int64_t r1, int64_t p0,
              int64_t p1) {
  const int64_t group = panels_per_tile(isa);
  for (int64_t pg = p0; pg < p1; pg += group) {
    const int np = static_cast<int>(std::min(group, p1 - pg));
    TileArgs t;
    t.lda = lda;
    t.b = packed + pg * k * kPanel;
    t.k = k;
    t.ldc = ldc;
    t.bias = e.bias ? e.bias + pg * kPanel : nullptr;
    t.ldz = e.ldz;
    t.alpha = e.alpha;
    t.relu = e.relu;
    t.cols = static_cast<int>(std::min<int64_t>(np * kPanel, n - pg * kPanel));
    for (int64_t r = r0; r < r1; r += kMaxRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, r1 - r));
      t.a = a + r * lda;
      t.c = c + r * ldc + pg * kPanel;
      t.z = e.z ? e.z + r * e.ldz + pg * kPanel : nullptr;
#if defined(__x86_64__)
      if (isa == CpuIsa::kAvx512) {
        kTiles512[static_cast<size_t>(np - 1)][static_cast<size_t>(rows - 1)](t);
        continue;
      }
      if (isa == CpuIsa::kAvx2) {
        kTiles256[static_cast<size_t>(rows - 1)](t);
        continue;
      }
#endif
      tile_portable(t, rows, np);
    }
  }
}

}  // namespace tern::panel
