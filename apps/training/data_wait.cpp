#include "apps/training/data_wait.h"

#include <chrono>

#include "core/error.h"

namespace crema::training {
namespace {

class StreamTimeline final : public WaitTimeline {
 public:
  StreamTimeline(int device, gpu::Stream stream) : device_(device), stream_(stream) {}
  Mark make_mark() override {
    gpu::DeviceGuard guard(device_);
    return gpu::create_event();
  }
  void destroy_mark(Mark mark) override {
    gpu::DeviceGuard guard(device_);
    gpu::destroy_event(mark);
  }
  void record(Mark mark) override {
    gpu::DeviceGuard guard(device_);
    gpu::record(mark, stream_);
  }
  double seconds_between(Mark from, Mark to) override {
    gpu::DeviceGuard guard(device_);
    return 1e-3 * double(gpu::elapsed_ms(from, to));
  }

 private:
  int device_;
  gpu::Stream stream_;
};

class HostTimeline final : public WaitTimeline {
 public:
  using Clock = std::chrono::steady_clock;
  Mark make_mark() override { return new Clock::time_point(); }
  void destroy_mark(Mark mark) override { delete static_cast<Clock::time_point*>(mark); }
  void record(Mark mark) override { *static_cast<Clock::time_point*>(mark) = Clock::now(); }
  double seconds_between(Mark from, Mark to) override {
    return std::chrono::duration<double>(*static_cast<Clock::time_point*>(to) -
                                         *static_cast<Clock::time_point*>(from))
        .count();
  }
};

}  // namespace

std::unique_ptr<WaitTimeline> stream_timeline(int device, gpu::Stream stream) {
  return std::make_unique<StreamTimeline>(device, stream);
}

std::unique_ptr<WaitTimeline> host_timeline() {
  return std::make_unique<HostTimeline>();
}

std::unique_ptr<WaitTimeline> training_timeline(const Context& ctx) {
  return ctx.device().is_cuda() ? stream_timeline(ctx.device().index, ctx.stream())
                                : host_timeline();
}

DataWaitMeter::DataWaitMeter(std::unique_ptr<WaitTimeline> timeline, size_t unread_limit)
    : timeline_(std::move(timeline)), unread_limit_(unread_limit) {
  CREMA_CHECK(unread_limit_ >= 2, "DataWaitMeter keeps at least 2 unread spans");
}

DataWaitMeter::~DataWaitMeter() {
  for (const Span& span : unread_) {
    timeline_->destroy_mark(span.begin);
    timeline_->destroy_mark(span.end);
  }
  for (WaitTimeline::Mark mark : spare_) timeline_->destroy_mark(mark);
  if (open_ != nullptr) timeline_->destroy_mark(open_);
}

WaitTimeline::Mark DataWaitMeter::take_mark() {
  if (spare_.empty()) return timeline_->make_mark();
  WaitTimeline::Mark mark = spare_.back();
  spare_.pop_back();
  return mark;
}

void DataWaitMeter::begin() {
  CREMA_CHECK(open_ == nullptr, "DataWaitMeter::begin with a span open");
  open_ = take_mark();
  timeline_->record(open_);
}

void DataWaitMeter::end() {
  CREMA_CHECK(open_ != nullptr, "DataWaitMeter::end without begin");
  const Span span{open_, take_mark()};
  open_ = nullptr;
  timeline_->record(span.end);
  unread_.push_back(span);
  if (unread_.size() > unread_limit_) read_oldest(unread_.size() / 2);
}

void DataWaitMeter::read_oldest(size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const Span span = unread_.front();
    unread_.pop_front();
    seconds_ += timeline_->seconds_between(span.begin, span.end);
    spare_.push_back(span.begin);
    spare_.push_back(span.end);
  }
}

double DataWaitMeter::seconds() {
  read_oldest(unread_.size());
  return seconds_;
}

}  // namespace crema::training
