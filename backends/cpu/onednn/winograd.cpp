#include "backends/cpu/onednn/winograd.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace tern::onednn {
namespace {

// oneDNN 2.6's weight transforms G (alpha x 3): F(2x2,3x3) and F(4x4,3x3) with its interpolation
// points and scaling (src/cpu/x64/wino_reorder.hpp): the transformed kernel is G w G^T.
constexpr float kG2x3[4][3] = {
    {1.0f, 0.0f, 0.0f}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0.0f, 0.0f, 1.0f}};
constexpr float kG4x3[6][3] = {{1.13777777777778f, 0.f, 0.f},
                               {-0.688403361344538f, -0.430252100840336f, -0.26890756302521f},
                               {-0.688403361344538f, 0.430252100840336f, -0.26890756302521f},
                               {0.119514472455649f, 0.179271708683473f, 0.26890756302521f},
                               {0.119514472455649f, -0.179271708683473f, 0.26890756302521f},
                               {0.f, 0.f, 1.f}};
constexpr int kMaxAlpha = 6, kMaxBlock = 64;

}  // namespace

bool pack_winograd_weights(const dnnl_wino_desc_t& d, const float* w, int64_t oc, int64_t ic,
                           float* out) {
  const float* g = nullptr;
  switch (d.wino_format) {
    case dnnl_wino_wei_aaOIoi:
    case dnnl_wino_wei_aaOio:
    case dnnl_wino_wei_aaOBiOo:
      if (d.alpha != 4) return false;
      g = &kG2x3[0][0];
      break;
    case dnnl_wino_wei_OBaaIBOIio:
      if (d.alpha != 6) return false;
      g = &kG4x3[0][0];
      break;
    default:
      return false;
  }
  const int64_t a = d.alpha, ocb = d.oc_block, icb = d.ic_block, OC = d.oc, IC = d.ic;
  if (d.r != 3 || ocb <= 0 || icb <= 0 || ocb > kMaxBlock || OC % ocb || IC % icb || OC < oc ||
      IC < ic) {
    return false;
  }
  const int64_t nb_oc = OC / ocb, nb_ic = IC / icb;
  const int64_t oc2 = d.oc2_block > 0 ? d.oc2_block : 1;
  const int64_t ic2 =
      d.wino_format == dnnl_wino_wei_OBaaIBOIio && d.ic2_block > 0 ? d.ic2_block : 1;
  if (nb_oc % oc2 || nb_ic % ic2) return false;
  const int64_t oc_chunks = nb_oc / oc2, ic_chunks = nb_ic / ic2;
  const size_t elems = static_cast<size_t>(a * a * OC * IC);
  if (d.size > elems * sizeof(float)) {
    std::memset(out + elems, 0, d.size - elems * sizeof(float));
  }
  // One 3x3 kernel per (output, input) channel pair, each transformed tile's alpha x alpha values
  // written to their planes: a block of ocb output channels at a time, so that the layouts whose
  // innermost dimension is the output channel get runs of ocb contiguous values.
  std::array<float, kMaxAlpha * kMaxAlpha * kMaxBlock> tile;
  for (int64_t ob = 0; ob < nb_oc; ++ob) {
    for (int64_t icp = 0; icp < IC; ++icp) {
      for (int64_t o = 0; o < ocb; ++o) {
        const int64_t ocp = ob * ocb + o;
        float k[3][3] = {};
        if (ocp < oc && icp < ic) std::memcpy(k, w + (ocp * ic + icp) * 9, sizeof(k));
        float wg[3][kMaxAlpha];  // w G^T, summed in oneDNN's order
        for (int ih = 0; ih < 3; ++ih) {
          for (int64_t j = 0; j < a; ++j) {
            float s = 0;
            for (int iw = 0; iw < 3; ++iw) s += k[ih][iw] * g[j * 3 + iw];
            wg[ih][j] = s;
          }
        }
        for (int64_t i = 0; i < a; ++i) {
          for (int64_t j = 0; j < a; ++j) {
            float s = 0;
            for (int kk = 0; kk < 3; ++kk) s += g[i * 3 + kk] * wg[kk][j];
            tile[static_cast<size_t>((i * a + j) * ocb + o)] = s;
          }
        }
      }
      const int64_t ib = icp / icb, i = icp % icb;
      for (int64_t uh = 0; uh < a; ++uh) {
        for (int64_t uw = 0; uw < a; ++uw) {
          const int64_t plane = uh * a + uw;
          const float* src = tile.data() + plane * ocb;
          int64_t base = 0, stride = 1;
          switch (d.wino_format) {
            case dnnl_wino_wei_aaOIoi:
              base = plane * IC * OC + ob * ocb * IC + ib * ocb * icb + i;
              stride = icb;
              break;
            case dnnl_wino_wei_aaOio:
              base = ((plane * nb_oc + ob) * nb_ic + ib) * icb * ocb + i * ocb;
              break;
            case dnnl_wino_wei_aaOBiOo: {
              const int64_t occ = ob / oc2, ob2 = ob % oc2;
              base = ((plane * oc_chunks + occ) * nb_ic + ib) * oc2 * icb * ocb +
                     (i * oc2 + ob2) * ocb;
              break;
            }
            default: {  // OBaaIBOIio
              const int64_t occ = ob / oc2, obb = ob % oc2;
              const int64_t icc = ib / ic2, ibb = ib % ic2;
              base = (((((((occ * a + uh) * a + uw) * ic_chunks + icc) * oc2 + obb) * ic2 + ibb) *
                           icb +
                       i) *
                      ocb);
              break;
            }
          }
          if (stride == 1) {
            std::memcpy(out + base, src, static_cast<size_t>(ocb) * sizeof(float));
          } else {  // aaOIoi: the input channel innermost
            for (int64_t o = 0; o < ocb; ++o) out[base + o * stride] = src[o];
          }
        }
      }
    }
  }
  return true;
}

}  // namespace tern::onednn
