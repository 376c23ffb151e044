// The config's `distributed:` keys: how the gradients travel between the ranks. All optional; a
// run of one process checks them and has no use for them, so one config serves 1 and N GPUs.
//
//   distributed:
//     reduce_dtype: f32      the gradients' all-reduce: f32, or bf16 (half the bytes on the
//                            links: each rank's gradient rounded to bf16, averaged by NCCL in
//                            bf16, widened back into the f32 gradients; PyTorch's
//                            bf16_compress_hook). The stop vote and the display loss stay f32.
//     bucket_cap_mb: 25      a bucket's size, MiB of f32 gradients (PyTorch's bucket_cap_mb)
//     first_bucket_mb: 1     the first bucket's (bucket_plan.h says why it is smaller); by
//                            default 1, or one bucket where all gradients fit bucket_cap_mb
#pragma once

#include <cstdint>

#include "apps/distributed/bucket_plan.h"
#include "core/config.h"
#include "core/tensor.h"

namespace crema::distributed {

struct DdpSettings {
  DType reduce_dtype = DType::f32;
  int64_t first_bucket_bytes = kAutoFirstBucket;  // unless first_bucket_mb is set
  int64_t bucket_bytes = kDefaultBucketBytes;
};

// Reads `distributed:` of the config's root (defaults when absent); an unknown key, a dtype other
// than f32 or bf16, or a size that is not positive is an error naming the key's line.
DdpSettings read_ddp_settings(const ConfigNode& root);

}  // namespace crema::distributed
