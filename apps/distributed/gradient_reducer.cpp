#include "apps/distributed/gradient_reducer.h"

#include <cstring>
#include <optional>

#include "core/error.h"

namespace crema::distributed {
namespace {

// The layer after whose backward each parameter's gradient is final: the first layer using it.
std::vector<ParamSlot> slots_of(Net& net, const std::vector<Param*>& params) {
  std::vector<ParamSlot> slots(params.size());
  for (size_t k = 0; k < params.size(); ++k) {
    slots[k].numel = params[k]->value.numel();
    slots[k].frozen = params[k]->frozen();
    slots[k].final_after_layer = net.num_layers();
    CREMA_CHECK(params[k]->grad.dtype() == DType::f32,
                "gradients are averaged in float32: " + params[k]->name);
  }
  for (size_t i = net.num_layers(); i-- > 0;) {
    for (const Param& p : net.layer(i).params()) {
      for (size_t k = 0; k < params.size(); ++k) {
        if (params[k]->grad.raw() == p.grad.raw()) slots[k].final_after_layer = i;
      }
    }
  }
  return slots;
}

}  // namespace

GradientReducer::GradientReducer(Net& net, ProcessGroup& group, Context& ctx, int64_t bucket_bytes)
    : net_(net), group_(group), ctx_(ctx), params_(net.learnable_params()) {
  buckets_ = plan_buckets(slots_of(net, params_), bucket_bytes);
  if (buckets_.empty()) buckets_.emplace_back();  // every parameter frozen: the vote still goes
  const Device device = ctx.device();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const int64_t numel = buckets_[b].numel + (b + 1 == buckets_.size() ? 1 : 0);
    storage_.emplace_back(Shape{numel}, DType::f32, device, &ctx.allocator());
  }
  launched_.assign(buckets_.size(), false);
  vote_host_ = Tensor(Shape{3}, DType::f32, Device::cpu(), &ctx.staging_allocator());
  std::memset(vote_host_.raw(), 0, vote_host_.nbytes());
  if (device.is_cuda()) {
    gpu::DeviceGuard guard(device.index);
    comm_ = gpu::create_stream();
    for (size_t b = 0; b < buckets_.size(); ++b) {
      ready_.push_back(gpu::create_event());
      done_.push_back(gpu::create_event());
    }
    for (gpu::Event& e : vote_copied_) e = gpu::create_event();
  }
}

GradientReducer::~GradientReducer() {
  if (comm_ == nullptr) return;
  gpu::DeviceGuard guard(ctx_.device().index);
  gpu::synchronize(comm_);
  for (gpu::Event e : ready_) gpu::destroy_event(e);
  for (gpu::Event e : done_) gpu::destroy_event(e);
  for (gpu::Event e : vote_copied_) gpu::destroy_event(e);
  gpu::destroy_stream(comm_);
}

void GradientReducer::begin_step(bool stop_vote) {
  // Summed by the average: world x (1 / world) per voting rank.
  vote_host_.data<float>()[0] = stop_vote ? float(group_.size()) : 0.0f;
}

void GradientReducer::after_layer(size_t layer) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!launched_[b] && buckets_[b].numel > 0 && buckets_[b].launch_after_layer == layer) {
      launch(b);
    }
  }
}

void GradientReducer::launch(size_t b) {
  launched_[b] = true;
  const Bucket& bucket = buckets_[b];
  float* data = storage_[b].data<float>();
  const bool cuda = comm_ != nullptr;
  const bool carries_vote = b + 1 == buckets_.size();
  std::optional<gpu::DeviceGuard> guard;
  if (cuda) {
    guard.emplace(ctx_.device().index);
    gpu::record(ready_[b], ctx_.stream());
    gpu::wait(comm_, ready_[b]);
  }
  auto move = [&](void* to, const void* from, size_t bytes) {
    if (cuda) {
      gpu::copy(to, from, bytes, comm_);
    } else {
      std::memcpy(to, from, bytes);
    }
  };
  for (size_t k = 0; k < bucket.params.size(); ++k) {
    const Tensor& grad = params_[bucket.params[k]]->grad;
    move(data + bucket.offsets[k], grad.raw(), grad.nbytes());
  }
  // The vote from pinned memory: a graph's replay copies what begin_step wrote last.
  if (carries_vote) move(data + bucket.numel, vote_host_.data<float>(), sizeof(float));
  group_.all_reduce(data, bucket.numel + (carries_vote ? 1 : 0), Reduce::average, comm_);
  for (size_t k = 0; k < bucket.params.size(); ++k) {
    Tensor& grad = params_[bucket.params[k]]->grad;
    move(grad.raw(), data + bucket.offsets[k], grad.nbytes());
  }
  if (cuda) gpu::record(done_[b], comm_);
}

void GradientReducer::join() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (!launched_[b]) launch(b);
    if (comm_ != nullptr) gpu::wait(ctx_.stream(), done_[b]);
    launched_[b] = false;
  }
}

void GradientReducer::end_step() {
  // Slot 1 + k % 2 receives step k's sum; the host reads step k - 1's, which the GPU has
  // finished unless the host is more than a step ahead.
  float* slots = vote_host_.data<float>() + 1;
  const int64_t slot = steps_ % 2, previous = (steps_ + 1) % 2;
  if (comm_ != nullptr) {
    gpu::DeviceGuard guard(ctx_.device().index);
    gpu::copy(slots + slot, vote_in_bucket(), sizeof(float), ctx_.stream());
    gpu::record(vote_copied_[slot], ctx_.stream());
    if (steps_ > 0) gpu::synchronize_event(vote_copied_[previous]);
  } else {
    slots[slot] = *vote_in_bucket();
  }
  if (steps_ > 0) previous_votes_ = int(slots[previous] + 0.5f);
  ++steps_;
  group_.heartbeat();
}

void GradientReducer::broadcast_state() {
  for (Param* p : params_)
    group_.broadcast(p->value.data<float>(), p->value.numel(), ctx_.stream());
  for (Buffer* b : net_.buffers()) {
    if (b->value.dtype() == DType::f32) {
      group_.broadcast(b->value.data<float>(), b->value.numel(), ctx_.stream());
    }
  }
}

}  // namespace crema::distributed
