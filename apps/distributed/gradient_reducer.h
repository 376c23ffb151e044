// Data parallelism's one exchange per step: every rank's parameter gradients replaced by their
// mean over the ranks, bucket by bucket while backward goes on (bucket_plan.h), so that the
// solver, unchanged, updates every rank's copy of the weights alike.
//
// On a GPU, for each bucket, when backward has finished its last parameter (Net::backward's
// after-layer hook):
//
//   compute stream   ... layer L backward  | record `ready`  | layer L-1 backward ...
//   comm stream                              wait `ready`, pack the gradients into the bucket,
//                                            all-reduce (average), unpack them, record `done`
//
// and before the solver step the compute stream waits for every `done`. The pack and the unpack
// are one kernel each (kernels/cast/flat.h: up to 64 gradients per launch, from a table built
// at construction), not one copy per parameter: the last bucket's, which nothing overlaps, would
// otherwise cost dozens of small launches each way. They cost two passes over the gradients (a
// few hundred microseconds for ResNet-50's 100 MB) and keep the parameters where the layers and
// the solver expect them. Each gradient's place in the bucket starts at a multiple of 8
// elements, so that the kernels move it 16 bytes at a time; the few elements between places are
// zeros that the all-reduce carries along. The communication stream has the device's greatest
// priority: once `ready` fires, its kernels and NCCL's take the next free SMs instead of
// queueing behind the backward blocks already waiting.
//
// With distributed.reduce_dtype: bf16 (ddp_settings.h) the bucket is bf16: the pack rounds each
// gradient to bf16 (kernels::cast's rounding), NCCL averages bf16, the unpack widens it back.
//
// Two f32 values ride after each step's last bucket (in it when the bucket is f32, in a tiny
// all-reduce of their own after it when bf16 would round them):
//   The stop vote: 1 on a rank that was asked to stop (Ctrl-C, SIGTERM), else 0; summed by the
//   same all-reduce (world x the mean). The loop reads a step's sum after the next step (the host
//   waits for the step before the one it queued, never for its own), so every rank learns of a
//   signal on any rank at the same iteration, and all stop there with one checkpoint.
//   The display loss: the window's summed loss (apps/training/progress.h), replaced by its mean
//   over the ranks. By induction every rank's sum is then the mean of the ranks' sums, so the
//   display line shows the global batch's loss at no cost but one float.
#pragma once

#include <cstdint>
#include <vector>

#include "apps/distributed/bucket_plan.h"
#include "apps/distributed/ddp_settings.h"
#include "apps/distributed/process_group.h"
#include "core/context.h"
#include "core/net.h"
#include "kernels/cast/flat.h"

namespace crema::distributed {

class GradientReducer {
 public:
  // `loss_sum`: the display window's summed loss, an f32 scalar on ctx's device averaged over the
  // ranks with each step's last bucket (null: none).
  GradientReducer(Net& net, ProcessGroup& group, Context& ctx, const DdpSettings& settings,
                  Tensor* loss_sum = nullptr);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // A step is begin_step, the backward pass with after_layer as its hook, join, end_step. The
  // middle two queue work only (no host wait), so a CUDA graph can capture them with forward and
  // backward; the graph's replays then read the vote that begin_step leaves in pinned memory.
  // `stop_vote`: this rank was asked to stop.
  void begin_step(bool stop_vote);
  // Net::backward's hook: launches the buckets whose last gradient layer `layer` finished.
  void after_layer(size_t layer);
  // Launches what is left, and makes the compute stream wait for every bucket: from here on the
  // gradients are the ranks' mean.
  void join();
  // Reads the votes of the step before this one (waiting for that step's exchange, never for
  // this one's) and beats the group's heartbeat.
  void end_step();
  // How many ranks voted to stop, as the step before the last end_step() summed them (0 at
  // first): the same number on every rank after the same step.
  int stop_votes() const { return previous_votes_; }
  // Rank 0's parameters and buffers into every rank's (at the start, after --weights or
  // --resume, and before a test or a checkpoint: running statistics differ by rank).
  void broadcast_state();

 private:
  void launch(size_t b);
  // Copies `bytes` on the communication stream (a GPU) or at once (the CPU).
  void move(void* to, const void* from, size_t bytes);
  // Bucket b's gradients into its buffer, and back: one kernel each way on a GPU (copies for f32,
  // conversions for bf16: kernels/cast/flat.h), a cast per gradient on the CPU.
  void pack(size_t b);
  void unpack(size_t b);
  // [vote, loss sum]: after the last bucket's gradients when it is f32, else in tail_.
  float* extras() {
    return narrow() ? tail_.data<float>() : storage_.back().data<float>() + buckets_.back().numel;
  }
  bool narrow() const { return settings_.reduce_dtype != DType::f32; }

  Net& net_;
  ProcessGroup& group_;
  Context& ctx_;
  DdpSettings settings_;
  Tensor* loss_sum_;
  std::vector<Param*> params_;   // the planner's input order
  std::vector<Bucket> buckets_;  // the plan's (places at multiples of kPlaceAlign elements)
  std::vector<std::vector<kernels::FlatSlice>> slices_;  // per bucket: each gradient's place
  std::vector<Tensor> storage_;  // one buffer per bucket, of reduce_dtype (an f32 last: + extras)
  Tensor tail_;                  // f32 [2]: the extras, when the buckets are bf16
  std::vector<bool> launched_;
  gpu::Stream comm_ = nullptr;
  std::vector<gpu::Event> ready_, done_;
  gpu::Event vote_copied_[2] = {nullptr, nullptr};
  Tensor vote_host_;  // [3] pinned on a GPU: this rank's vote; the sums of steps 2k and 2k + 1
  int64_t steps_ = 0;
  int previous_votes_ = 0;
};

}  // namespace crema::distributed
