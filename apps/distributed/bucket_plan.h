// Gradient buckets: which parameter gradients are averaged together, and when.
//
// Backward runs the layers last to first, so the gradients of the last layers are final first.
// Averaging each gradient alone would cost one collective per parameter (hundreds of small
// launches); averaging all of them after backward would leave the links idle while backward
// computes. So, as PyTorch's DDP does, parameters are taken in the order backward finishes them
// and packed into buckets of about `bucket_bytes` (25 MiB); a bucket is launched as soon as the
// layer that finishes its last parameter has run backward, and overlaps the rest of backward.
// The first bucket is smaller (`first_bucket_bytes`, 1 MiB, PyTorch's too), so that the links
// start while backward still computes -- unless every gradient fits one `bucket_bytes` bucket
// (kAutoFirstBucket, the default): such a net is reduced in one collective after backward. Each
// collective has a fixed cost that the overlap of a small net's backward does not repay: on 2
// H200s (NVLink NV18, 2026-11-27) torch.distributed's all_reduce takes 40-47 us for anything from
// 4 KB to 2.8 MB, and the Fashion-MNIST ResNet (2.7 MiB of gradients, a 1.9 ms step; one GPU
// 68,180 img/s) trained at 62,730 img/s a rank with a 1 MiB first bucket and 65,500 with one.
// A net under the cap loses no overlap it had: its old plan was the 1 MiB bucket early and all
// the rest in one bucket after backward anyway.
//
// A parameter's gradient is final after the backward of the first layer (lowest index) that
// uses it: a parameter shared by several layers accumulates until then. Frozen parameters
// (lr_mult 0) get no gradient and are in no bucket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace crema::distributed {

// One parameter as the planner sees it.
struct ParamSlot {
  int64_t numel = 0;
  size_t final_after_layer = 0;  // its gradient is final once this layer's backward has run
  bool frozen = false;
};

struct Bucket {
  std::vector<size_t> params;    // indices into the planner's input, in the order packed
  std::vector<int64_t> offsets;  // each one's first element in the bucket
  int64_t numel = 0;
  size_t launch_after_layer = 0;  // the smallest final_after_layer of its parameters
};

constexpr int64_t kDefaultBucketBytes = int64_t(25) << 20;
constexpr int64_t kDefaultFirstBucketBytes = int64_t(1) << 20;
// first_bucket_bytes: 1 MiB, or one bucket for a net whose gradients fit bucket_bytes.
constexpr int64_t kAutoFirstBucket = 0;

// Buckets in launch order (backward's): each holds whole parameters, at most `bucket_bytes` of
// float32 (the first at most `first_bucket_bytes`, see kAutoFirstBucket) unless one parameter
// alone is larger (it gets a bucket of its own). Each parameter's place starts at a multiple of `place_align` elements
// (the gradient reducer's 8: its pack kernels then move every place 16 bytes at a time); the
// elements between places count in numel and the caps.
std::vector<Bucket> plan_buckets(const std::vector<ParamSlot>& params, int64_t first_bucket_bytes,
                                 int64_t bucket_bytes, int64_t place_align = 1);

}  // namespace crema::distributed
