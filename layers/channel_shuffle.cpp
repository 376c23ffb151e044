// ChannelShuffle: ShuffleNet's channel shuffle (Zhang et al. 2018, "ShuffleNet: An Extremely
// Efficient Convolutional Neural Network for Mobile Devices"), PyTorch's nn.ChannelShuffle.
//
// After a grouped convolution each group of channels has seen only its own inputs; the shuffle
// deals the channels out so that the next grouped convolution mixes the groups. With g groups of
// K = C / g channels and S the product of the trailing axes:
//
//   x [N, C, *] viewed as [N, g, K, S],  transposed to [N, K, g, S],  read back as y [N, C, *]
//   y[n, k g + j, s] = x[n, j K + k, s]      (0 <= j < g, 0 <= k < K)
//
// so channel j K + k (the k-th of group j) moves to k g + j. C = 6, g = 3: x's channels
// 0 1 2 3 4 5 come out as 0 2 4 1 3 5. Shapes: y has x's shape; x has at least 3 axes, as in
// PyTorch (a 2-D [N, C] is refused).
// YAML keys (defaults): groups (required, >= 1, dividing C). No parameters; not in place.
#include <string>

#include "kernels/layout/layout.h"
#include "layers/key_error.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class ChannelShuffleLayer final : public Layer {
 public:
  explicit ChannelShuffleLayer(const LayerSpec& spec) : Layer(spec) {
    if (!spec.node->has("groups"))
      fail_missing_key(spec, "groups", "required (the g of [N, g, C/g, ...])");
    groups_ = spec.node->get<int64_t>("groups");
    if (groups_ < 1)
      fail_at_key(spec_, "groups", "must be at least 1, got " + std::to_string(groups_));
  }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    if (top[0] == bottom[0]) fail("does not run in place; give the top its own name");
    const Tensor& x = bottom[0]->value;
    if (x.ndim() < 3) {
      fail("takes a bottom [N, C, ...] of at least 3 axes (as PyTorch's nn.ChannelShuffle), got " +
           x.description());
    }
    const int64_t channels = x.dim(1);
    if (channels % groups_ != 0) {
      fail_at_key(spec_, "groups",
                  std::to_string(groups_) + " does not divide the " + std::to_string(channels) +
                      " channels of the bottom " + x.description() +
                      "; groups must divide C (axis 1)");
    }
    top[0]->value.reshape(x.shape());
  }

  // y = x viewed [N, g, K, S], permuted by [0, 2, 1, 3] into y viewed [N, K, g, S]
  // (kernels::permute: f32 on the CPU and CUDA, f64 on the CPU).
  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    shuffle(ctx, bottom[0]->value, groups_, top[0]->value);
  }

  // y only moves x's elements: dL/dx[n, j K + k, s] = dL/dy[n, k g + j, s]. Read the other way
  // round, that is a channel shuffle of dL/dy with K groups: dL/dy viewed [N, K, g, S], permuted
  // by [0, 2, 1, 3] into dL/dx viewed [N, g, K, S]. Nothing but dL/dy is read.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (!propagate_down[0]) return;
    shuffle(ctx, top[0]->grad, top[0]->grad.dim(1) / groups_, bottom[0]->grad);
  }
  BackwardReads backward_reads() const override { return {false, false}; }

  // ONNX has no channel-shuffle operator; PyTorch exports it as these three nodes. The batch
  // stays symbolic (0 copies it) and S is inferred (-1).
  void export_graph(const LayerIO& io, GraphBuilder& g) const override {
    const Shape& x = io.bottoms[0].shape;
    const int64_t k = x[1] / groups_;
    const std::string grouped = g.temp(io.top(0) + "/grouped"),
                      moved = g.temp(io.top(0) + "/moved");
    g.node("Reshape", {io.bottom(0), g.ints(io.top(0) + "/grouped_shape", {0, groups_, k, -1})},
           {grouped});
    g.node("Transpose", {grouped}, {moved}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    std::vector<int64_t> dims = io.tops[0].shape;
    dims[0] = 0;
    g.node("Reshape", {moved, g.ints(io.top(0) + "/shape", dims)}, {io.top(0)});
  }

 private:
  // y = x viewed [N, groups, C / groups, S] with its axes 1 and 2 swapped; x and y of one shape.
  static void shuffle(Context& ctx, const Tensor& x, int64_t groups, Tensor& y) {
    const int64_t n = x.dim(0), c = x.dim(1), s = x.numel() / (n * c == 0 ? 1 : n * c);
    Tensor y_view = y.view({n, c / groups, groups, s});
    kernels::permute(ctx, x.view({n, groups, c / groups, s}), {0, 2, 1, 3}, y_view);
  }

  int64_t groups_ = 1;
};

}  // namespace

void register_channel_shuffle(LayerRegistry& registry) {
  registry.add<ChannelShuffleLayer>("ChannelShuffle");
}

}  // namespace crema
