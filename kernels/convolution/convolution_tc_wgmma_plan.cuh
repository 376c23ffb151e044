// The plan of the wgmma forward and backward data (convolution_tc_wgmma_plan_sm90a.cu defines it;
// convolution_tc_wgmma_sm90a.cu's launches follow it): the SM count, how a short reduction is
// split, which launches run persistent blocks, and where halo tiles fit, pay, and at what width.
// Host code over Rows (convolution_tc_wgmma_rows.cuh); sm_90a files only, as
// convolution_tc_wgmma.cuh.
#pragma once

#include <cstdint>

#include "kernels/convolution/convolution_tc_wgmma.h"
#include "kernels/convolution/convolution_tc_wgmma_rows.cuh"

namespace crema::kernels::cuda::tc::plan {

// The SMs of the current device.
int multiprocessors();

// How a reduction of `slabs` slabs over `blocks` tiles is split (split_of; the parts of a tile
// run as one cluster); split_at: for `phases` phases of tiles like rows', the longest reduction
// of `slabs`, at BN columns; split_into: `slabs` in at most `parts` parts.
struct Split {
  int parts, slabs_per_part;
};
Split split_of(int64_t blocks, int slabs);
Split split_into(int slabs, int parts);
Split split_at(const wg::Rows& rows, int phases, int slabs, int columns, int bn);

// Whether `units` units of `slabs` slabs at BN columns run on two persistent blocks an SM.
bool persistent_pays(int64_t units, int slabs, int sms, int bn, bool forward, WgmmaLaunch how);

// Halo tiles over `rows` (a filter with taps, one phase at stride 1) x `columns`: whether they fit
// at every tile width a launch may pick, whether a launch `how` takes them (`can_split`: the
// ring kernel may split its reductions, 16-bit), and the width they run at.
bool halo_fits_rows(const wg::Rows& rows, int columns);
bool halo_wanted(const wg::Rows& rows, int columns, WgmmaLaunch how, bool can_split);
int halo_tile_columns(const wg::Rows& rows, int columns, WgmmaLaunch how);

// Streaming tiles (convolution_tc_wgmma_stream.cuh) over `rows` x `columns` on a GPU of `sms` SMs:
// whether they fit (a flat GEMM -- a stride-1 1x1 -- of at most 4 slabs, 8 onto at most 64
// columns, in at most 8 column tiles), the columns of their tile (64; 128; 256 for reductions of
// at most 2 slabs, B staying in shared memory, unless the row tiles leave SMs idle), and whether
// a launch `how` takes them where they fit (forced, or automatic where the tiles fill at least
// two thirds of the SMs).
bool stream_fits(const wg::Rows& rows, int columns, int sms);
int stream_tile_columns(const wg::Rows& rows, int columns, int sms);
bool stream_wanted(const wg::Rows& rows, int columns, WgmmaLaunch how, int sms);

}  // namespace crema::kernels::cuda::tc::plan
