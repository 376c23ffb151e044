#include "apps/distributed/gradient_reducer.h"

#include <cstring>
#include <optional>

#include "core/build_config.h"
#include "core/error.h"
#include "core/side_streams.h"
#include "kernels/layout/layout.h"

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

// The values that ride after the last bucket: the stop vote and the display loss sum.
constexpr int64_t kExtras = 2;

// run(stream) where CUDA is built; a build without it has no GPU to come here and never compiles
// the call (the generic lambda's body, as kernels/common/dispatch.h defers its CUDA code).
template <class Run>
void on_gpu(gpu::Stream stream, const Run& run) {
  if constexpr (kBuiltWithCuda) run(stream);
}

// y[0, n) = x[0, n) converted (f32 <-> bf16), on `stream` on a GPU, at once on the CPU.
void convert(const void* x, DType from, void* y, DType to, int64_t n, gpu::Stream stream) {
  if (stream == nullptr) return kernels::cpu::convert(1, 1, n, from, x, to, y, false, 1);
  on_gpu(stream, [&](auto s) { kernels::cuda::convert(1, 1, n, from, x, to, y, false, s); });
}

}  // namespace

GradientReducer::GradientReducer(Net& net, ProcessGroup& group, Context& ctx,
                                 const DdpSettings& settings, Tensor* loss_sum)
    : net_(net),
      group_(group),
      ctx_(ctx),
      settings_(settings),
      loss_sum_(loss_sum),
      params_(net.learnable_params()) {
  buckets_ =
      plan_buckets(slots_of(net, params_), settings.first_bucket_bytes, settings.bucket_bytes);
  if (buckets_.empty()) buckets_.emplace_back();  // every parameter frozen: the extras still go
  const Device device = ctx.device();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const bool last = b + 1 == buckets_.size();
    const int64_t numel = buckets_[b].numel + (last && !narrow() ? kExtras : 0);
    storage_.emplace_back(Shape{numel}, settings.reduce_dtype, device, &ctx.allocator());
  }
  if (narrow()) tail_ = Tensor(Shape{kExtras}, DType::f32, device, &ctx.allocator());
  launched_.assign(buckets_.size(), false);
  vote_host_ = Tensor(Shape{3}, DType::f32, Device::cpu(), &ctx.staging_allocator());
  std::memset(vote_host_.raw(), 0, vote_host_.nbytes());
  if (device.is_cuda()) {
    gpu::DeviceGuard guard(device.index);
    comm_ = gpu::create_high_priority_stream();
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

void GradientReducer::move(void* to, const void* from, size_t bytes) {
  if (comm_ != nullptr) {
    gpu::copy(to, from, bytes, comm_);
  } else {
    std::memcpy(to, from, bytes);
  }
}

void GradientReducer::pack(const Tensor& grad, void* to) {
  if (!narrow()) return move(to, grad.raw(), grad.nbytes());
  convert(grad.raw(), DType::f32, to, settings_.reduce_dtype, grad.numel(), comm_);
}

void GradientReducer::unpack(const void* from, Tensor& grad) {
  if (!narrow()) return move(grad.raw(), from, grad.nbytes());
  convert(from, settings_.reduce_dtype, grad.raw(), DType::f32, grad.numel(), comm_);
}

void GradientReducer::launch(size_t b) {
  launched_[b] = true;
  const Bucket& bucket = buckets_[b];
  char* data = static_cast<char*>(storage_[b].raw());
  const size_t element = dtype_size(settings_.reduce_dtype);
  const bool last = b + 1 == buckets_.size();
  std::optional<gpu::DeviceGuard> guard;
  if (comm_ != nullptr) {
    guard.emplace(ctx_.device().index);
    gpu::record(ready_[b], ctx_.stream());
    gpu::wait(comm_, ready_[b]);
  }
  for (size_t k = 0; k < bucket.params.size(); ++k) {
    pack(params_[bucket.params[k]]->grad, data + size_t(bucket.offsets[k]) * element);
  }
  float* extra = last ? extras() : nullptr;
  if (last) {
    // The vote from pinned memory: a graph's replay copies what begin_step wrote last.
    move(extra, vote_host_.data<float>(), sizeof(float));
    if (loss_sum_ != nullptr) move(extra + 1, loss_sum_->raw(), sizeof(float));
  }
  const int64_t riding = last && !narrow() ? kExtras : 0;
  group_.all_reduce(data, bucket.numel + riding, settings_.reduce_dtype, Reduce::average, comm_);
  if (last && narrow()) group_.all_reduce(extra, kExtras, Reduce::average, comm_);
  for (size_t k = 0; k < bucket.params.size(); ++k) {
    unpack(data + size_t(bucket.offsets[k]) * element, params_[bucket.params[k]]->grad);
  }
  if (last && loss_sum_ != nullptr) move(loss_sum_->raw(), extra + 1, sizeof(float));
  if (comm_ != nullptr) gpu::record(done_[b], comm_);
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
    gpu::copy(slots + slot, extras(), sizeof(float), ctx_.stream());
    gpu::record(vote_copied_[slot], ctx_.stream());
    if (steps_ > 0) gpu::synchronize_event(vote_copied_[previous]);
  } else {
    slots[slot] = *extras();
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
