// The plan of the wgmma convolutions (convolution_tc_wgmma_plan.cuh): the SM count, the split of
// short reductions, persistence, where halo tiles fit, pay and how wide they run; and the
// public rules of convolution_tc_wgmma.h (what fits, which launch a geometry takes, the parts
// of a split reduction). Every rule with the measurement behind it. Host code; compiled
// for sm_90a alone, as the launches (convolution_tc_wgmma_sm90a.cu), for the headers it shares
// with them.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/convolution/convolution_tc_wgmma_halo.cuh"
#include "kernels/convolution/convolution_tc_wgmma_plan.cuh"
#include "kernels/convolution/convolution_tc_wgmma_rows.cuh"

namespace crema::kernels::cuda::tc {
namespace plan {

using wg::Rows;

// The SMs of the current device.
int multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    throw DeviceError("convolution on wgmma: cannot read the SM count of the current device");
  }
  return count;
}

// How a reduction of `slabs` slabs over `blocks` tiles is split: only where the tiles fill at
// most half of a 132-SM GPU, into parts of at least 8 slabs, enough of them for about 256 blocks
// (two an SM), at most 8 (the cluster's blocks, ConvProblem::reduce_parts). H200, 2026-11-27
// (session 17, call 2), `crema bench conv-tc --math bf16`, us at 1 / 2 / 4 / 8 parts: 16 x 512 x 7
// x 7 -> 512 3x3 (64 blocks, 72 slabs) forward 36.7 / 25.6 / 21.9 / 27.6, data 81.9 / 71.1 / 67.3
// / 72.5; 160 -> 320 at 7 x 7 (40 blocks, 27 slabs) 16.6 / 15.0 / 14.4 / 18.5; but 1024 -> 256 1x1
// at 14 x 14 (100 blocks, 16 slabs) 10.4 / 13.9 / 17.9 / 25.6.
Split split_of(int64_t blocks, int slabs) {
  int parts = 1;
  if (blocks <= 64) parts = int(std::min<int64_t>({(256 + blocks - 1) / blocks, slabs / 8, 8}));
  return split_into(slabs, std::max(parts, 1));
}

Split split_into(int slabs, int parts) {
  const int per = (slabs + parts - 1) / parts;
  return {(slabs + per - 1) / per, per};
}

// Whether `units` units of `slabs` slabs at BN columns (64 or 128: two 256-column blocks do not
// fit an SM) run on two persistent blocks an SM rather than a block a unit. Persistent blocks walk
// units, their producer filling the next unit's stages under this
// one's epilogue: it pays where the epilogue is most of a unit's life, the reductions of at most
// 4 slabs (ResNet's 1x1s), two blocks an SM (3 stages at BN 64, 2 at 128) so that one block's
// epilogue also runs under the other's wgmmas. H200, 2026-11-27 (session 18, call 3),
// `crema bench conv-tc --math bf16`, ms a block a unit / one persistent block an SM / two:
// 1x1 256->64 at 56 x 56 batch 128 (data: 1 slab) 0.144 / 0.197 / 0.124, forward (4 slabs)
// 0.0719 / 0.0693 / 0.0665, 1024->256 at 14 x 14 data (4 slabs) 0.0555 / 0.0666 / 0.0535; but
// longer reductions lose: 1024->256 forward (16 slabs) 0.0366 / 0.0332 / 0.0433, 3x3 64->64 at
// 56 x 56 batch 64 (9 slabs) 0.0690 / 0.0847 / 0.0698. The forward at BN 128 stays a block a
// unit: its persistent build spills (ptxas: 36 to 68 bytes; the epilogue's 64 columns a round
// keep half the accumulators live) and lost in session 18's bf16 suite (call 5, against
// session 17's: 16,16,112,112 -> 96 1x1 1.17x the time, 256->128 at 56 1.10x, 24->144 1.09x).
bool persistent_pays(int64_t units, int slabs, int sms, int bn, bool forward, WgmmaLaunch how) {
  if (how == WgmmaLaunch::persistent) return true;
  if (forward && bn == 128) return false;
  return slabs <= 4 && units > 2 * int64_t(sms);
}

// The split of `phases` phases of tiles like rows[0]'s, the longest reduction of `slabs`.
Split split_at(const Rows& rows, int phases, int slabs, int columns, int bn) {
  return split_of(int64_t(rows.tiles) * ((columns + bn - 1) / bn) * phases, slabs);
}

// Whether halo tiles fit `rows` (a filter with taps, one phase at stride 1) x `columns` at every
// tile width a launch may pick (halo_tile_columns: 64 alone for at most 64 columns).
bool halo_fits_rows(const Rows& rows, int columns) {
  if (rows.box_p == 0 || rows.taps == 1) return false;
  const Rows halo = wg::halo_rows(rows);
  return wg::halo_fits(halo, 64) && (columns <= 64 || wg::halo_fits(halo, 128));
}

// Whether a launch `how` takes halo tiles where they fit (halo_fits_rows): forced, or automatic
// wherever the ring kernel would not split the reduction (the halo kernel never does; split_of:
// a layer of at most 64 blocks, with `can_split`: 16-bit, never f32).
// H200, 2026-11-28 (session 19, call 2), `crema bench conv-tc --math bf16`, ms ring / halo: 3x3
// 64->64 at 56 x 56 batch 64 forward 0.0649 / 0.0573, data 0.0724 / 0.0642; 128->128 at 28 x 28
// batch 128 0.0772 / 0.0623, 0.0848 / 0.0704; 256->256 at 14 x 14 batch 128 (the ring's
// 256-column tile; the halo's 8 rows of 16 use 112 tile rows against the ring's 126) 0.0618 /
// 0.0583; 16 x 64 x 112 x 112 0.0645 / 0.0572; tf32 0.80-0.84x the ring's time.
// Rows wider than a tile have halo tiles alone (the ring kernel's tiles hold whole rows; before,
// mma.sync: VGG's 64 -> 64 at 224 x 224 batch 8, forward 0.1754 -> 0.0921 ms, data 0.2004 ->
// 0.0948, H200, 2026-11-29, session 29, call 5, `crema bench conv-tc --math bf16`).
bool halo_wanted(const Rows& rows, int columns, WgmmaLaunch how, bool can_split) {
  if (how == WgmmaLaunch::halo || rows.Q > wg::kBM) return true;
  if (how != WgmmaLaunch::automatic) return false;
  if (!can_split) return true;
  const int bn = wgmma_tile_columns(rows.tiles, columns, rows.slabs(), multiprocessors());
  return split_of(int64_t(rows.tiles) * ((columns + bn - 1) / bn), rows.slabs()).parts == 1;
}

// The columns of a halo tile over `rows` (halo_rows's) x `columns`: 64 or 128 as
// wgmma_tile_columns picks (128 where it picks 256), or (`how` halo, forced) 128 wherever there
// are more than 64 columns (the tests reach it on small shapes).
int halo_tile_columns(const Rows& rows, int columns, WgmmaLaunch how) {
  const bool wide = how == WgmmaLaunch::halo ? columns > 64
                                             : wgmma_tile_columns(rows.tiles, columns, rows.slabs(),
                                                                  multiprocessors()) > 64;
  return wide ? 128 : 64;
}

bool stream_fits(const Rows& rows, int columns, int sms) {
  if (rows.box_p != 0 || rows.slabs() > (columns <= 64 ? 8 : 4)) return false;
  const int bn = stream_tile_columns(rows, columns, sms);
  return (columns + bn - 1) / bn <= 8;
}

// 256 columns for reductions of at most 2 slabs (A read once), but 128 where the row tiles leave
// SMs idle and 128-column tiles pad the columns no more: H200, 2026-11-29 (session 28, call 6),
// `crema bench conv-tc --math bf16 --version tc_bf16_wgmma_stream`, ms 256 / 128: 16,128,28,28 ->
// 512 forward 0.0109 / 0.0099, 16,40,28,28 -> 240 0.0089 / 0.0084, 16,576,14,14 -> 96 data 0.0072
// / 0.0060, 16,64,14,14 -> 384 forward 0.0061 / 0.0053; but a second tile mostly empty loses:
// 16,144,28,28 -> 40 data 0.0065 / 0.0071, 16,192,28,28 -> 64 data 0.0065 / 0.0070, 16,24,56,56
// -> 144 forward 0.0137 / 0.0145; and so do row tiles enough for every SM (392: 16,256,56,56 ->
// 128 data 0.0146 / 0.0152, 16,64,56,56 -> 256 forward 0.0124 / 0.0130).
int stream_tile_columns(const Rows& rows, int columns, int sms) {
  if (columns <= 64) return 64;
  if (columns <= 128 || rows.slabs() > 2) return 128;
  const int rest = columns % 128;
  return rows.tiles < sms && (columns > 256 || rest == 0 || rest > 64) ? 128 : 256;
}

// One block an SM walking tiles pays where the tiles keep about two thirds of the SMs busy: H200,
// 2026-11-29 (session 28, call 3), `crema bench conv-tc --math bf16`, ms ring kernel / streaming
// tiles (blocks): 16,144,28,28 -> 40 data 0.0086 / 0.0066 (98), 16,40,28,28 -> 240 forward
// 0.0092 / 0.0089 (98), 16,480,14,14 -> 192 data 0.0069 / 0.0064 (100); but 16,576,14,14 -> 96
// data at 256 columns 0.0064 / 0.0072 (75), 16,64,14,14 -> 384 forward 0.0054 / 0.0060 (50),
// 16,832,7,7 -> 256 data 0.0061 / 0.0063 (49). Every larger layer of at most 4 slabs gained:
// 256 -> 64 at 56 x 56, batch 64, data 0.0594 / 0.0380, 16,256,56,56 -> 128 forward 0.0192 /
// 0.0143.
bool stream_wanted(const Rows& rows, int columns, WgmmaLaunch how, int sms) {
  if (how == WgmmaLaunch::stream) return true;
  if (how != WgmmaLaunch::automatic) return false;
  const int bn = stream_tile_columns(rows, columns, sms);
  return 3 * int64_t(rows.tiles) * ((columns + bn - 1) / bn) >= 2 * int64_t(sms);
}

}  // namespace plan

using plan::split_at, plan::halo_fits_rows, plan::halo_wanted, plan::halo_tile_columns,
    plan::persistent_pays, plan::stream_fits, plan::stream_wanted, plan::multiprocessors;
using wg::Rows, wg::DataPhase, wg::DataGemms, wg::one_by_one, wg::channels_fit, wg::rows_fill_tiles,
    wg::forward_rows, wg::data_phase, wg::data_gemms, wg::kBM, wg::kRowBytes, wg::kSlab;

// A strided 1x1: a box holds whole output rows (Q <= 128), and the strided view's dimensions do
// not overlap (stride_w * Q <= stride_h * W: an output row's pixels span less than the step to
// the next; only an asymmetric stride can break it). Taps: whole output rows filling at least
// 96 of a tile's 128 rows, at any stride the TMA's element steps take (1 to 8, boxes of at most
// 256 pixels a dimension: Q * stride_w and box_p * stride_h).
// Or, at stride 1, halo tiles (rows wider than a tile: halo tiles alone, halo_wanted).
bool wgmma_forward_fits(const Conv2dGeometry& g, int channel_multiple) {
  if (!channels_fit(g, channel_multiple)) return false;
  if (!one_by_one(g)) {
    // The TMA's element steps are 1 to 8 and its boxes at most 256 elements a dimension.
    const int P = int(g.P()), Q = int(g.Q());
    return (rows_fill_tiles(int(g.N), P, Q) && g.stride_h <= 8 && g.stride_w <= 8 &&
            Q * g.stride_w <= 256 && std::min(kBM / Q, P) * g.stride_h <= 256) ||
           wgmma_forward_halo_fits(g, channel_multiple);
  }
  return (g.stride_h == 1 && g.stride_w == 1) ||
         (g.Q() <= kBM && g.stride_w * g.Q() <= g.stride_h * g.W);
}

// A filter with taps: every output phase that has pixels has taps (one without would have to
// write zeros) and whole rows filling at least 96 of a tile's 128 (at stride 1: dx's H x W).
// Or, at stride 1, halo tiles.
bool wgmma_backward_data_fits(const Conv2dGeometry& g, int channel_multiple) {
  if (!channels_fit(g, channel_multiple)) return false;
  if (one_by_one(g) || wgmma_backward_data_halo_fits(g, channel_multiple)) return true;
  for (int rho_h = 0; rho_h < g.stride_h; ++rho_h) {
    for (int rho_w = 0; rho_w < g.stride_w; ++rho_w) {
      const DataPhase d = data_phase(g, rho_h, rho_w);
      if (d.empty()) continue;
      if (!d.has_taps() || !rows_fill_tiles(int(g.N), d.h.extent, d.w.extent)) return false;
    }
  }
  return true;
}

// The channels of a 128-byte slab for `channel_multiple` channels in 16 bytes (64 16-bit, 32 f32).
int slab_of(int channel_multiple) {
  return kRowBytes / 16 * channel_multiple;
}

bool wgmma_forward_halo_fits(const Conv2dGeometry& g, int channel_multiple) {
  return channels_fit(g, channel_multiple) && !one_by_one(g) && g.stride_h == 1 &&
         g.stride_w == 1 && halo_fits_rows(forward_rows(g, slab_of(channel_multiple)), int(g.K));
}

bool wgmma_backward_data_halo_fits(const Conv2dGeometry& g, int channel_multiple) {
  return channels_fit(g, channel_multiple) && !one_by_one(g) && g.stride_h == 1 &&
         g.stride_w == 1 &&
         halo_fits_rows(data_gemms(g, slab_of(channel_multiple)).rows[0], int(g.C));
}

// 16-bit tensors (channel_multiple 8) split with the workspace the entry points are given; f32
// ones never.
bool wgmma_forward_takes_halo(const Conv2dGeometry& g, WgmmaLaunch how, int channel_multiple) {
  return wgmma_forward_halo_fits(g, channel_multiple) &&
         halo_wanted(forward_rows(g, slab_of(channel_multiple)), int(g.K), how,
                     channel_multiple == 8);
}

bool wgmma_backward_data_takes_halo(const Conv2dGeometry& g, WgmmaLaunch how,
                                    int channel_multiple) {
  return wgmma_backward_data_halo_fits(g, channel_multiple) &&
         halo_wanted(data_gemms(g, slab_of(channel_multiple)).rows[0], int(g.C), how,
                     channel_multiple == 8);
}

int wgmma_forward_halo_blocks(const Conv2dGeometry& g, WgmmaLaunch how, int channel_multiple) {
  if (!wgmma_forward_takes_halo(g, how, channel_multiple)) return 0;
  const Rows rows = wg::halo_rows(forward_rows(g, slab_of(channel_multiple)));
  return wg::halo_blocks(rows, halo_tile_columns(rows, int(g.K), how));
}

int wgmma_backward_data_halo_blocks(const Conv2dGeometry& g, WgmmaLaunch how,
                                    int channel_multiple) {
  if (!wgmma_backward_data_takes_halo(g, how, channel_multiple)) return 0;
  const Rows rows = wg::halo_rows(data_gemms(g, slab_of(channel_multiple)).rows[0]);
  return wg::halo_blocks(rows, halo_tile_columns(rows, int(g.C), how));
}

int wgmma_forward_stats_rows(const Conv2dGeometry& g, WgmmaLaunch how) {
  const Rows rows = forward_rows(g, kSlab);
  return (wgmma_forward_takes_halo(g, how) ? wg::halo_rows(rows).tiles : rows.tiles) * 8;
}

bool wgmma_backward_data_reads_w(const Conv2dGeometry& g) {
  return one_by_one(g) || (g.stride_h == 1 && g.stride_w == 1);
}

// A lone block's ring refills a stage one load's latency after the stage's slab was multiplied:
// at 4 stages (BN 64) a block an SM waits on memory for each stage past the fourth; a deep ring
// (Ring<BN, kDeep>) holds every slab of a 9-slab reduction at once. H200, 2026-11-29 (session 27,
// call 4), `crema bench conv-tc --math bf16`, ms two blocks' rings / deep, batch 16, the 1x1s:
// 1024 -> 256 at 14 x 14 forward (100 blocks, 16 slabs) 0.0106 / 0.0102, 480 -> 192 0.0076 /
// 0.0072, 576 -> 96 0.0079 / 0.0073, 256 -> 1024 data (16 slabs) 0.0109 / 0.0104; 832 -> 256 at
// 7 x 7 (28 blocks, 13 slabs) 0.0088 both.
bool wgmma_deep_ring_pays(int64_t units, int slabs, int sms, int bn) {
  if (bn == 256) return false;
  const int stages = bn == 64 ? wg::Ring<64>::STAGES : wg::Ring<128>::STAGES;
  return units <= sms && slabs > stages;
}

namespace {
// Whether the automatic launch of g's forward (a 1x1 or the ring kernel's taps; backward data:
// its first launch) runs a deep ring on `sms` SMs, as run() decides: no halo tiles, an unsplit
// tile of 64 or 128 columns, not persistent, deep_ring_pays.
bool deep_ring_of(const Rows& rows, int phases, int slabs, int shortest, int columns, int sms,
                  bool forward) {
  const int bn = wgmma_tile_columns(int64_t(rows.tiles) * phases, columns, shortest, sms);
  if (bn == 256 || split_at(rows, phases, slabs, columns, bn).parts > 1) return false;
  const int64_t units = int64_t(rows.tiles) * ((columns + bn - 1) / bn) * phases;
  return !persistent_pays(units, slabs, sms, bn, forward, WgmmaLaunch::automatic) &&
         wgmma_deep_ring_pays(units, slabs, sms, bn);
}
}  // namespace

bool wgmma_forward_deep_ring(const Conv2dGeometry& g, int sms) {
  if (!wgmma_forward_fits(g) || wgmma_forward_takes_halo(g, WgmmaLaunch::automatic)) return false;
  const Rows rows = forward_rows(g, kSlab);
  return deep_ring_of(rows, 1, rows.slabs(), rows.slabs(), int(g.K), sms, true);
}

bool wgmma_backward_data_deep_ring(const Conv2dGeometry& g, int sms) {
  if (!wgmma_backward_data_fits(g) || wgmma_backward_data_takes_halo(g, WgmmaLaunch::automatic)) {
    return false;
  }
  const DataGemms d = data_gemms(g, kSlab);
  const int phases = d.together ? int(d.rows.size()) : 1;
  const int slabs = d.together ? d.slabs : d.rows[0].slabs();
  const int shortest = d.together ? d.shortest : d.rows[0].slabs();
  return deep_ring_of(d.rows[0], phases, slabs, shortest, int(g.C), sms, false);
}

// Forward: a stride-1 1x1 of at most 2 slabs, without residual or channel statistics (`fused`).
bool wgmma_forward_takes_stream(const Conv2dGeometry& g, WgmmaLaunch how, bool fused,
                                int channel_multiple) {
  if (fused || !wgmma_forward_fits(g, channel_multiple) || !one_by_one(g) || g.stride_h != 1 ||
      g.stride_w != 1) {
    return false;
  }
  const Rows rows = forward_rows(g, slab_of(channel_multiple));
  const int sms = multiprocessors();
  return stream_fits(rows, int(g.K), sms) && stream_wanted(rows, int(g.K), how, sms);
}

bool wgmma_backward_data_takes_stream(const Conv2dGeometry& g, WgmmaLaunch how,
                                      int channel_multiple) {
  if (!wgmma_backward_data_fits(g, channel_multiple) || !one_by_one(g) || g.stride_h != 1 ||
      g.stride_w != 1) {
    return false;
  }
  const Rows rows = data_gemms(g, slab_of(channel_multiple)).rows[0];
  const int sms = multiprocessors();
  return stream_fits(rows, int(g.C), sms) && stream_wanted(rows, int(g.C), how, sms);
}

// The parts of the ring kernel's split on `sms` SMs (run in convolution_tc_wgmma_sm90a.cu: the
// tile of wgmma_tile_columns; 256 columns never split).
int wgmma_forward_split_parts(const Conv2dGeometry& g, int sms) {
  if (!wgmma_forward_fits(g)) return 1;
  const Rows rows = forward_rows(g, kSlab);
  const int bn = wgmma_tile_columns(rows.tiles, int(g.K), rows.slabs(), sms);
  return bn == 256 ? 1 : split_at(rows, 1, rows.slabs(), int(g.K), bn).parts;
}

int wgmma_backward_data_split_parts(const Conv2dGeometry& g, int sms) {
  if (!wgmma_backward_data_fits(g)) return 1;
  const DataGemms d = data_gemms(g, kSlab);
  const int C = int(g.C);
  int parts = 1;
  for (const Rows& rows : d.rows) {  // together: one launch of them all, the longest's slabs
    const int phases = d.together ? int(d.rows.size()) : 1;
    const int slabs = d.together ? d.slabs : rows.slabs();
    const int shortest = d.together ? d.shortest : rows.slabs();
    const int bn = wgmma_tile_columns(int64_t(rows.tiles) * phases, C, shortest, sms);
    if (bn < 256) parts = std::max(parts, split_at(rows, phases, slabs, C, bn).parts);
    if (d.together) break;
  }
  return parts;
}

// The 256-column tile runs one block an SM with its epilogue after the ring drains: it pays where
// the reduction is long. H200, 2026-11-27 (session 17, call 1), `crema bench conv-tc --math bf16`,
// TFLOP/s at 64 / 128 / 256 columns: 3x3 256->256 at 28 x 28, batch 128 (36 slabs) 343 / 472 /
// 525, forward of 8 x 256 x 56 x 56 -> 256 315 / 409 / 446; but the 1x1 64->256 at 56 x 56,
// batch 128 (1 slab) 92 / 121 / 90 and 512->2048 at 7 x 7 (8 slabs) 333 / 418 / 380.
int wgmma_tile_columns(int64_t row_tiles, int columns, int slabs, int sms) {
  if (columns % 256 == 0 && slabs >= 18 && row_tiles * (columns / 256) >= sms) return 256;
  return columns > 64 && row_tiles * ((columns + 127) / 128) >= sms ? 128 : 64;
}

int wgmma_forward_tile_columns(const Conv2dGeometry& g, int sms) {
  const Rows rows = forward_rows(g, kSlab);
  return wgmma_tile_columns(rows.tiles, int(g.K), rows.slabs(), sms);
}

int wgmma_backward_data_tile_columns(const Conv2dGeometry& g, int sms) {
  const DataGemms d = data_gemms(g, kSlab);
  const int phases = d.together ? int(d.rows.size()) : 1;
  const int shortest = d.together ? d.shortest : d.rows[0].slabs();
  return wgmma_tile_columns(int64_t(d.rows[0].tiles) * phases, int(g.C), shortest, sms);
}

}  // namespace crema::kernels::cuda::tc
