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

// Production's rule. Forward and stride-1 backward data: the pipelined halo tile (v3) wherever it
// fits (it reads each input element from DRAM and L2 about once, the next tile in flight while
// the current one is walked; v1 re-reads the R rows of each output row through L2). Filter
// gradient: the bands (v4) wherever they fit (x and dy read about once, no spills), else the whole
// filter a thread (v3) where 16-byte vectors would split it into row groups, else whole waves (v2).
Version choose(Pass pass, const Conv2dGeometry& g, Element type) {
  switch (pass) {
    case Pass::forward:
    case Pass::data:
      return takes(pass, g, type, Version::v3) ? Version::v3 : Version::v1;
    case Pass::filter:
      return takes(pass, g, type, Version::v4)   ? Version::v4
             : takes(pass, g, type, Version::v3) ? Version::v3
                                                 : Version::v2;
  }
  return Version::v1;
}

Version runs(Pass pass, const Conv2dGeometry& g, Element type, Version asked) {
  if (asked == Version::best) asked = choose(pass, g, type);
  return takes(pass, g, type, asked) ? asked : Version::v1;
}

}  // namespace crema::kernels::cuda::depthwise_nhwc
