// The rows of the wgmma convolutions' implicit GEMMs (convolution_tc_wgmma_sm90a.cu): which
// output pixels a 128-row tile holds, the slabs of (tap, channels) their reduction walks, the TMA
// boxes of A that fill a stage, and the geometry behind them (the forward's rows, backward data's
// output phases, the tensor maps over x and dy). Host and device code over plain integers; sm_90a
// files only, as convolution_tc_wgmma.cuh.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/convolution/convolution_tc_phase.h"
#include "kernels/convolution/convolution_tc_wgmma.cuh"
#include "kernels/convolution/geometry.h"

namespace crema::kernels::cuda::tc::wg {

// The GEMM's rows (output pixels m = n*P*Q + p*Q + q) of each row tile, its slabs, and A's box
// for each. Flat (1x1, stride 1): 128 pixels a tile, a 2-D map. Otherwise a 4-D map over a view
// {channels, Q, P, images} whose box is box_p whole output rows of one image, or box_n whole
// images where one fills at most half a tile (7 x 7: two, 98 rows): the strided 1x1's
// strided view of x (the images stacked when they stack evenly, H = stride_h * P: pixel
// (n, p*stride_h) is row n*P + p of a single image of N*P rows, 18 rows of 7 a tile instead of
// 7), or, for a filter of R x S taps, the plain tensor read at each tap's offset: row (p, q) of
// tap (r, s) is pixel (stride_h p + base_h + step_h r, stride_w q + base_w + step_w s) (forward;
// data: a phase's taps, dy at stride 1), which the TMA zero-fills where it lies outside the image
// (the padding).
struct Rows {
  int M, P, Q;                           // P: N*P when the images are stacked
  int images;                            // N (1 when stacked)
  int box_p;                             // output rows a tile (0: flat, 128 pixels a tile)
  int pitch;                             // the tile rows an output row takes: Q (or a halo's
                                         // padded width: the rows past Q are never stored)
  int box_n;                             // images a tile (> 1 only where box_p = P)
  int tiles_per_image;                   // ceil(P / box_p)
  int tiles;                             // row tiles in all
  int S, taps, channel_slabs, channels;  // slab = tap * channel_slabs + piece of `slab` channels
  int slab;                              // channels in a slab's 128-byte rows (64 or 32)
  int base_h, base_w, step_h, step_w;    // each tap's offset (0 for the 1x1 convolutions)
  int stride_h;      // A's rows a tile row moves in the map (the strided taps' stride, else 1)
  int first_column;  // B's column of the first tap (a data phase's first tap in wt, else 0)
  int segments;      // halo tiles (halo_rows): the pieces an output row is cut into (1, or more
                     // where a padded row is wider than a tile), tile t of an image its row
                     // t / segments, piece t % segments
  int segment_q;     // halo tiles: the output pixels of a piece (Q where segments is 1)

  // Tile `tile`'s row i as its output pixel, -1 where there is none.
  __device__ int at(int tile, int i) const {
    if (box_p == 0) {
      const int m = tile * kBM + i;
      return m < M ? m : -1;
    }
    // Row i: image b of the box (0 unless box_n > 1, where tiles_per_image is 1), row k of it.
    const int b = i / (box_p * pitch), k = i % (box_p * pitch), q = k % pitch;
    const int n = tile / tiles_per_image * box_n + b,
              p = tile % tiles_per_image * box_p + k / pitch;
    return b < box_n && n < images && p < P && q < Q ? (n * P + p) * Q + q : -1;
  }
  // The same for halo tiles (halo_rows's: box_p rows of `pitch` a tile, one image) without an
  // integer division: their epilogue finds 4 rows a lane a tile, and each division is some 20
  // dependent instructions (session 24: 12 a warp a tile were a sixth of the halo kernel's
  // instructions). Row i / pitch as a float product: (i + 1/2) / pitch lies at least
  // 1/(2 pitch) from an integer and i < 128, so the product with the rounded reciprocal (off by
  // at most 2^-23 of (i + 1/2) / pitch) truncates to the quotient.
  // Pieces of a wide row: row i's pixel lies `piece * segment_q` on (the divisions by
  // tiles_per_image and segments depend on the tile alone: computed once a tile).
  __device__ int at_halo(int tile, int i) const {
    const int row = int((float(i) + 0.5f) * (1.0f / float(pitch))), k = i - row * pitch;
    const int n = tile / tiles_per_image, t = tile % tiles_per_image;
    const int p = t / segments * box_p + row, q = t % segments * segment_q + k;
    return row < box_p && p < P && k < segment_q && q < Q ? (n * P + p) * Q + q : -1;
  }
  __host__ __device__ uint32_t a_bytes() const {
    return uint32_t(box_p == 0 ? kBM : box_n * box_p * Q) * kRowBytes;
  }
  __host__ __device__ int slabs() const { return taps * channel_slabs; }
  // Asks for slab s's channels of the tile's rows.
  __device__ void load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int s, int tile) const {
    const int tap = s / channel_slabs, c0 = s % channel_slabs * slab;
    if (box_p == 0) {
      tma_load_2d(dst, map, bar, c0, tile * kBM);
    } else {
      const int r = tap / S, s = tap % S;
      tma_load_4d(dst, map, bar, c0, base_w + step_w * s,
                  tile % tiles_per_image * box_p * stride_h + base_h + step_h * r,
                  tile / tiles_per_image * box_n);
    }
  }
};

inline bool one_by_one(const Conv2dGeometry& g) {
  return g.R == 1 && g.S == 1 && g.pad_h == 0 && g.pad_w == 0;
}

// channel_multiple: the channels in 16 bytes (8 16-bit, 4 f32).
inline bool channels_fit(const Conv2dGeometry& g, int channel_multiple) {
  return g.groups == 1 && g.C % channel_multiple == 0 && g.K % channel_multiple == 0;
}

// Tiles of box_p = 128 / width whole rows of one image (of `height`), N images; where a whole
// image fits a tile twice or more, box_n = 128 / (height * width) whole images a tile (at most N).
// A row wider than a tile gets box_p 1 all the same: no ring kernel takes it (rows_fill_tiles),
// halo tiles cut it into pieces (halo_rows).
inline Rows image_rows(int N, int height, int width) {
  Rows rows{};
  rows.M = N * height * width, rows.P = height, rows.Q = width, rows.images = N;
  rows.box_p = std::max(1, std::min(kBM / width, height)), rows.pitch = width;
  rows.box_n = rows.box_p == height ? std::max(1, std::min(kBM / (height * width), N)) : 1;
  rows.tiles_per_image = (height + rows.box_p - 1) / rows.box_p;
  rows.tiles = (N + rows.box_n - 1) / rows.box_n * rows.tiles_per_image;
  rows.stride_h = 1;
  return rows;
}

// Whether a tile of whole rows (or whole images) of N images uses at least 96 of its 128 rows (a
// single 7 x 7 image, 49: the mma.sync kernels do better there).
inline bool rows_fill_tiles(int N, int height, int width) {
  if (width > kBM) return false;
  const Rows rows = image_rows(N, height, width);
  return rows.box_n * rows.box_p * width >= 96;
}

// The slabs (of `slab` channels) of a filter of R x S taps over `channels` (C forward, K data),
// tap (r, s) read at offsets (base_h + step_h r, base_w + step_w s).
inline Rows with_taps(Rows rows, int slab, int R, int S, int channels, int base_h, int base_w,
                      int step_h, int step_w) {
  rows.S = S, rows.taps = R * S, rows.channels = channels, rows.slab = slab;
  rows.channel_slabs = (channels + slab - 1) / slab;
  rows.base_h = base_h, rows.base_w = base_w, rows.step_h = step_h, rows.step_w = step_w;
  return rows;
}

// The forward's rows: flat for a stride-1 1x1, whole output rows a tile otherwise.
inline Rows forward_rows(const Conv2dGeometry& g, int slab) {
  const int P = int(g.P()), Q = int(g.Q()), M = int(g.N) * P * Q, C = int(g.C);
  if (!one_by_one(g)) {
    Rows rows = with_taps(image_rows(int(g.N), P, Q), slab, int(g.R), int(g.S), C, -int(g.pad_h),
                          -int(g.pad_w), int(g.dilation_h), int(g.dilation_w));
    rows.stride_h = int(g.stride_h);
    return rows;
  }
  if (g.stride_h == 1 && g.stride_w == 1) {
    Rows rows{};
    rows.M = M, rows.P = P, rows.Q = Q, rows.tiles = (M + kBM - 1) / kBM, rows.stride_h = 1;
    return with_taps(rows, slab, 1, 1, C, 0, 0, 0, 0);
  }
  const bool stacked = g.H == g.stride_h * P;
  Rows rows = image_rows(stacked ? 1 : int(g.N), stacked ? int(g.N) * P : P, Q);
  rows.M = M;
  return with_taps(rows, slab, 1, 1, C, 0, 0, 0, 0);
}

// Backward data of a filter with taps, phase (rho_h, rho_w) (convolution_tc_phase.h; at stride 1
// the one phase is the whole of dx): its dx pixels, whole rows a tile, its tap (r, s) reading dy
// at (i + offset_h - dil_h' r, j + offset_w - dil_w' s), its taps' columns of wt from its first.
struct DataPhase {
  PhaseAxis h, w;
  bool empty() const { return h.extent == 0 || w.extent == 0; }
  bool has_taps() const { return h.taps > 0 && w.taps > 0; }
};

inline DataPhase data_phase(const Conv2dGeometry& g, int rho_h, int rho_w) {
  return {phase_axis(rho_h, int(g.H), int(g.R), int(g.pad_h), int(g.stride_h), int(g.dilation_h)),
          phase_axis(rho_w, int(g.W), int(g.S), int(g.pad_w), int(g.stride_w), int(g.dilation_w))};
}

inline Rows phase_rows(const Conv2dGeometry& g, const DataPhase& d, int slab) {
  Rows rows = with_taps(image_rows(int(g.N), d.h.extent, d.w.extent), slab, d.h.taps, d.w.taps,
                        int(g.K), d.h.offset, d.w.offset, -d.h.dilation, -d.w.dilation);
  rows.first_column = phase_first_tap(d.h, d.w, int(g.S)) * int(g.K);
  return rows;
}

// Backward data's phases with pixels, in (rho_h, rho_w) order (wgmma_backward_data_fits: each has
// taps).
inline std::vector<DataPhase> data_phases(const Conv2dGeometry& g) {
  std::vector<DataPhase> phases;
  for (int rho_h = 0; rho_h < g.stride_h; ++rho_h) {
    for (int rho_w = 0; rho_w < g.stride_w; ++rho_w) {
      const DataPhase d = data_phase(g, rho_h, rho_w);
      if (!d.empty()) phases.push_back(d);
    }
  }
  return phases;
}

// Whether the phases run in one launch: 2 or 4 of them (strides of 2), all of one extent (even H
// and W at stride 2: ResNet's 3x3s2), so that their tiles and dy's map are alike. One launch
// fills the GPU where each phase alone would not (layer4's 14 x 14 -> 7 x 7 at batch 16: 4 x 64
// blocks instead of 4 launches of 64).
inline bool phases_together(const std::vector<DataPhase>& phases) {
  if (phases.size() != 2 && phases.size() != 4) return false;
  for (const DataPhase& d : phases) {
    if (d.h.extent != phases[0].h.extent || d.w.extent != phases[0].w.extent) return false;
  }
  return true;
}

// Backward data's GEMMs: a 1x1's one over dy's pixels (flat: 128 pixels a tile, no phases), or
// one per output phase with pixels, all in one launch where phases_together; `slabs` the longest
// reduction, `shortest` the shortest. What runs (convolution_tc_wgmma_sm90a.cu's data_typed), what
// its split takes and which tile it picks are all read from this.
struct DataGemms {
  std::vector<DataPhase> phases;  // empty for a 1x1
  std::vector<Rows> rows;         // one a GEMM (a phase)
  bool together = false;
  int slabs = 0, shortest = 0;
};

inline DataGemms data_gemms(const Conv2dGeometry& g, int slab) {
  DataGemms d;
  if (one_by_one(g)) {
    Rows rows{};
    rows.M = int(g.N * g.P() * g.Q()), rows.P = int(g.P()), rows.Q = int(g.Q());
    rows.tiles = (rows.M + kBM - 1) / kBM, rows.stride_h = 1;
    d.rows.push_back(with_taps(rows, slab, 1, 1, int(g.K), 0, 0, 0, 0));
  } else {
    d.phases = data_phases(g);
    for (const DataPhase& p : d.phases) d.rows.push_back(phase_rows(g, p, slab));
    d.together = phases_together(d.phases);
  }
  d.shortest = d.rows[0].slabs();
  for (const Rows& r : d.rows) {
    d.slabs = std::max(d.slabs, r.slabs()), d.shortest = std::min(d.shortest, r.slabs());
  }
  return d;
}

// A map over a whole NHWC tensor [N, height, width, channels] read in boxes of a slab's channels x
// rows.Q pixels x rows.box_p rows (the taps' path), every stride_w-th pixel of every stride_h-th
// row from the box's corner (a strided forward: output (p, q) of tap (r, s) reads x at
// (stride_h p + base_h + step_h r, stride_w q + base_w + step_w s)).
inline CUtensorMap image_map(MapType type, const void* base, int64_t N, int64_t height,
                             int64_t width, int64_t channels, const Rows& rows, int stride_h = 1,
                             int stride_w = 1) {
  const int64_t e = type.bytes;
  const cuuint64_t dims[4] = {cuuint64_t(channels), cuuint64_t(width), cuuint64_t(height),
                              cuuint64_t(N)};
  const cuuint64_t strides[3] = {cuuint64_t(channels * e), cuuint64_t(width * channels * e),
                                 cuuint64_t(height * width * channels * e)};
  const cuuint32_t box[4] = {cuuint32_t(type.slab()), cuuint32_t(rows.Q * stride_w),
                             cuuint32_t(rows.box_p * stride_h), cuuint32_t(rows.box_n)};
  const cuuint32_t steps[4] = {1, cuuint32_t(stride_w), cuuint32_t(stride_h), 1};
  return tensor_map(type, base, 4, dims, strides, box, steps);
}

// The strided 1x1's map: x's strided view {C, Q, P, images}, pixel (n, p*stride_h, q*stride_w)
// (stacked images: one image of N*P rows, each stride_h*W pixels apart).
inline CUtensorMap strided_map(MapType type, const void* x, const Conv2dGeometry& g,
                               const Rows& rows) {
  const int64_t e = type.bytes;
  const cuuint64_t dims[4] = {cuuint64_t(g.C), cuuint64_t(rows.Q), cuuint64_t(rows.P),
                              cuuint64_t(rows.images)};
  const cuuint64_t strides[3] = {cuuint64_t(g.stride_w * g.C * e),
                                 cuuint64_t(g.stride_h * g.W * g.C * e),
                                 cuuint64_t(g.H * g.W * g.C * e)};
  const cuuint32_t box[4] = {cuuint32_t(type.slab()), cuuint32_t(rows.Q), cuuint32_t(rows.box_p),
                             cuuint32_t(rows.box_n)};
  return tensor_map(type, x, 4, dims, strides, box);
}

}  // namespace crema::kernels::cuda::tc::wg
