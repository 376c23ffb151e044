// BatchNorm: normalizes each channel by its mean and variance, then scales and shifts it
// (Ioffe & Szegedy 2015), as PyTorch's nn.BatchNorm1d/2d/3d:
//   y = gamma[c] * (x - mean[c]) / sqrt(var[c] + eps) + beta[c]
//
//   x, y: [N, C, ...] (any number of axes after C: [N, C] features, [N, C, H, W] images).
// Training: mean and var are the batch's (over N and the axes after C; var biased), and the
//   running statistics move towards them:
//     running_mean = (1 - momentum) * running_mean + momentum * mean
//     running_var  = (1 - momentum) * running_var  + momentum * var * M / (M - 1)   (unbiased;
//                                                           M = values per channel, at least 2)
//   num_batches_tracked counts these updates.
// Test phase, or use_global_stats: true: mean and var are the running statistics, unchanged.
// mode: per_activation (cuDNN's CUDNN_BATCHNORM_PER_ACTIVATION, for features after a fully
//   connected layer) gives every element of x's [C, ...] its own statistics over the batch only;
//   gamma, beta and the buffers then have x's shape without N, fixed at setup.
//
// YAML keys (defaults): mode (spatial | per_activation), eps (1e-5), momentum (0.1, PyTorch's
// convention: the weight of the new
//   batch), affine (true: learned gamma "<name>.weight" filled with 1 and beta "<name>.bias"
//   filled with 0; false for Caffe-style nets that follow BatchNorm with Scale), use_global_stats
//   (Caffe's key: true in the test phase, false in training; true in training freezes the
//   statistics, for fine-tuning; false in the test phase normalizes with the batch's statistics
//   and updates the running ones, as Caffe), param (lr_mult / decay_mult of weight and bias).
// Buffers (saved with the weights, shared with the test net): "<name>.running_mean" (0),
//   "<name>.running_var" (1), "<name>.num_batches_tracked" (0; one float).
// Runs in place (top == bottom): the layer then keeps a copy of x for the backward.
#include "kernels/batch_norm/batch_norm.h"
#include "layers/batch_norm_keys.h"
#include "layers/register_layers.h"
#include "layers/sync_batch_norm.h"

namespace crema {
namespace {

class BatchNormLayer final : public Layer {
 public:
  explicit BatchNormLayer(const LayerSpec& spec) : Layer(spec) {
    const BatchNormKeys keys = read_batch_norm_keys(spec);  // shared with BatchNormReLU
    eps_ = keys.eps;
    momentum_ = keys.momentum;
    per_activation_ = keys.per_activation;
    affine_ = keys.affine;
    use_global_stats_ = keys.use_global_stats;
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
             Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() < 2) fail("input " + shape_str(x.shape()) + " needs at least 2 axes [N, C, ...]");
    channels_ = x.dim(1);
    // One statistic per channel, or per activation: x's shape without N.
    stats_shape_ =
        per_activation_ ? Shape(x.shape().begin() + 1, x.shape().end()) : Shape{channels_};
    if (affine_) {
      add_param("weight", stats_shape_, ctx);
      ctx.fill(params_[0].value, 1.0f);
      add_param("bias", stats_shape_, ctx);
      ctx.fill(params_[1].value, 0.0f);
    }
    add_buffer("running_mean", stats_shape_, ctx, 0.0f);
    add_buffer("running_var", stats_shape_, ctx, 1.0f);
    add_buffer("num_batches_tracked", {1}, ctx, 0.0f);
    save_mean_ = ctx.empty(stats_shape_, x.dtype());
    save_invstd_ = ctx.empty(stats_shape_, x.dtype());
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() < 2 || x.dim(1) != channels_) {
      fail("input " + shape_str(x.shape()) + " must be [N, " + std::to_string(channels_) +
           ", ...] (the channels it was set up with)");
    }
    if (per_activation_ && Shape(x.shape().begin() + 1, x.shape().end()) != stats_shape_) {
      fail("input " + shape_str(x.shape()) + " must be [N] + " + shape_str(stats_shape_) +
           " (mode: per_activation keeps one statistic per activation it was set up with)");
    }
    if (!use_global_stats_ && x.numel() / shape_numel(stats_shape_) < 2) {
      fail("input " + shape_str(x.shape()) +
           " has one value per channel: batch statistics need more (PyTorch refuses this too)");
    }
    reshape_top_or_input_copy(*bottom[0], *top[0], input_copy_, ctx);
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (top[0] == bottom[0]) ctx.copy(input_copy_, bottom[0]->value);
    const Tensor& x = input(bottom, top);
    Tensor& y = top[0]->value;
    if (per_activation_) {
      if (use_global_stats_) {
        kernels::batch_norm_per_activation_forward_inference(ctx, x, gamma(), beta(),
                                                             buffers_[0].value, buffers_[1].value,
                                                             eps_, y, save_mean_, save_invstd_);
      } else {
        kernels::batch_norm_per_activation_forward_training(
            ctx, x, gamma(), beta(), eps_, momentum_, y, save_mean_, save_invstd_,
            buffers_[0].value, buffers_[1].value, buffers_[2].value);
      }
    } else if (use_global_stats_) {
      kernels::batch_norm_forward_inference(ctx, x, gamma(), beta(), buffers_[0].value,
                                            buffers_[1].value, eps_, y, save_mean_, save_invstd_);
    } else {
      kernels::batch_norm_forward_training(ctx, x, gamma(), beta(), eps_, momentum_, y, save_mean_,
                                           save_invstd_, buffers_[0].value, buffers_[1].value,
                                           buffers_[2].value);
    }
  }

  // With xhat = (x - mean) * invstd and sums over the batch and positions of a channel:
  //   dL/dbeta += sum dy,  dL/dgamma += sum dy * xhat.
  // With batch statistics, mean and invstd depend on every x of the channel; differentiating
  // through them (d mean/dx = 1/M, d var/dx = 2 (x - mean) / M) gives
  //   dL/dx = gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M).
  // With fixed (running) statistics only the affine map remains: dL/dx = gamma * invstd * dy.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    Tensor none;
    Tensor& dgamma = affine_ && !params_[0].frozen() ? params_[0].grad : none;
    Tensor& dbeta = affine_ && !params_[1].frozen() ? params_[1].grad : none;
    Tensor& dx = propagate_down[0] ? bottom[0]->grad : none;
    if (!dx.defined() && !dgamma.defined() && !dbeta.defined()) return;
    (per_activation_ ? kernels::batch_norm_per_activation_backward : kernels::batch_norm_backward)(
        ctx, input(bottom, top), top[0]->grad, gamma(), save_mean_, save_invstd_,
        !use_global_stats_, dx, dgamma, dbeta);
  }

  // Inference with the running statistics (ONNX's BatchNormalization, training_mode 0).
  // Backward reads x: the bottom, or its own copy when in place (input_copy_ exists only then).
  BackwardReads backward_reads() const override { return {!input_copy_.defined(), false}; }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    if (!use_global_stats_) fail("use_global_stats: false in the test phase cannot be exported");
    if (per_activation_) fail("mode: per_activation has no ONNX BatchNormalization to export to");
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
  // x as the forward saw it: in place, the bottom blob holds y by now.
  const Tensor& input(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
    return top[0] == bottom[0] ? input_copy_ : bottom[0]->value;
  }
  const Tensor& gamma() const { return affine_ ? params_[0].value : no_tensor_; }
  const Tensor& beta() const { return affine_ ? params_[1].value : no_tensor_; }

  float eps_, momentum_;
  bool per_activation_, affine_, use_global_stats_;
  int64_t channels_ = 0;
  Shape stats_shape_;               // [C], or x's shape without N (per_activation)
  Tensor save_mean_, save_invstd_;  // the statistics the last forward normalized with
  Tensor input_copy_;               // x, when running in place (y overwrites it)
  Tensor no_tensor_;                // an undefined tensor: "absent" for the kernels
};

}  // namespace

void register_batch_norm(LayerRegistry& registry) {
  registry.add("BatchNorm", [](const LayerSpec& spec) -> std::unique_ptr<Layer> {
    if (auto sync = make_sync_batch_norm_if_asked(spec)) return sync;  // sync: true
    return std::make_unique<BatchNormLayer>(spec);
  });
}

}  // namespace crema
