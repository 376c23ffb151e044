#include "apps/distributed/bucket_plan.h"

#include <algorithm>

namespace crema::distributed {

std::vector<Bucket> plan_buckets(const std::vector<ParamSlot>& params, int64_t first_bucket_bytes,
                                 int64_t bucket_bytes, int64_t place_align) {
  // Backward's order: later layers first; within a layer, its last parameter first.
  std::vector<size_t> order;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].frozen && params[i].numel > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (params[a].final_after_layer != params[b].final_after_layer) {
      return params[a].final_after_layer > params[b].final_after_layer;
    }
    return a > b;
  });
  auto capacity = [](int64_t bytes) {
    return std::max<int64_t>(1, bytes / int64_t(sizeof(float)));
  };
  auto place = [&](int64_t numel) { return (numel + place_align - 1) / place_align * place_align; };
  if (first_bucket_bytes == kAutoFirstBucket) {
    int64_t total = 0;  // the placed elements of one bucket holding them all
    for (size_t i : order) total = place(total) + params[i].numel;
    first_bucket_bytes =
        total <= capacity(bucket_bytes) ? bucket_bytes : kDefaultFirstBucketBytes;
  }
  std::vector<Bucket> buckets;
  for (size_t i : order) {
    const int64_t cap = capacity(buckets.size() == 1 ? first_bucket_bytes : bucket_bytes);
    if (buckets.empty() ||
        (buckets.back().numel > 0 && place(buckets.back().numel) + params[i].numel > cap)) {
      buckets.emplace_back();
      buckets.back().launch_after_layer = params[i].final_after_layer;
    }
    Bucket& b = buckets.back();
    b.params.push_back(i);
    b.offsets.push_back(place(b.numel));
    b.numel = b.offsets.back() + params[i].numel;
    b.launch_after_layer = std::min(b.launch_after_layer, params[i].final_after_layer);
  }
  return buckets;
}

}  // namespace crema::distributed
