// PixelPlans run on the GPU: a batch of uint8 planar sources (decoded by nvJPEG, or on the CPU
// and uploaded) transformed into a float32 batch [B, C, H, W], the same arithmetic as
// run_pixel_plan (data/pixel_plan.h) in the same order, each multiply and add rounded on its
// own (__fmul_rn, __fadd_rn: no fused multiply-add), so a plan gives the CPU reference's pixels
// bit for bit but for a contrast step's mean (a sum in double, added in another order).
//
// Kernels, per batch on the caller's stream:
//   geometry  one thread per output pixel (all channels): the rows-then-columns weighted sum of
//             its sources, then the colour steps before the sample's first contrast;
//   for each later phase p (a contrast step and the steps up to the next one):
//   mean      one block per sample: the mean gray of its image, summed in double in a fixed
//             order (deterministic run to run);
//   blend     one thread per pixel: phase p's steps.
// A sample's steps differ in order (color_jitter draws a permutation), so each kernel reads the
// sample's own list and runs the steps of its phase.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cuda_runtime.h"
#include "data/pixel_plan.h"

namespace crema::data::cuda {

// One sample's part of the packed plans: offsets into the packed arrays.
struct PlanDesc {
  int64_t source = 0;  // byte offset of its planar uint8 C x height x width source
  int32_t height = 0, width = 0;
  int32_t rows_taps = 0, cols_taps = 0;
  int32_t rows_first = 0, cols_first = 0;    // index of its rows' / columns' first[0]
  int32_t rows_weight = 0, cols_weight = 0;  // index of its rows' / columns' weights[0]
  int32_t step_begin = 0, step_count = 0;
};

// Runs batches of plans; keeps its device and pinned buffers between batches. Not thread-safe:
// one per decoding thread.
class PlanRunner {
 public:
  PlanRunner() = default;
  ~PlanRunner();
  PlanRunner(const PlanRunner&) = delete;
  PlanRunner& operator=(const PlanRunner&) = delete;

  // out[b] = plans[b] run on the source at sources + source_offsets[b] (planar uint8 of the
  // plan's channels x source size), on `stream`; every plan has the same channels (1 or 3) and
  // output size. Returns once the kernels are queued; the caller synchronizes `stream` before it
  // calls run again (the packed plans' pinned buffer is reused).
  void run(const std::vector<const PixelPlan*>& plans, const std::vector<int64_t>& source_offsets,
           const uint8_t* sources, float* out, gpu::Stream stream);

 private:
  void* host_ = nullptr;    // pinned: the packed plans
  void* device_ = nullptr;  // their device copy, then the means [B]
  size_t capacity_ = 0;
};

}  // namespace crema::data::cuda
