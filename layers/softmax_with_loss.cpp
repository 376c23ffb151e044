// SoftmaxWithLoss: the cross-entropy of softmax(logits) against integer labels (Caffe's layer) or
// soft targets (PyTorch's probability targets).
//
//   prob[i, c, j] = exp(x[i,c,j]) / sum_c' exp(x[i,c',j])      (softmax along `axis`, size C)
//   loss = -(1 / normalizer) * sum over positions (i, j) whose label != ignore_label
//                                 of log prob[i, label[i,j], j]
//   bottoms: logits [.., C, ..] (C at `axis`), labels with one entry per position (class indices
//   stored as floats) or soft targets (below); top: loss, a scalar; optional second top: prob.
//   normalizer: valid (non-ignored positions, at least 1; the default), batch_size (the outer
//   size), full (all positions) or none (1).
//   label_smoothing eps (PyTorch's CrossEntropyLoss(label_smoothing=eps)): the target of a
//   counted position is (1 - eps) onehot(label) + eps / C, its term -sum_c target_c log prob_c
//   (from the log-softmax, exactly as PyTorch); ignored positions stay out.
//   Spatial losses: logits [N, C, H, W] with axis 1 and labels [N, H, W] (or [N, 1, H, W]).
//   Soft targets (torch's cross_entropy with probability targets; what mixup and cutmix need,
//   data/batch_mix.h): a second bottom of the logits' shape, C > 1, holds a probability per
//   class: the term of a position is -sum_c t'_c log prob_c with t' = (1 - eps) t + eps / C
//   (kernels/loss/soft_target_cross_entropy.h). Every position counts (no ignore_label), so
//   `valid` divides by the positions, as torch's mean.
// The loss and its normalizer are computed on the context's device, and the backward reads the
// loss weight from the top's gradient there too: no step waits for the host. Labels that are not
// class indices (nor the ignore_label) are an error on the CPU and make the loss NaN on a GPU.
// YAML keys (defaults): axis (1), ignore_label (none), normalization (valid), label_smoothing
// (0, in [0, 1)), loss_weight (1).
#include "kernels/loss/soft_target_cross_entropy.h"
#include "kernels/loss/softmax_cross_entropy.h"
#include "layers/loss_layer.h"
#include "layers/register_layers.h"

namespace crema {
namespace {

class SoftmaxWithLossLayer final : public Layer {
 public:
  explicit SoftmaxWithLossLayer(const LayerSpec& spec) : Layer(spec) {
    const ConfigNode& node = *spec.node;
    options_.axis = node.get<int>("axis", 1);
    if (node.has("ignore_label")) {
      options_.has_ignore_label = true;
      options_.ignore_label = node.get<int>("ignore_label");
    }
    options_.normalization = loss_normalization(spec, "valid");
    options_.label_smoothing = node.get<float>("label_smoothing", 0.0f);
    if (!(options_.label_smoothing >= 0.0f && options_.label_smoothing < 1.0f)) {
      node.at("label_smoothing")
          .fail(where() + "label_smoothing must be in [0, 1), got " +
                node.at("label_smoothing").scalar());
    }
  }

  int min_bottoms() const override { return 2; }
  int max_bottoms() const override { return 2; }
  int max_tops() const override { return 2; }
  bool is_loss() const override { return true; }

  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    const Tensor& x = bottom[0]->value;
    const int axis = options_.axis < 0 ? options_.axis + x.ndim() : options_.axis;
    if (axis < 0 || axis >= x.ndim()) {
      fail("axis " + std::to_string(options_.axis) + " is out of range for " +
           shape_str(x.shape()));
    }
    const int64_t positions = x.numel() / x.dim(axis);
    soft_targets_ = bottom[1]->value.shape() == x.shape() && x.dim(axis) > 1;
    if (soft_targets_ && options_.has_ignore_label) {
      fail("targets '" + bottom[1]->name + "' " + shape_str(x.shape()) +
           " are soft (one probability per class), which have no ignore_label; remove it");
    }
    if (!soft_targets_ && bottom[1]->value.numel() != positions) {
      fail("labels '" + bottom[1]->name + "' " + shape_str(bottom[1]->value.shape()) +
           " must have " + std::to_string(positions) + " entries, one per position of '" +
           bottom[0]->name + "' " + shape_str(x.shape()) + ", or be soft targets of its shape");
    }
    top[0]->value.reshape({});
    if (!prob_.defined()) prob_ = ctx.empty({0}, x.dtype());
    if (top.size() > 1) {
      top[1]->value.reshape(x.shape());
    } else {
      prob_.reshape(x.shape());
    }
  }

  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    if (soft_targets_) {
      kernels::soft_target_cross_entropy_forward(ctx, bottom[0]->value, bottom[1]->value, prob(top),
                                                 top[0]->value, options_);
    } else {
      kernels::softmax_cross_entropy_forward(ctx, bottom[0]->value, bottom[1]->value, prob(top),
                                             top[0]->value, options_);
    }
  }

  // dL/dx = (top gradient / normalizer) * (prob sum_c t_c - target), zero at ignored positions:
  // with log prob_c = x_c - log sum_c' exp x_c', d log prob_c / dx_k = [c == k] - prob_k, so
  // d(-sum_c t_c log prob_c)/dx_k = -t_k + prob_k sum_c t_c. A label's target (onehot(label), or
  // its smoothed form) sums to 1, giving prob - target; soft targets keep the sum (torch's form).
  // The top gradient is the loss weight the Net put there; the kernel reads it on the device.
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (propagate_down[1]) fail("cannot backpropagate into the labels '" + bottom[1]->name + "'");
    if (!propagate_down[0]) return;
    if (soft_targets_) {
      kernels::soft_target_cross_entropy_backward(ctx, prob(top), bottom[1]->value, top[0]->grad,
                                                  options_, bottom[0]->grad);
    } else {
      kernels::softmax_cross_entropy_backward(ctx, prob(top), bottom[1]->value, top[0]->grad,
                                              options_, bottom[0]->grad);
    }
  }

 private:
  std::string where() const { return "layer '" + name() + "' (" + type() + "): "; }
  Tensor& prob(const std::vector<Blob*>& top) { return top.size() > 1 ? top[1]->value : prob_; }

  kernels::SoftmaxLossOptions options_;
  bool soft_targets_ = false;  // the second bottom has the logits' shape (reshape decides)
  Tensor prob_;
};

}  // namespace

void register_softmax_with_loss(LayerRegistry& registry) {
  registry.add<SoftmaxWithLossLayer>("SoftmaxWithLoss");
}

}  // namespace crema
