// Softmax and LogSoftmax along one axis (Caffe's Softmax layer; PyTorch's softmax / log_softmax
// with dim = axis).
//
//   Softmax:     y[.., c, ..] = exp(x[.., c, ..] - m) / sum_c' exp(x[.., c', ..] - m)
//   LogSoftmax:  y[.., c, ..] = (x[.., c, ..] - m) - log sum_c' exp(x[.., c', ..] - m)
//   m = max_c x[.., c, ..]: the same result, and exp never overflows. LogSoftmax never takes the
//   log of a probability that underflowed, so it is finite wherever x is (use it, not
//   log(Softmax), in front of a negative log-likelihood).
//   x, y: any shape, the same; the distribution runs along `axis` ([N, C] or [N, C, H, W] with
//   axis 1: over the C classes of every sample and pixel). Runs in place when top == bottom.
//   Softmax's mode: fast skips the max (cuDNN's CUDNN_SOFTMAX_FAST): y = exp(x) / sum exp(x), one
//   pass over x fewer, exact while the logits stay below ~88 (NaN above); the backward is the same.
// YAML keys (defaults): axis (1; negative counts from the end); Softmax: mode (accurate | fast).
#include "kernels/softmax/softmax.h"
#include "layers/key_error.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

// kLog: LogSoftmax; otherwise Softmax.
template <bool kLog>
class SoftmaxLayer final : public Layer {
 public:
  explicit SoftmaxLayer(const LayerSpec& spec) : Layer(spec) {
    axis_ = spec.node->get<int>("axis", 1);
    if constexpr (!kLog) {
      const std::string mode = spec.node->get<std::string>("mode", "accurate");
      if (mode != "accurate" && mode != "fast") {
        fail_at_key(spec, "mode", "must be accurate or fast, got '" + mode + "'");
      }
      fast_ = mode == "fast";
    }
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    const Tensor& x = bottom[0]->value;
    if (axis_ < -x.ndim() || axis_ >= x.ndim()) {
      fail("axis " + std::to_string(axis_) + " is out of range for bottom '" + bottom[0]->name +
           "' " + shape_str(x.shape()));
    }
    if (top[0] != bottom[0]) top[0]->value.reshape(x.shape());
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if constexpr (kLog) {
      kernels::log_softmax_forward(ctx, bottom[0]->value, top[0]->value, axis_);
    } else if (fast_) {
      kernels::softmax_fast_forward(ctx, bottom[0]->value, top[0]->value, axis_);
    } else {
      kernels::softmax_forward(ctx, bottom[0]->value, top[0]->value, axis_);
    }
  }

  // Along the axis, with g = dL/dy (the other positions are independent):
  //   Softmax:     dy_c/dx_k = y_c ([c == k] - y_k), so dL/dx_k = y_k (g_k - sum_c g_c y_c)
  //   LogSoftmax:  dy_c/dx_k = [c == k] - softmax_k = [c == k] - exp(y_k),
  //                so dL/dx_k = g_k - exp(y_k) sum_c g_c
  // Both read y, not x, so the in-place form (x overwritten by y) works.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    if constexpr (kLog) {
      kernels::log_softmax_backward(ctx, top[0]->value, top[0]->grad, bottom[0]->grad, axis_);
    } else {
      kernels::softmax_backward(ctx, top[0]->value, top[0]->grad, bottom[0]->grad, axis_);
    }
  }

  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    g.node(kLog ? "LogSoftmax" : "Softmax", {io.bottom(0)}, {io.top(0)}, {{"axis", axis_}});
  }

 private:
  int axis_;
  bool fast_ = false;
};

}  // namespace

void register_softmax(LayerRegistry& registry) {
  registry.add<SoftmaxLayer<false>>("Softmax");
  registry.add<SoftmaxLayer<true>>("LogSoftmax");
}

}  // namespace crema
