// BatchNormReLU: batch normalization and a ReLU in one layer, with an optional residual added
// before the ReLU -- the two ends of a ResNet block, run in one pass each way:
//   y = relu(bn(x))          bottoms [x]
//   y = relu(bn(x) + r)      bottoms [x, r]   (r: the shortcut, x's shape)
// bn is BatchNorm's (layers/batch_norm.cpp: batch or running statistics, momentum, eps, affine),
// spatial mode only. The numbers are those of the chain BatchNorm -> (Eltwise SUM ->) ReLU, bit for
// bit (kernels/batch_norm/batch_norm_relu.h); the saving is memory traffic and launches
// (kernels/batch_norm/README.md counts the bytes).
//
//   x, r, y: [N, C, ...]. In place on x is fine (the layer then keeps x for the backward, written
//   by the forward's pass); not in place on r (r's gradient and y's would share storage). The
//   backward reads x and, with r, y: never r (the memory plan lets r die at the forward).
//   nchw or nhwc; bf16 and f16 activations on CUDA with fp32 parameters and statistics.
// YAML keys: BatchNorm's (eps, momentum, affine, use_global_stats, mode: spatial, param).
// Parameters and buffers are named after the layer's `name:` key ("<name>.weight", ...,
// "<name>.num_batches_tracked"), as BatchNorm's. The Net's fusion pass (core/net_fusion.h) makes
// this layer from a BatchNorm whose top only a ReLU (or an Eltwise SUM and then a ReLU) reads; its
// spec then carries the BatchNorm's keys, so the parameters keep the BatchNorm's names, while the
// layer itself is named after the three ("layer1.0.bn3+add+relu3") in `crema time` and summary.
#include "kernels/batch_norm/batch_norm_relu.h"
#include "layers/batch_norm_keys.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class BatchNormReLULayer final : public Layer {
 public:
  explicit BatchNormReLULayer(const LayerSpec& spec)
      : Layer(spec),
        keys_(read_batch_norm_keys(spec)),
        prefix_(spec.node->get<std::string>("name")) {
    if (keys_.per_activation) {
      fail_at_key(spec, "mode", "per_activation is not fused with a ReLU; use BatchNorm and ReLU");
    }
  }

  int max_bottoms() const override { return 2; }

  // Either layout, bf16 and f16 on CUDA (statistics and parameters stay fp32).
  bool runs(DType dtype, Layout layout, const Device& device) const override {
    return batch_norm_runs(dtype, layout, device, false);
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
             Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() < 2) fail("input " + shape_str(x.shape()) + " needs at least 2 axes [N, C, ...]");
    channels_ = x.dim(1);
    residual_ = bottom.size() == 2;
    if (keys_.affine) {
      ctx.fill(params_[named_param("weight", ctx)].value, 1.0f);
      ctx.fill(params_[named_param("bias", ctx)].value, 0.0f);
    }
    named_buffer("running_mean", {channels_}, 0.0f, ctx);
    named_buffer("running_var", {channels_}, 1.0f, ctx);
    named_buffer("num_batches_tracked", {1}, 0.0f, ctx);
    save_mean_ = ctx.empty({channels_}, statistics_dtype(x));
    save_invstd_ = ctx.empty({channels_}, statistics_dtype(x));
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() < 2 || x.dim(1) != channels_) {
      fail("input " + shape_str(x.shape()) + " must be [N, " + std::to_string(channels_) +
           ", ...] (the channels it was set up with)");
    }
    if (bottom.size() == 2) {
      if (bottom[1]->value.shape() != x.shape()) {
        fail("residual '" + spec_.bottoms[1] + "' " + shape_str(bottom[1]->value.shape()) +
             " must have the input's shape " + shape_str(x.shape()));
      }
      if (top[0] == bottom[1])
        fail("does not run in place on the residual (r's gradient and y's would share storage)");
    }
    if (!keys_.use_global_stats && x.numel() / channels_ < 2) {
      fail("input " + shape_str(x.shape()) +
           " has one value per channel: batch statistics need more (PyTorch refuses this too)");
    }
    reshape_top_or_input_copy(*bottom[0], *top[0], input_copy_, ctx);
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    Tensor none;
    Tensor& x_copy = top[0] == bottom[0] ? input_copy_ : none;
    if (keys_.use_global_stats) {
      kernels::batch_norm_relu_forward_inference(
          ctx, bottom[0]->value, residual(bottom), gamma(), beta(), buffers_[0].value,
          buffers_[1].value, keys_.eps, top[0]->value, x_copy, save_mean_, save_invstd_);
    } else {
      kernels::batch_norm_relu_forward_training(ctx, bottom[0]->value, residual(bottom), gamma(),
                                                beta(), keys_.eps, keys_.momentum, top[0]->value,
                                                x_copy, save_mean_, save_invstd_, buffers_[0].value,
                                                buffers_[1].value, buffers_[2].value);
    }
  }

  // The chain rule through the three steps, z = bn(x), v = z + r (or z), y = relu(v):
  //   dL/dv = dL/dy where v > 0, else 0            (ReLU; with r, read off y: y > 0 exactly where
  //                                                  v > 0, so r need not be kept; without r, v
  //                                                  recomputed from x and the saved statistics)
  //   dL/dr = dL/dv,  dL/dz = dL/dv                (a sum passes its gradient to both terms)
  //   dL/dx, dL/dgamma, dL/dbeta: BatchNorm's backward with dL/dz (layers/batch_norm.cpp):
  //     dL/dbeta += sum dL/dz,  dL/dgamma += sum dL/dz * xhat,
  //     dL/dx = gamma * invstd * (dL/dz - sum(dL/dz) / M - xhat * sum(dL/dz * xhat) / M)
  //     (with fixed statistics: dL/dx = gamma * invstd * dL/dz).
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    Tensor none;
    Tensor& dgamma = keys_.affine && !params_[0].frozen() ? params_[0].grad : none;
    Tensor& dbeta = keys_.affine && !params_[1].frozen() ? params_[1].grad : none;
    Tensor& dx = propagate_down[0] ? bottom[0]->grad : none;
    Tensor& dr = bottom.size() == 2 && propagate_down[1] ? bottom[1]->grad : none;
    if (!dx.defined() && !dr.defined() && !dgamma.defined() && !dbeta.defined()) return;
    const Tensor& y = residual_ ? top[0]->value : no_tensor_;
    kernels::batch_norm_relu_backward(ctx, input(bottom, top), y, top[0]->grad, gamma(), beta(),
                                      save_mean_, save_invstd_, !keys_.use_global_stats, dx, dr,
                                      dgamma, dbeta);
  }

  // BatchNormalization (running statistics), then Add, then Relu.
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    if (!keys_.use_global_stats) {
      fail("use_global_stats: false in the test phase cannot be exported");
    }
    const std::string& top = io.top(0);
    const std::vector<float> ones(size_t(channels_), 1.0f), zeros(size_t(channels_), 0.0f);
    const std::string scale = keys_.affine ? g.weight(params_[0].name, params_[0].value)
                                           : g.floats(top + "/ones", ones, {channels_});
    const std::string shift = keys_.affine ? g.weight(params_[1].name, params_[1].value)
                                           : g.floats(top + "/zeros", zeros, {channels_});
    std::string v = g.temp(top + "/bn");
    g.node("BatchNormalization",
           {io.bottom(0), scale, shift, g.weight(buffers_[0].name, buffers_[0].value),
            g.weight(buffers_[1].name, buffers_[1].value)},
           {v}, {{"epsilon", keys_.eps}});
    if (io.bottoms.size() == 2) {
      const std::string sum = g.temp(top + "/add");
      g.node("Add", {v, io.bottom(1)}, {sum});
      v = sum;
    }
    g.node("Relu", {v}, {top});
  }

  // Backward reads x (its own copy when in place), and the ReLU's mask: y with a residual, never
  // r (the downsampling shortcut's BatchNorm output dies at this forward; y, the block's output,
  // is read by the next block's backward anyway); recomputed from x without one, never y (core/
  // layer.h, the memory plan).
  BackwardReads backward_reads() const override { return {!input_copy_.defined(), residual_}; }
  bool backward_reads_bottom(size_t k) const override { return k == 0 && backward_reads().bottoms; }

 private:
  // Parameter `role` named "<prefix>.<role>", whatever the layer's own name.
  size_t named_param(const std::string& role, Context& ctx) {
    const size_t i = add_param(role, {channels_}, ctx);
    params_[i].name = prefix_ + "." + role;
    return i;
  }
  void named_buffer(const std::string& role, const Shape& shape, float value, Context& ctx) {
    buffers_[add_buffer(role, shape, ctx, value)].name = prefix_ + "." + role;
  }
  // x as the forward saw it: in place, the bottom blob holds y by now.
  const Tensor& input(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
    return top[0] == bottom[0] ? input_copy_ : bottom[0]->value;
  }
  const Tensor& residual(const std::vector<Blob*>& bottom) const {
    return bottom.size() == 2 ? bottom[1]->value : no_tensor_;
  }
  const Tensor& gamma() const { return keys_.affine ? params_[0].value : no_tensor_; }
  const Tensor& beta() const { return keys_.affine ? params_[1].value : no_tensor_; }

  BatchNormKeys keys_;
  std::string prefix_;  // the names' prefix: the `name:` key, the BatchNorm's when fused
  int64_t channels_ = 0;
  bool residual_ = false;           // bottoms [x, r]: y = relu(bn(x) + r)
  Tensor save_mean_, save_invstd_;  // the statistics the last forward normalized with
  Tensor input_copy_;               // x, when running in place (y overwrites it)
  Tensor no_tensor_;                // an undefined tensor: "absent" for the kernels
};

}  // namespace

void register_batch_norm_relu(LayerRegistry& registry) {
  registry.add<BatchNormReLULayer>("BatchNormReLU");
}

}  // namespace crema
