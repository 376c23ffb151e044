// LRN: local response normalization (Krizhevsky, Sutskever & Hinton 2012, AlexNet), Caffe's:
//   scale = k + alpha / n * (sum of x^2 over the window),   y = x * scale^(-beta)
//
//   x, y: [N, C, H, W].
// The window (zero-padded) around (c, h, w):
//   ACROSS_CHANNELS: channels c - r .. c + r at the same position, n = local_size;
//   WITHIN_CHANNEL:  the local_size x local_size square around (h, w) in channel c,
//                    n = local_size^2,
// with r = (local_size - 1) / 2. ACROSS_CHANNELS is PyTorch's nn.LocalResponseNorm(local_size,
// alpha, beta, k).
//
// YAML keys (defaults): local_size (5; odd), alpha (1; >= 0), beta (0.75), k (1; > 0, so that
//   scale never reaches 0), norm_region (ACROSS_CHANNELS or WITHIN_CHANNEL, either case).
// Does not run in place: the backward needs x and y both.
#include <cctype>

#include "kernels/lrn/lrn.h"
#include "layers/key_error.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

std::string upper(std::string s) {
  for (char& ch : s) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

class LRNLayer final : public Layer {
 public:
  explicit LRNLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    lrn_.local_size = node.get<int64_t>("local_size", 5);
    if (lrn_.local_size <= 0 || lrn_.local_size % 2 == 0) {
      fail_at_key(spec, "local_size",
                  "must be odd and positive, got " + std::to_string(lrn_.local_size));
    }
    lrn_.alpha = node.get<float>("alpha", 1.0f);
    if (!(lrn_.alpha >= 0.0f)) fail_at_key(spec, "alpha", "must not be negative");
    lrn_.beta = node.get<float>("beta", 0.75f);
    lrn_.k = node.get<float>("k", 1.0f);
    if (!(lrn_.k > 0.0f))
      fail_at_key(spec, "k", "must be positive (scale = k + ... must not reach 0)");
    const std::string region = upper(node.get<std::string>("norm_region", "ACROSS_CHANNELS"));
    if (region == "ACROSS_CHANNELS") {
      lrn_.region = kernels::LrnRegion::across_channels;
    } else if (region == "WITHIN_CHANNEL") {
      lrn_.region = kernels::LrnRegion::within_channel;
    } else {
      fail_at_key(spec, "norm_region", "must be ACROSS_CHANNELS or WITHIN_CHANNEL");
    }
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    if (x.ndim() != 4) fail("input " + shape_str(x.shape()) + " must be [N, C, H, W]");
    if (top[0] == bottom[0]) {
      fail("cannot run in place (its backward needs x and y both): give the top another name");
    }
    top[0]->value.reshape(x.shape());
    if (!scale_.defined()) {
      scale_ = ctx.empty(x.shape(), x.dtype());
    } else {
      scale_.reshape(x.shape());
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    kernels::lrn_forward(ctx, lrn_, bottom[0]->value, top[0]->value, scale_);
  }

  // y = x * s^-beta with s = k + (alpha / n) sum_window x^2. An input x_q enters its own y_q
  // directly and, through s_p, every y_p whose window holds q (the windows are symmetric: those
  // p are the window of q). d s_p / d x_q = 2 (alpha / n) x_q, so
  //   dL/dx_q = dy_q * s_q^-beta - (2 alpha beta / n) * x_q * sum_{p in window(q)} dy_p y_p / s_p.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    kernels::lrn_backward(ctx, lrn_, bottom[0]->value, top[0]->value, scale_, top[0]->grad,
                          bottom[0]->grad);
  }

  // ONNX's LRN is across channels with alpha divided by the window size, as here.
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    if (lrn_.region != kernels::LrnRegion::across_channels) {
      fail("norm_region WITHIN_CHANNEL has no ONNX operator, so this net cannot be exported");
    }
    g.node("LRN", {io.bottom(0)}, {io.top(0)},
           {{"size", lrn_.local_size}, {"alpha", lrn_.alpha}, {"beta", lrn_.beta}, {"bias", lrn_.k}});
  }

 private:
  kernels::LrnParams lrn_;
  Tensor scale_;  // [N, C, H, W]: k + alpha / n * window sum of x^2, from the last forward
};

}  // namespace

void register_lrn(LayerRegistry& registry) {
  registry.add<LRNLayer>("LRN");
}

}  // namespace crema
