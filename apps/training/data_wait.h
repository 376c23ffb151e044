// DataWaitMeter: how long training waited for its data. On a GPU that is the time the training
// (compute) stream stood idle because the next batch was not there; on the CPU, the time the
// step spent blocked in the loader. It is the figure of "training waits on data <= 3% of the
// time": what the data costs the step, not what the loader's threads do meanwhile.
//
// A span is opened just before training waits for data and closed right after, twice a batch:
//   1. around the compute stream's wait for the batch's copy to the device (InputFeeder::feed:
//      cudaStreamWaitEvent on the copy's "ready" event): a copy, or a GPU decode, not finished
//      when the stream gets there;
//   2. around the host's call into the loader (next(), then staging the batch): a host blocked
//      there long enough lets the stream run out of queued work.
// On a GPU the ends are CUDA events recorded on the training stream. An event completes when the
// stream reaches it, so a span lasts from the moment the stream finishes the work queued before
// it to the moment it may start the work queued after it: zero when the batch was there in time,
// however long the host waited. That is why the host's own wait (DataLoader::wait_seconds) is the
// wrong measure on a GPU: the host runs a step ahead of the GPU, so time it spends blocked in the
// loader while the GPU still works through a queued step costs nothing (with decode: gpu the
// host blocked 78% of the time while the step rate fell 4%: H200, 2026-11-26). On the CPU the
// ends are the host's clock and span 2 is exactly that host wait (span 1 does not happen).
//
// The elapsed times are read back lazily: seconds() reads every closed span (call it where the
// host waits for the stream anyway: the display line's loss read-back, the end of the run), and
// when more than `unread_limit` spans are unread the older half is read, their events long
// complete, so memory stays bounded and no step waits on the GPU.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "core/context.h"

namespace crema::training {

// Where a meter's marks come from: points of the timeline training runs on, and the seconds
// between two of them.
class WaitTimeline {
 public:
  using Mark = void*;
  virtual ~WaitTimeline() = default;
  virtual Mark make_mark() = 0;
  virtual void destroy_mark(Mark mark) = 0;
  // Puts `mark` at the present point of the timeline (on a stream: behind the work queued so far).
  virtual void record(Mark mark) = 0;
  // Seconds from `from` to `to`, both recorded, `from` first; may wait until `to` is reached.
  virtual double seconds_between(Mark from, Mark to) = 0;
};

// The timeline of `stream` on GPU `device` (CUDA events recorded on it).
std::unique_ptr<WaitTimeline> stream_timeline(int device, gpu::Stream stream);
// The host's steady clock.
std::unique_ptr<WaitTimeline> host_timeline();
// ctx's: its stream's on a GPU, the host's on the CPU.
std::unique_ptr<WaitTimeline> training_timeline(const Context& ctx);

class DataWaitMeter {
 public:
  explicit DataWaitMeter(std::unique_ptr<WaitTimeline> timeline, size_t unread_limit = 64);
  ~DataWaitMeter();
  DataWaitMeter(const DataWaitMeter&) = delete;
  DataWaitMeter& operator=(const DataWaitMeter&) = delete;

  // Just before training waits for data, and right after (one span open at a time).
  void begin();
  void end();
  // The seconds of every span closed so far. On a GPU, waits until the stream has reached the
  // last one.
  double seconds();

 private:
  struct Span {
    WaitTimeline::Mark begin, end;
  };
  WaitTimeline::Mark take_mark();
  // Adds the `count` oldest unread spans to seconds_ and keeps their marks for reuse.
  void read_oldest(size_t count);

  std::unique_ptr<WaitTimeline> timeline_;
  size_t unread_limit_;
  std::deque<Span> unread_;                // closed, not read yet, oldest first
  std::vector<WaitTimeline::Mark> spare_;  // recorded and read: free to record again
  WaitTimeline::Mark open_ = nullptr;      // begin()'s mark until end()
  double seconds_ = 0.0;                   // the spans read so far
};

}  // namespace crema::training
