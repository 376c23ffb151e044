// Which depthwise NHWC kernel version each pass runs (convolution_depthwise_nhwc.h lists them):
// production's rule, choose(), is the one place to change after measuring (`crema bench conv
// --layout nhwc --shape depthwise` and `crema bench conv-tc --math bf16 --shape depthwise` time
// every version beside each other; scripts/bench/peer_conv_depthwise.py adds PyTorch's).
#include "kernels/convolution/convolution_depthwise_nhwc.h"

#include <cstdint>

namespace crema::kernels::cuda::depthwise_nhwc {
namespace {

int vector_channels(Element type) {
  return type == Element::f32 ? 4 : 8;
}

// A square 3x3, 5x5 or 7x7 filter at strides (1, 1) or (2, 2), no dilation, one filter a channel
// and whole 16-byte vectors of channels: what the halo tile (v2) takes.
bool tile_takes(const Conv2dGeometry& g, Element type, int64_t stride) {
  return g.K == g.C && g.C % vector_channels(type) == 0 && g.R == g.S &&
         (g.S == 3 || g.S == 5 || g.S == 7) && g.stride_h == stride && g.stride_w == stride &&
         g.dilation_h == 1 && g.dilation_w == 1;
}

// One filter a channel, S = 3, 5, 7 and R <= 7, strides (1, 1) or (2, 2), no dilation, whole
// 16-byte vectors, and a band of one output row within 160 KB of shared memory (32 bytes a pixel
// at most: W up to ~1,600 for a 7x7): what the filter gradient's bands (v4) take.
bool bands_take(const Conv2dGeometry& g, Element type) {
  const int64_t row_bytes = (g.R * ((g.Q() - 1) * g.stride_w + g.S) + g.Q()) * 32;
  return g.K == g.C && g.C % vector_channels(type) == 0 && (g.S == 3 || g.S == 5 || g.S == 7) &&
         g.R >= 1 && g.R <= 7 && g.stride_h == g.stride_w && (g.stride_w == 1 || g.stride_w == 2) &&
         g.dilation_h == 1 && g.dilation_w == 1 && row_bytes <= 160 * 1024;
}

bool takes(Pass pass, const Conv2dGeometry& g, Element type, Version v) {
  switch (pass) {
    case Pass::forward:  // v2 and v3: the halo tile, v3 pipelined
      return v == Version::v1 || ((v == Version::v2 || v == Version::v3) &&
                                  (tile_takes(g, type, 1) || tile_takes(g, type, 2)));
    case Pass::data:
      return v == Version::v1 || ((v == Version::v2 || v == Version::v3) && tile_takes(g, type, 1));
    case Pass::filter:
      // v3 differs from v2 where 16-byte vectors split the filter into row groups.
      return v == Version::v1 || v == Version::v2 ||
             (v == Version::v3 && narrow_filter_channels(g, type) > 0 &&
              g.R * g.S * vector_channels(type) > kWalkSums) ||
             (v == Version::v4 && bands_take(g, type));
    default:
      return false;
  }
}

}  // namespace

// v3's channels a thread (whole_filter_channels), 0 where v3 does not take g: it needs the row
// walk's geometry (one filter a channel, S = 3, 5, 7, horizontal stride 1 or 2, no horizontal
// dilation), R <= S (one group of rows) and C a multiple of the vector.
int narrow_filter_channels(const Conv2dGeometry& g, Element type) {
  if (g.K != g.C || g.dilation_w != 1 || (g.stride_w != 1 && g.stride_w != 2) || g.R > g.S ||
      (g.S != 3 && g.S != 5 && g.S != 7)) {
    return 0;
  }
  const int v = whole_filter_channels(int(g.S), vector_channels(type));
  return v >= 2 && g.C % v == 0 ? v : 0;
}

const char* version_name(Version version) {
  switch (version) {
    case Version::best:
      return "best";
    case Version::v1:
      return "v1";
    case Version::v2:
      return "v2";
    case Version::v3:
      return "v3";
    case Version::v4:
      return "v4";
  }
  return "?";
}

namespace {

// Where the bands (v4) lose to whole waves (v2): measured on an H200, 2026-11-27, every version
// of the 23 depthwise layers of MobileNetV2, EfficientNet-B0 and ConvNeXt-T at batch 64 in one
// call (kernels/convolution/MEASUREMENTS.md, "Versions, measured"). 3x3 filters on 112 x 112
// inputs (fp32 c32: v4 0.153 ms, v2 0.135; c96 stride 2: 0.278 / 0.173; bf16 c32: 0.107 / 0.090),
// and 7 x 7 outputs of fp32 3x3 filters at stride 1 (c1152: 0.047 / 0.035; at stride 2, c576,
// v4 wins: 0.033 / 0.047) and of bf16 5x5 filters (c1152: 0.051 / 0.047; c672 stride 2: 0.043 /
// 0.037). Elsewhere v4 wins by up to 3x (the 7x7 filters).
bool bands_lose(const Conv2dGeometry& g, Element type) {
  if (g.S == 3 && g.W >= 112) return true;
  const bool small_output = g.P() * g.Q() <= 49;
  return small_output && ((type == Element::f32 && g.S == 3 && g.stride_w == 1) ||
                          (type != Element::f32 && g.S == 5));
}

// Where the pipelined halo tile (v3) beats the plain one (v2), same measurement: at stride 1, the
// 16-bit 5x5 and 7x7 filters (by 3-15%: bf16 7x7 c768 0.033 / 0.038 ms) and the fp32 7x7 ones on
// maps of at most 14 x 14 (7x7 c768: 0.035 / 0.039); the 3x3 filters, strided ones and fp32's
// others run v2 (3x3 on 112 x 112 c32 fp32: v3 0.089, v2 0.086; bf16 5x5 stride 2 c144: 0.077 /
// 0.065): with few taps per element, v3's two tiles of 40 KB keep fewer blocks an SM in flight.
bool pipeline_wins(const Conv2dGeometry& g, Element type) {
  if (g.stride_w != 1) return false;
  return type == Element::f32 ? g.S == 7 && g.P() * g.Q() <= 196 : g.S >= 5;
}
}  // namespace

// Production's rule. Forward and stride-1 backward data: the halo tile wherever it fits (it reads
// each input element from DRAM and L2 about once; v1 re-reads the R rows of each output row
// through L2: v2 beat v1 on 75 of the 78 rows that both run), pipelined (v3) where pipeline_wins.
// Filter gradient: the bands (v4) where they fit and do not lose (bands_lose), else whole waves
// (v2); the whole filter a thread (v3) was the fastest on no row (its registers spill), so it
// stays a rung of the ladder.
Version choose(Pass pass, const Conv2dGeometry& g, Element type) {
  switch (pass) {
    case Pass::forward:
    case Pass::data:
      if (!takes(pass, g, type, Version::v2)) return Version::v1;
      return pipeline_wins(g, type) ? Version::v3 : Version::v2;
    case Pass::filter:
      return takes(pass, g, type, Version::v4) && !bands_lose(g, type) ? Version::v4
                                                                        : Version::v2;
  }
  return Version::v1;
}

Version runs(Pass pass, const Conv2dGeometry& g, Element type, Version asked) {
  if (asked == Version::best) asked = choose(pass, g, type);
  return takes(pass, g, type, asked) ? asked : Version::v1;
}

}  // namespace crema::kernels::cuda::depthwise_nhwc
