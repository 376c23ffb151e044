// DataWaitMeter (apps/training/data_wait.h) on a fake timeline whose clock the test moves: the
// spans' sum, reads only when asked or past the unread limit (never of a recent span), the marks
// reused and all destroyed. The CUDA-event timeline is the same meter over gpu:: events.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "apps/training/data_wait.h"
#include "core/error.h"

namespace crema::training {
namespace {

// A timeline whose "now" the test sets. A mark holds the time it was recorded at; the counters
// tell what the meter asked for.
struct FakeClock {
  double now = 0.0;
  int live_marks = 0, made_marks = 0, reads = 0;
  double newest_read_end = -1.0;  // the latest `to` mark any read reached
};

class FakeTimeline final : public WaitTimeline {
 public:
  explicit FakeTimeline(FakeClock& clock) : clock_(clock) {}
  Mark make_mark() override {
    ++clock_.live_marks, ++clock_.made_marks;
    return new double(-1.0);
  }
  void destroy_mark(Mark mark) override {
    --clock_.live_marks;
    delete static_cast<double*>(mark);
  }
  void record(Mark mark) override { *static_cast<double*>(mark) = clock_.now; }
  double seconds_between(Mark from, Mark to) override {
    const double a = *static_cast<double*>(from), b = *static_cast<double*>(to);
    EXPECT_GE(a, 0.0) << "read before it was recorded";
    ++clock_.reads;
    clock_.newest_read_end = std::max(clock_.newest_read_end, b);
    return b - a;
  }

 private:
  FakeClock& clock_;
};

TEST(DataWaitMeter, SumsTheClosedSpans) {
  FakeClock clock;
  DataWaitMeter meter(std::make_unique<FakeTimeline>(clock));
  clock.now = 1.0;
  meter.begin();
  clock.now = 1.5;
  meter.end();
  clock.now = 3.0;
  meter.begin();
  clock.now = 3.25;
  meter.end();
  clock.now = 7.0;
  meter.begin();  // still open: not counted
  clock.now = 9.0;
  EXPECT_DOUBLE_EQ(meter.seconds(), 0.75);
  meter.end();
  EXPECT_DOUBLE_EQ(meter.seconds(), 2.75);
  EXPECT_DOUBLE_EQ(meter.seconds(), 2.75);  // a span is counted once
}

// Nothing is read while the unread spans stay within the limit; past it only the older half is,
// so the newest span (the one the GPU may still be working towards) is never waited for, and the
// marks are reused: memory stays bounded over any number of steps.
TEST(DataWaitMeter, ReadsLazilyOldSpansOnlyAndReusesMarks) {
  FakeClock clock;
  const size_t limit = 8;
  DataWaitMeter meter(std::make_unique<FakeTimeline>(clock), limit);
  double expected = 0.0;
  for (int step = 0; step < 1000; ++step) {
    clock.now = step;
    meter.begin();
    clock.now = step + 0.001 * (step % 7);
    expected += 0.001 * (step % 7);
    meter.end();
    if (step < int(limit)) EXPECT_EQ(clock.reads, 0) << step;
    if (clock.reads > 0) EXPECT_LT(clock.newest_read_end, step - double(limit) / 2) << step;
  }
  EXPECT_GT(clock.reads, 0);
  EXPECT_LE(clock.made_marks, int(2 * limit + 2));
  EXPECT_NEAR(meter.seconds(), expected, 1e-9);
  EXPECT_EQ(clock.reads, 1000);
}

TEST(DataWaitMeter, DestroysEveryMark) {
  FakeClock clock;
  {
    DataWaitMeter meter(std::make_unique<FakeTimeline>(clock), 4);
    for (int i = 0; i < 11; ++i) {
      meter.begin();
      meter.end();
    }
    meter.seconds();
    meter.begin();
    EXPECT_GT(clock.live_marks, 0);
  }
  EXPECT_EQ(clock.live_marks, 0);
}

TEST(DataWaitMeter, SpansMustAlternate) {
  FakeClock clock;
  DataWaitMeter meter(std::make_unique<FakeTimeline>(clock));
  EXPECT_THROW(meter.end(), Error);
  meter.begin();
  EXPECT_THROW(meter.begin(), Error);
}

// The CPU's timeline is the host clock: a span holds the time between begin and end.
TEST(DataWaitMeter, HostTimelineTimesTheHostsWait) {
  DataWaitMeter meter(host_timeline());
  meter.begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  meter.end();
  EXPECT_GE(meter.seconds(), 0.02);
  EXPECT_LT(meter.seconds(), 1.0);
}

}  // namespace
}  // namespace crema::training
