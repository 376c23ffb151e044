// Contexts are independent handles (issue: crema as a library): two used at the same time from two
// threads compute, bit for bit, what each computes alone. The CPU here; GPUs in
// context_cuda_test.cpp.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/context.h"
#include "tests/core/context_threads_util.h"

namespace crema {
namespace {

TEST(ContextThreads, TwoCpuContextsInTwoThreadsComputeWhatEachComputesAlone) {
  Context first(Device::cpu(), 1, 1), second(Device::cpu(), 2, 2);
  const std::vector<float> alone_first = testing::context_work(first, 11);
  const std::vector<float> alone_second = testing::context_work(second, 12);
  ASSERT_NE(alone_first, alone_second);
  constexpr int kRounds = 20;
  std::vector<int> same(2, 0);
  std::thread a([&] {
    for (int r = 0; r < kRounds; ++r) same[0] += testing::context_work(first, 11) == alone_first;
  });
  std::thread b([&] {
    for (int r = 0; r < kRounds; ++r) same[1] += testing::context_work(second, 12) == alone_second;
  });
  a.join();
  b.join();
  EXPECT_EQ(same[0], kRounds);
  EXPECT_EQ(same[1], kRounds);
}

}  // namespace
}  // namespace crema
