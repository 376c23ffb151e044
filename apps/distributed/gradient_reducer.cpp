#include "apps/distributed/gradient_reducer.h"

#include <cstring>
#include <optional>

#include "core/build_config.h"
#include "core/error.h"
#include "core/side_streams.h"
#include "kernels/cast/flat.h"

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

// Each gradient's place in its bucket starts at a multiple of this many elements (16 bytes in
// bf16, 32 in f32; plan_buckets' place_align), so that the pack and unpack kernels move it 16
// bytes at a time (kernels/cast/flat.h). The gaps, a few elements per parameter, stay zero:
// never written, and their average is zero.
constexpr int64_t kPlaceAlign = 8;

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
      plan_buckets(slots_of(net, params_), settings.first_bucket_bytes, settings.bucket_bytes,
                   kPlaceAlign);
  if (buckets_.empty()) buckets_.emplace_back();  // every parameter frozen: the extras still go
  const Device device = ctx.device();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    // Each bucket's table of (gradient, place, numel) for the pack and unpack kernels, built
    // once: the gradients never move (allocated when their layers are set up, shared before the
    // reducer exists by Net::share_params_from).
    const Bucket& bucket = buckets_[b];
    std::vector<kernels::FlatSlice>& slices = slices_.emplace_back();
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      Tensor& grad = params_[bucket.params[k]]->grad;
      slices.push_back({grad.data<float>(), bucket.offsets[k], grad.numel()});
    }
    const bool last = b + 1 == buckets_.size();
    const int64_t numel = bucket.numel + (last && !narrow() ? kExtras : 0);
    storage_.emplace_back(Shape{numel}, settings.reduce_dtype, device, &ctx.allocator());
    Tensor zeros(Shape{numel}, settings.reduce_dtype);  // the gaps stay zero
    std::memset(zeros.raw(), 0, zeros.nbytes());
    storage_.back().copy_from(zeros);
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

void GradientReducer::pack(size_t b) {
  const std::vector<kernels::FlatSlice>& slices = slices_[b];
  for (size_t k = 0; k < slices.size(); ++k) {
    const Param& p = *params_[buckets_[b].params[k]];
    CREMA_CHECK(p.grad.raw() == slices[k].tensor,
                "the gradient of " + p.name + " moved after the gradient reducer was built");
  }
  const int count = int(slices.size());
  void* data = storage_[b].raw();
  const DType dtype = settings_.reduce_dtype;
  if (comm_ == nullptr) return kernels::cpu::pack_flat(slices.data(), count, dtype, data, 1);
  on_gpu(comm_, [&](auto s) { kernels::cuda::pack_flat(slices.data(), count, dtype, data, s); });
}

void GradientReducer::unpack(size_t b) {
  const std::vector<kernels::FlatSlice>& slices = slices_[b];
  const int count = int(slices.size());
  const void* data = storage_[b].raw();
  const DType dtype = settings_.reduce_dtype;
  if (comm_ == nullptr) return kernels::cpu::unpack_flat(data, dtype, slices.data(), count, 1);
  on_gpu(comm_, [&](auto s) { kernels::cuda::unpack_flat(data, dtype, slices.data(), count, s); });
}

void GradientReducer::launch(size_t b) {
  launched_[b] = true;
  const Bucket& bucket = buckets_[b];
  void* data = storage_[b].raw();
  const bool last = b + 1 == buckets_.size();
  std::optional<gpu::DeviceGuard> guard;
  if (comm_ != nullptr) {
    guard.emplace(ctx_.device().index);
    gpu::record(ready_[b], ctx_.stream());
    gpu::wait(comm_, ready_[b]);
  }
  pack(b);
  float* extra = last ? extras() : nullptr;
  if (last) {
    // The vote from pinned memory: a graph's replay copies what begin_step wrote last.
    move(extra, vote_host_.data<float>(), sizeof(float));
    if (loss_sum_ != nullptr) move(extra + 1, loss_sum_->raw(), sizeof(float));
  }
  const int64_t riding = last && !narrow() ? kExtras : 0;
  group_.all_reduce(data, bucket.numel + riding, settings_.reduce_dtype, Reduce::average, comm_);
  if (last && narrow()) group_.all_reduce(extra, kExtras, Reduce::average, comm_);
  unpack(b);
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
