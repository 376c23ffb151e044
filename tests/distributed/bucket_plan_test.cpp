// Gradient buckets: backward's order, the size cap, shared and frozen parameters.
#include <gtest/gtest.h>

#include "apps/distributed/bucket_plan.h"

namespace crema::distributed {
namespace {

TEST(BucketPlan, BackwardsOrderFilledUpToTheCap) {
  // Layers 0..3, each with a weight and a bias; 4 bytes per element, cap 40 bytes = 10 floats.
  const std::vector<ParamSlot> params = {{6, 0}, {2, 0}, {4, 1}, {1, 1},
                                         {3, 2}, {1, 2}, {5, 3}, {1, 3}};
  const std::vector<Bucket> buckets = plan_buckets(params, 40, 40);
  ASSERT_EQ(buckets.size(), 3u);
  // Layer 3's bias, weight, then layer 2's bias: 1 + 5 + 1 = 7, layer 2's weight (3) makes 10.
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{7, 6, 5, 4}));
  EXPECT_EQ(buckets[0].offsets, (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(buckets[0].numel, 10);
  EXPECT_EQ(buckets[0].launch_after_layer, 2u);
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{3, 2, 1}));
  EXPECT_EQ(buckets[1].launch_after_layer, 0u);
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{0}));
  EXPECT_EQ(buckets[2].launch_after_layer, 0u);
}

TEST(BucketPlan, AParameterLargerThanTheCapGetsABucketOfItsOwn) {
  const std::vector<Bucket> buckets = plan_buckets({{2, 0}, {100, 1}, {2, 2}}, 16, 16);
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{2}));
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{1}));
  EXPECT_EQ(buckets[1].numel, 100);
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{0}));
}

TEST(BucketPlan, FrozenParametersAreInNoBucket) {
  ParamSlot frozen{50, 1};
  frozen.frozen = true;
  const std::vector<Bucket> buckets = plan_buckets({{4, 0}, frozen, {4, 2}}, 1 << 20, 1 << 20);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{2, 0}));
  EXPECT_EQ(buckets[0].numel, 8);
  EXPECT_TRUE(plan_buckets({frozen}, 1 << 20, 1 << 20).empty());
}

TEST(BucketPlan, ABucketWaitsForItsEarliestLayer) {
  // A parameter shared by layers 1 and 3 is final after layer 1 (its first user): a bucket that
  // holds it is launched there, not at layer 3.
  const std::vector<Bucket> buckets = plan_buckets({{4, 3}, {4, 1}, {4, 2}}, 1 << 20, 1 << 20);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{0, 2, 1}));
  EXPECT_EQ(buckets[0].launch_after_layer, 1u);
}

TEST(BucketPlan, TheFirstBucketHasItsOwnSmallerCap) {
  // PyTorch's 1 MiB then 25 MiB, scaled: the first bucket holds at most 3 floats (12 bytes), the
  // next ones 10 (40 bytes). Layer 3's bias (1) and weight (2) fill the first; layer 2's bias
  // (1) would overflow it and opens the second, which takes everything else (1 + 4 + 1 + 4 = 10).
  const std::vector<ParamSlot> params = {{4, 0}, {1, 0}, {4, 2}, {1, 2}, {2, 3}, {1, 3}};
  const std::vector<Bucket> buckets = plan_buckets(params, 12, 40);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{5, 4}));
  EXPECT_EQ(buckets[0].numel, 3);
  EXPECT_EQ(buckets[0].launch_after_layer, 3u);
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{3, 2, 1, 0}));
  EXPECT_EQ(buckets[1].numel, 10);
  EXPECT_EQ(buckets[1].launch_after_layer, 0u);
}

TEST(BucketPlan, PlacesStartAtMultiplesOfTheAlignment) {
  // In backward's order: 3 floats at 0, 5 at 4 (not 3), 1 at 12 (not 9), 6 at 16 (not 10).
  const std::vector<ParamSlot> params = {{6, 0}, {1, 1}, {5, 2}, {3, 3}};
  const std::vector<Bucket> one = plan_buckets(params, 100, 100, 4);  // caps of 25 floats
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].params, (std::vector<size_t>{3, 2, 1, 0}));
  EXPECT_EQ(one[0].offsets, (std::vector<int64_t>{0, 4, 12, 16}));
  EXPECT_EQ(one[0].numel, 22);
  // The gaps count against the cap: with 20 floats the last parameter (16 + 6 = 22) opens a
  // second bucket, where unaligned (10 + 6 = 16) it would have fitted.
  const std::vector<Bucket> two = plan_buckets(params, 80, 80, 4);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].numel, 13);
  EXPECT_EQ(two[1].params, (std::vector<size_t>{0}));
  EXPECT_EQ(two[1].offsets, (std::vector<int64_t>{0}));
  EXPECT_EQ(plan_buckets(params, 80, 80).size(), 1u);
}

TEST(BucketPlan, AutoFirstBucketIsOneBucketWhereEveryGradientFitsTheCap) {
  // Four layers of 200,000 floats (800 KB each, 3.2 MB in all).
  const std::vector<ParamSlot> params = {{200000, 0}, {200000, 1}, {200000, 2}, {200000, 3}};
  // A 4 MiB cap holds them all: one bucket, launched after layer 0 (backward's end).
  const std::vector<Bucket> one = plan_buckets(params, kAutoFirstBucket, 4 << 20);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].numel, 800000);
  EXPECT_EQ(one[0].launch_after_layer, 0u);
  // A 2 MiB cap does not: the first bucket is 1 MiB (layer 3 alone), then 2 MiB ones.
  const std::vector<Bucket> three = plan_buckets(params, kAutoFirstBucket, 2 << 20);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].params, (std::vector<size_t>{3}));
  EXPECT_EQ(three[1].params, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(three[2].params, (std::vector<size_t>{0}));
  // A first bucket asked for explicitly stays, even where one bucket would hold everything.
  EXPECT_EQ(plan_buckets(params, kDefaultFirstBucketBytes, 4 << 20).size(), 2u);
}

}  // namespace
}  // namespace crema::distributed
