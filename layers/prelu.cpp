// PReLU: a leaky ReLU whose negative slope is learned.
//
//   x, y [N, C, ...] (any shape; at least [N, C] unless channel_shared), weight [C] or [1]
//   y = x > 0 ? x : weight[c] * x        c: the index along axis 1, or 0 when channel_shared
//
// The parameter is named "<layer>.weight" as in PyTorch's nn.PReLU (whose num_parameters = C is
// channel_shared: false here, num_parameters = 1 channel_shared: true).
// YAML keys (defaults): channel_shared (false), filler ({type: constant, value: 0.25}, Caffe's
//   name and PyTorch's initial value), param: {weight: {lr_mult, decay_mult}}. He et al. advise
//   no weight decay on the slopes (decay_mult: 0); crema keeps Caffe's default of 1.
// Runs in place (top == bottom): it then copies x aside, as both gradients need x itself.
// He, Zhang, Ren & Sun 2015, "Delving Deep into Rectifiers".
#include <algorithm>

#include "kernels/activations/prelu.h"
#include "layers/filler.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class PReLULayer final : public Layer {
 public:
  explicit PReLULayer(const LayerSpec& spec) : Layer(spec) {
    channel_shared_ = spec.node->get<bool>("channel_shared", false);
    FillerSpec quarter;
    quarter.value = 0.25;
    filler_ = read_filler(*spec.node, "filler", quarter);
  }

  void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
             Context& ctx) override {
    add_param("weight", {channel_shared_ ? 1 : channels(bottom[0]->value)}, ctx);
    fill_tensor(filler_, ctx.random(), weight().value);
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (!channel_shared_ && channels(x) != weight().value.numel()) {
      fail("input " + shape_str(x.shape()) + " has " + std::to_string(channels(x)) +
           " channels, the slopes were made for " + std::to_string(weight().value.numel()));
    }
    if (top[0] != bottom[0]) {
      top[0]->value.reshape(x.shape());
    } else if (saved_input_.defined()) {
      saved_input_.reshape(x.shape());
    } else {
      saved_input_ = ctx.empty(x.shape(), x.dtype());
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (top[0] == bottom[0]) ctx.copy(saved_input_, bottom[0]->value);
    kernels::prelu_forward(ctx, bottom[0]->value, weight().value, top[0]->value);
  }

  // With a = weight[c]:  dL/dx = dL/dy where x > 0, a * dL/dy elsewhere;
  //                      dL/da += sum over the elements of channel c with x <= 0 of x * dL/dy.
  // In place, dL/dy and dL/dx share storage: the slope gradient is taken first.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    const Tensor& x = top[0] == bottom[0] ? saved_input_ : bottom[0]->value;
    if (!weight().frozen()) kernels::prelu_backward_slope(ctx, x, top[0]->grad, weight().grad);
    if (propagate_down[0]) {
      kernels::prelu_backward_data(ctx, x, weight().value, top[0]->grad, bottom[0]->grad);
    }
  }

  // The slope as [C, 1, ...] (or [1, ...] shared) so that ONNX broadcasts it along axis 1.
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    Shape slope{params_[0].value.numel()};
    slope.resize(std::max<size_t>(io.bottoms[0].shape.size(), 2) - 1, 1);
    g.node("PRelu", {io.bottom(0), g.weight(params_[0].name, params_[0].value, slope)},
           {io.top(0)});
  }

 private:
  Param& weight() { return params_[0]; }

  int64_t channels(const Tensor& x) const {
    if (x.ndim() < 2) {
      fail("expects an input with a channel axis [N, C, ...], got " + shape_str(x.shape()) +
           " (or set channel_shared: true)");
    }
    return x.dim(1);
  }

  bool channel_shared_ = false;
  FillerSpec filler_;
  Tensor saved_input_;  // x's copy when running in place
};

}  // namespace

void register_prelu(LayerRegistry& registry) {
  registry.add<PReLULayer>("PReLU");
}

}  // namespace crema
