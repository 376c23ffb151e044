// SyncBatchNorm: BatchNorm (layers/batch_norm.cpp) whose training statistics are those of the
// whole batch of a run on several processes, as PyTorch's nn.SyncBatchNorm: a BatchNorm layer
// with `sync: true`.
//   y = gamma[c] * (x - mean[c]) / sqrt(var[c] + eps) + beta[c]
//   mean[c], var[c]: over the values of channel c of every rank's x (N per rank, R ranks)
//
//   x, y: [N, C, ...] on each rank (spatial mode only).
// Keys: BatchNorm's (eps, momentum, affine, use_global_stats, param) and sync: true. Parameters
// and buffers have BatchNorm's names and shapes, so checkpoints of either load into the other.
// Every rank keeps the same running statistics (they follow the global batch).
//
// The layer reaches the other ranks through the run's collective (core/collective.h), which a
// training run of several processes hands it (apps/distributed/). Without one, with one rank, in
// the test phase or with use_global_stats, it runs BatchNorm's kernels: the same bits as
// BatchNorm. Small
// batches per GPU (detection, segmentation) are what it is for: with 8 images per GPU a plain
// BatchNorm's statistics are noisy, SyncBatchNorm's are the global batch's.
//
// A training pass all-reduces 2C + 1 doubles forward and backward, on the compute stream (the
// next layer needs the result): latency (a few microseconds on NVLink) per layer and pass.
#include "layers/sync_batch_norm.h"

#include "core/collective.h"
#include "kernels/batch_norm/batch_norm.h"
#include "kernels/batch_norm/sync_batch_norm.h"
#include "layers/batch_norm_keys.h"

namespace crema {
namespace {

class SyncBatchNormLayer final : public Layer, public UsesCollective {
 public:
  explicit SyncBatchNormLayer(const LayerSpec& spec) : Layer(spec) {
    const BatchNormKeys keys = read_batch_norm_keys(spec);
    if (keys.per_activation) {
      fail_at_key(spec, "sync", "true needs mode: spatial (per_activation has no sync form)");
    }
    eps_ = keys.eps;
    momentum_ = keys.momentum;
    affine_ = keys.affine;
    use_global_stats_ = keys.use_global_stats;
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
             Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() < 2) fail("input " + shape_str(x.shape()) + " needs at least 2 axes [N, C, ...]");
    channels_ = x.dim(1);
    if (affine_) {
      add_param("weight", {channels_}, ctx);
      ctx.fill(params_[0].value, 1.0f);
      add_param("bias", {channels_}, ctx);
      ctx.fill(params_[1].value, 0.0f);
    }
    add_buffer("running_mean", {channels_}, ctx, 0.0f);
    add_buffer("running_var", {channels_}, ctx, 1.0f);
    add_buffer("num_batches_tracked", {1}, ctx, 0.0f);
    save_mean_ = ctx.empty({channels_}, x.dtype());
    save_invstd_ = ctx.empty({channels_}, x.dtype());
    batch_mean_ = ctx.empty({channels_}, x.dtype());
    batch_var_ = ctx.empty({channels_}, x.dtype());
    local_ = ctx.empty({2 * channels_ + 1}, DType::f64);
    global_ = ctx.empty({2 * channels_ + 1}, DType::f64);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() < 2 || x.dim(1) != channels_) {
      fail("input " + shape_str(x.shape()) + " must be [N, " + std::to_string(channels_) +
           ", ...] (the channels it was set up with)");
    }
    // Every rank has at least 2 values per channel, so the global M - 1 > 0.
    if (!use_global_stats_ && x.numel() / channels_ < 2) {
      fail("input " + shape_str(x.shape()) +
           " has one value per channel: batch statistics need more (PyTorch refuses this too)");
    }
    reshape_top_or_input_copy(*bottom[0], *top[0], input_copy_, ctx);
  }

  // Forward over the ranks: the per-channel sum x, sum x^2 and count, all-reduced; the global
  // mean and variance from them (the running statistics follow); then the normalization with
  // those fixed statistics, which saves mean and invstd for the backward.
  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (top[0] == bottom[0]) ctx.copy(input_copy_, bottom[0]->value);
    const Tensor& x = input(bottom, top);
    Tensor& y = top[0]->value;
    Tensor& running_mean = buffers_[0].value;
    Tensor& running_var = buffers_[1].value;
    if (use_global_stats_) {
      kernels::batch_norm_forward_inference(ctx, x, gamma(), beta(), running_mean, running_var,
                                            eps_, y, save_mean_, save_invstd_);
    } else if (!syncs()) {
      kernels::batch_norm_forward_training(ctx, x, gamma(), beta(), eps_, momentum_, y, save_mean_,
                                           save_invstd_, running_mean, running_var,
                                           buffers_[2].value);
    } else {
      kernels::batch_norm_channel_sums(ctx, x, global_);
      collective_->all_reduce_sum(global_, ctx.stream());
      kernels::batch_norm_statistics(ctx, global_, momentum_, batch_mean_, batch_var_, running_mean,
                                     running_var, buffers_[2].value);
      kernels::batch_norm_forward_inference(ctx, x, gamma(), beta(), batch_mean_, batch_var_, eps_,
                                            y, save_mean_, save_invstd_);
    }
  }

  // BatchNorm's derivation (layers/batch_norm.cpp) with M the global count: the mean and the
  // variance depend on every rank's x, so the sums over the channel in
  //   dL/dx = gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
  // run over every rank's values (all-reduced), while this rank's parameter gradients are the
  // sums over its own values (its loss is its samples'; the ranks' gradients are averaged after
  // backward). So two ranks of half a batch give the whole batch's dL/dx, and the whole batch's
  // dL/dgamma and dL/dbeta as the sum of theirs.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    Tensor none;
    Tensor& dgamma = affine_ && !params_[0].frozen() ? params_[0].grad : none;
    Tensor& dbeta = affine_ && !params_[1].frozen() ? params_[1].grad : none;
    Tensor& dx = propagate_down[0] ? bottom[0]->grad : none;
    if (!dx.defined() && !dgamma.defined() && !dbeta.defined()) return;
    const Tensor& x = input(bottom, top);
    const Tensor& dy = top[0]->grad;
    if (use_global_stats_ || !syncs()) {
      kernels::batch_norm_backward(ctx, x, dy, gamma(), save_mean_, save_invstd_,
                                   !use_global_stats_, dx, dgamma, dbeta);
      return;
    }
    kernels::batch_norm_gradient_sums(ctx, x, dy, save_mean_, save_invstd_, local_);
    if (dx.defined()) {  // the same on every rank: they train one config
      ctx.copy(global_, local_);
      collective_->all_reduce_sum(global_, ctx.stream());
    }
    kernels::sync_batch_norm_backward(ctx, x, dy, gamma(), save_mean_, save_invstd_, local_,
                                      global_, dx, dgamma, dbeta);
  }

  void set_collective(Collective* collective) override { collective_ = collective; }

  BackwardReads backward_reads() const override { return {!input_copy_.defined(), false}; }

  // As BatchNorm: inference with the running statistics (ONNX's BatchNormalization).
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    if (!use_global_stats_) fail("use_global_stats: false in the test phase cannot be exported");
    const std::string& top = io.top(0);
    const std::string scale =
        affine_ ? g.weight(params_[0].name, params_[0].value)
                : g.floats(top + "/ones", std::vector<float>(channels_, 1.0f), {channels_});
    const std::string shift =
        affine_ ? g.weight(params_[1].name, params_[1].value)
                : g.floats(top + "/zeros", std::vector<float>(channels_, 0.0f), {channels_});
    g.node("BatchNormalization",
           {io.bottom(0), scale, shift, g.weight(buffers_[0].name, buffers_[0].value),
            g.weight(buffers_[1].name, buffers_[1].value)},
           {top}, {{"epsilon", eps_}});
  }

 private:
  // Training statistics over the ranks: a collective of several, in the train phase (the test
  // passes are sharded and may end with batches of different sizes; they normalize with the
  // running statistics anyway).
  bool syncs() const {
    return phase() == Phase::train && collective_ != nullptr && collective_->ranks() > 1;
  }
  const Tensor& input(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
    return top[0] == bottom[0] ? input_copy_ : bottom[0]->value;
  }
  const Tensor& gamma() const { return affine_ ? params_[0].value : no_tensor_; }
  const Tensor& beta() const { return affine_ ? params_[1].value : no_tensor_; }

  float eps_, momentum_;
  bool affine_, use_global_stats_;
  int64_t channels_ = 0;
  Tensor save_mean_, save_invstd_;  // [C]: the statistics the last forward normalized with
  Tensor batch_mean_, batch_var_;   // [C]: the global batch's mean and biased variance
  Tensor local_, global_;           // f64 [2C + 1]: this rank's sums, the ranks' sums
  Tensor input_copy_;               // x, when running in place (y overwrites it)
  Tensor no_tensor_;                // an undefined tensor: "absent" for the kernels
  Collective* collective_ = nullptr;
};

}  // namespace

std::unique_ptr<Layer> make_sync_batch_norm_if_asked(const LayerSpec& spec) {
  if (!spec.batch_norm_syncs()) return nullptr;
  return std::make_unique<SyncBatchNormLayer>(spec);
}

}  // namespace crema
