#include "apps/training/input_feeder.h"

#include "core/side_streams.h"

namespace crema {
namespace {

// What the net's `label` input receives: the soft targets when the loader makes them ([B, K],
// model.inputs.label: [K]), else the class indices ([B]).
const Tensor& fed_labels(const data::Batch& batch) {
  return batch.targets.defined() ? batch.targets : batch.labels;
}

}  // namespace

InputFeeder::InputFeeder(Context& ctx) : ctx_(ctx) {
  if (ctx_.device().is_cuda()) {
    copy_stream_ = gpu::create_nonblocking_stream();  // ordered by the slots' events
    for (Slot& slot : slots_) {
      slot.ready = gpu::create_event();
      slot.consumed = gpu::create_event();
      slot.data = ctx_.empty({0});
      slot.labels = ctx_.empty({0});
    }
  }
}

InputFeeder::~InputFeeder() {
  if (copy_stream_ == nullptr) return;
  gpu::synchronize(copy_stream_);
  for (Slot& slot : slots_) {
    gpu::destroy_event(slot.ready);
    gpu::destroy_event(slot.consumed);
  }
  gpu::destroy_stream(copy_stream_);
}

void InputFeeder::stage(data::Batch batch) {
  Slot& slot = slots_[next_stage_];
  next_stage_ = (next_stage_ + 1) % slots_.size();
  if (copy_stream_ == nullptr) {
    slot.host = std::move(batch);
    return;
  }
  if (slot.used) {
    gpu::synchronize_event(slot.ready);      // the old host batch's copy is done: safe to free
    gpu::wait(copy_stream_, slot.consumed);  // and the net has taken the old device copy
  }
  slot.host = std::move(batch);
  slot.used = true;
  slot.data.reshape(slot.host.data.shape());
  slot.labels.reshape(fed_labels(slot.host).shape());
  gpu::copy(slot.data.raw(), slot.host.data.raw(), slot.host.data.nbytes(), copy_stream_);
  gpu::copy(slot.labels.raw(), fed_labels(slot.host).raw(), fed_labels(slot.host).nbytes(),
            copy_stream_);
  gpu::record(slot.ready, copy_stream_);
}

void InputFeeder::feed(Net& net, training::DataWaitMeter* wait) {
  Slot& slot = slots_[next_feed_];
  next_feed_ = (next_feed_ + 1) % slots_.size();
  net.set_batch_size(slot.host.data.dim(0), ctx_);
  Tensor& data = net.blob("data").value;
  Tensor& labels = net.blob("label").value;
  if (copy_stream_ == nullptr) {
    data.copy_from(slot.host.data);
    labels.copy_from(fed_labels(slot.host));
    return;
  }
  if (wait != nullptr) wait->begin();
  gpu::wait(ctx_.stream(), slot.ready);
  if (wait != nullptr) wait->end();
  ctx_.copy(data, slot.data);
  ctx_.copy(labels, slot.labels);
  gpu::record(slot.consumed, ctx_.stream());
}

}  // namespace crema
