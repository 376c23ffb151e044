// Data parallelism's one exchange per step: every rank's parameter gradients replaced by their
// mean over the ranks, bucket by bucket while backward goes on (bucket_plan.h), so that the
// solver, unchanged, updates every rank's copy of the weights alike.
//
// On a GPU, for each bucket, when backward has finished its last parameter (Net::backward's
// after-layer hook):
//
//   compute stream   ... layer L backward  | record `ready`  | layer L-1 backward ...
//   comm stream                              wait `ready`, copy the gradients into the bucket,
//                                            all-reduce (average), copy them back, record `done`
//
// and before the solver step the compute stream waits for every `done`. The copies cost two
// passes over the gradients (a few hundred microseconds for ResNet-50's 100 MB) and keep the
// parameters where the layers and the solver expect them.
//
// The stop vote. Each step's last bucket carries one more float: 1 on a rank that was asked to
// stop (Ctrl-C, SIGTERM), else 0; summed by the same all-reduce (world x the mean). The loop reads
// a step's sum after the next step (the host waits for the step before the one it queued, never for
// its own), so every rank learns of a signal on any rank at the same iteration, and all stop there
// with one checkpoint.
#pragma once

#include <cstdint>
#include <vector>

#include "apps/distributed/bucket_plan.h"
#include "apps/distributed/process_group.h"
#include "core/context.h"
#include "core/net.h"

namespace crema::distributed {

class GradientReducer {
 public:
  GradientReducer(Net& net, ProcessGroup& group, Context& ctx,
                  int64_t bucket_bytes = kDefaultBucketBytes);
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
  float* vote_in_bucket() { return storage_.back().data<float>() + buckets_.back().numel; }

  Net& net_;
  ProcessGroup& group_;
  Context& ctx_;
  std::vector<Param*> params_;  // the planner's input order
  std::vector<Bucket> buckets_;
  std::vector<Tensor> storage_;  // one float32 buffer per bucket (the last: + the stop vote)
  std::vector<bool> launched_;
  gpu::Stream comm_ = nullptr;
  std::vector<gpu::Event> ready_, done_;
  gpu::Event vote_copied_[2] = {nullptr, nullptr};
  Tensor vote_host_;  // [3] pinned on a GPU: this rank's vote; the sums of steps 2k and 2k + 1
  int64_t steps_ = 0;
  int previous_votes_ = 0;
};

}  // namespace crema::distributed
