// DataWaitMeter on a CUDA stream's timeline (apps/training/data_wait.h): a span counts the time the
// stream itself stood idle -- waiting on another stream's event, or for a host that has not
// queued the next work yet -- and nothing of a host wait that the stream spent busy. The work is
// fills of a large buffer, timed first so that the bounds scale with the GPU; the bounds are
// loose (a factor of 2) because the host's sleeps and launches jitter.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "apps/training/data_wait.h"
#include "tests/support/cuda_test_util.h"

namespace crema::training {
namespace {

class StreamWait : public ::testing::Test {
 protected:
  void SetUp() override {
    CREMA_REQUIRE_CUDA();
    gpu::use_device(0);
    buffer_ = static_cast<float*>(gpu::device_allocate(kCount * sizeof(float)));
    stream_ = gpu::create_stream();
    other_ = gpu::create_stream();
    // About 50 ms of fills, whatever the GPU.
    busy(other_, 1);
    const gpu::Event begin = gpu::create_event(), end = gpu::create_event();
    gpu::record(begin, other_);
    busy(other_, 4);
    gpu::record(end, other_);
    const double four = 1e-3 * gpu::elapsed_ms(begin, end);
    fills_ = std::max(1, int(0.05 / (four / 4)));
    gpu::record(begin, other_);
    busy(other_, fills_);
    gpu::record(end, other_);
    work_seconds_ = 1e-3 * gpu::elapsed_ms(begin, end);
    gpu::destroy_event(begin);
    gpu::destroy_event(end);
  }
  void TearDown() override {
    if (buffer_ == nullptr) return;
    gpu::synchronize(stream_);
    gpu::synchronize(other_);
    gpu::destroy_stream(stream_);
    gpu::destroy_stream(other_);
    gpu::device_free(buffer_);
  }
  void busy(gpu::Stream stream, int fills) {
    for (int i = 0; i < fills; ++i) gpu::fill(buffer_, kCount, float(i), stream);
  }
  static void sleep(double seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }

  static constexpr size_t kCount = size_t(1) << 28;  // 1 GiB of floats
  float* buffer_ = nullptr;
  gpu::Stream stream_ = nullptr, other_ = nullptr;
  int fills_ = 1;
  double work_seconds_ = 0.0;  // of fills_ fills
};

// The feeder's case: the stream waits for a copy (here: work) on another stream.
TEST_F(StreamWait, AWaitOnAnotherStreamsEventIsCounted) {
  DataWaitMeter meter(stream_timeline(0, stream_));
  const gpu::Event done = gpu::create_event();
  busy(other_, fills_);
  gpu::record(done, other_);
  meter.begin();
  gpu::wait(stream_, done);
  meter.end();
  const double waited = meter.seconds();
  EXPECT_GT(waited, 0.5 * work_seconds_);
  EXPECT_LT(waited, 2.0 * work_seconds_);
  gpu::destroy_event(done);
}

// The host blocked in the loader while the stream still works through queued work: no stall.
TEST_F(StreamWait, AHostWaitWhileTheStreamIsBusyIsNotCounted) {
  DataWaitMeter meter(stream_timeline(0, stream_));
  busy(stream_, fills_);
  meter.begin();
  sleep(0.2 * work_seconds_);
  meter.end();
  EXPECT_LT(meter.seconds(), 0.1 * work_seconds_);
}

// The host blocked longer than the queued work lasts: the stream idles for the difference.
TEST_F(StreamWait, AHostWaitPastTheQueuedWorkIsCounted) {
  DataWaitMeter meter(stream_timeline(0, stream_));
  busy(stream_, fills_);
  meter.begin();
  sleep(3.0 * work_seconds_);
  meter.end();
  const double waited = meter.seconds();
  EXPECT_GT(waited, 1.0 * work_seconds_);
  EXPECT_LT(waited, 4.0 * work_seconds_);
}

}  // namespace
}  // namespace crema::training
