// Layer: the unit a network is built from (Caffe's design).
//
// A layer reads its bottom blobs and writes its top blobs. Its life:
//   constructor(spec)   reads the layer's own YAML keys (typed, validated; unknown keys are errors)
//   setup(...)          once, with the bottom shapes known: checks them, creates parameters
//   reshape(...)        decides the top shapes from the bottom shapes (again when those change)
//   forward(...)        computes the tops
//   backward(...)       from the tops' gradients, computes the bottoms' gradients (where asked)
//                       and ADDS to the parameters' gradients
// Accumulation rule: activations and their gradients are written (=); parameter gradients
// accumulate (+=), so several backward passes before one solver step sum their gradients.
//
// Loss layers produce a scalar top. The Net sets that top's gradient to the layer's loss_weight
// before backward, so a loss layer's backward simply scales by its top gradient (no special case).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/context.h"
#include "core/graph_export.h"
#include "core/tensor.h"

namespace crema {

enum class Phase { train, test };
const char* phase_name(Phase phase);

// A named activation: its value and the gradient of the loss with respect to it.
struct Blob {
  std::string name;
  Tensor value;
  Tensor grad;
};

// A blob that lives inside another's storage (core/VIEWS.md): a Concat's bottom as a window of
// its top, a Slice's top as a window of its bottom. Viewed as [outer, extent, inner] around the
// axis, the blob's block for outer index o (extent * inner contiguous elements) starts at element
// o * outer_stride + offset of the parent's value (and gradient). outer is 1 (axis 0, or an outer
// extent of 1) or the batch (axis 1: one block per image).
struct BlobWindow {
  Blob* parent = nullptr;
  int64_t outer = 1;
  int64_t offset = 0;
  int64_t outer_stride = 0;
  // The blob's own value and gradient are tensors at the window (outer 1, at an offset the
  // plan's block alignment divides): any layer on any device reads and writes them as plain
  // memory (a Slice's tops). Otherwise they are shapes without storage, and only the producer,
  // through Layer::top_window, writes the window (a Concat's bottoms).
  bool view = false;
};

// A learnable tensor, named "<layer>.<role>" (conv1.weight) as in checkpoints and PyTorch.
struct Param {
  std::string name;
  Tensor value;
  Tensor grad;
  float lr_mult = 1.0f;     // this parameter's learning rate is base_lr * lr_mult
  float decay_mult = 1.0f;  // and its weight decay weight_decay * decay_mult
  // A frozen parameter (lr_mult 0) is never updated, so layers skip computing its gradient.
  bool frozen() const { return lr_mult == 0.0f; }
};

// The keys every layer has, read by the Net; `node` holds the layer's own keys.
struct LayerSpec {
  std::string name;
  std::string type;
  std::vector<std::string> bottoms;
  std::vector<std::string> tops;
  const ConfigNode* node = nullptr;  // null for layers the Net inserts itself (Split)
  Phase phase = Phase::train;        // the net's phase: Dropout and BatchNorm act on it
  // The net's arithmetic for products (model.math: fp32, tf32 or bf16; fp32 when absent), the
  // default of the layers that have a `math:` key (Convolution, Deconvolution, InnerProduct).
  std::string math = "fp32";
  // The layer's own `precision:` key (fp32, tf32, bf16, fp16), "" when it has none: the net's
  // model.precision then applies (core/net_precision.h).
  std::string precision;
  // The net's model.workspace_limit node (null when absent): the default scratch limit of the
  // layers that choose algorithms (Convolution, Deconvolution: layers/conv_algorithms.h).
  const ConfigNode* workspace_limit = nullptr;
  // model.sync_batch_norm: the default of a spatial BatchNorm's `sync:` key (PyTorch's
  // convert_sync_batchnorm); a layer's own key wins. batch_norm_syncs() applies the rule.
  bool sync_batch_norm = false;
  bool batch_norm_syncs() const;
};

// Non-learned state a layer keeps between steps (BatchNorm's running statistics), named like a
// parameter ("bn1.running_mean"). Saved with the weights and shared with the test net, as
// PyTorch's registered buffers; the solver never touches it.
struct Buffer {
  std::string name;
  Tensor value;
};

class Layer {
 public:
  explicit Layer(LayerSpec spec) : spec_(std::move(spec)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return spec_.name; }
  const std::string& type() const { return spec_.type; }
  const LayerSpec& spec() const { return spec_; }
  Phase phase() const { return spec_.phase; }

  // How many bottoms and tops the layer takes (checked by the Net with a clear message).
  virtual int min_bottoms() const { return 1; }
  virtual int max_bottoms() const { return 1; }
  virtual int min_tops() const { return 1; }
  virtual int max_tops() const { return 1; }
  // A loss layer's scalar top enters the objective with weight loss_weight (default 1).
  virtual bool is_loss() const { return false; }

  virtual void setup(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                     Context& ctx) {}
  virtual void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                       Context& ctx) = 0;
  virtual void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                       Context& ctx) = 0;
  // propagate_down[i]: whether bottom[i]'s gradient is wanted (false for data and labels).
  virtual void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                        const std::vector<Blob*>& bottom, Context& ctx) = 0;

  // Multiply-adds of one forward pass at the current shapes, for `crema summary`. The default
  // fits layers whose every element of top[0] is a dot product with one row of their first
  // parameter (Convolution: a row is one filter of C/g * R * S weights; InnerProduct: one row of
  // the [out, in] matrix): numel(top[0]) * numel(params[0]) / params[0].dim(0). Layers without
  // parameters count 0. A layer this rule does not describe (Deconvolution, recurrent layers,
  // lookups) overrides it.
  virtual int64_t multiply_adds(const std::vector<Blob*>& bottom,
                                const std::vector<Blob*>& top) const {
    if (params_.empty() || top.empty() || params_[0].value.ndim() == 0) return 0;
    const Tensor& w = params_[0].value;
    return w.dim(0) == 0 ? 0 : top[0]->value.numel() * (w.numel() / w.dim(0));
  }

  // Whether the layer runs `dtype` tensors in `layout` on `device`, for the Net's precision pass
  // (core/net_precision.h): under model.precision bf16 or fp16 and model.layout nhwc, the Net gives
  // a layer its bottoms in the net's dtype and layout where the layer runs them, and inserts a
  // Convert layer before it where it does not (as autocast runs softmax and losses in fp32).
  // The Net creates a layer's tops in the dtype and layout of its bottoms before setup; reshape
  // keeps both. The default, f32 (and f64, the CPU references' dtype) in nchw, fits every layer
  // written for float tensors; a layer that also runs bf16, f16 or nhwc says so.
  virtual bool runs(DType dtype, Layout layout, const Device& device) const {
    return (dtype == DType::f32 || dtype == DType::f64) && layout == Layout::nchw;
  }

  // What backward reads besides the top gradients, for the Net's memory plan (core/net_memory.h):
  // a value nothing reads any more may be overwritten by a later one. The default, the values of
  // every bottom and every top, is always right; a layer whose backward reads less says so
  // (ReLU reads its top, a convolution its bottom, a sum neither), and one whose backward reads a
  // value it keeps itself (a mask, saved statistics) does not list it here.
  struct BackwardReads {
    bool bottoms = true;
    bool tops = true;
  };
  virtual BackwardReads backward_reads() const { return {}; }
  // Whether backward reads the value of bottom `k` (its index): backward_reads().bottoms for all
  // of them, unless the layer's backward reads only some (BatchNormReLU reads x, not the residual
  // r: the ReLU's mask comes from its top).
  virtual bool backward_reads_bottom(size_t /*k*/) const { return backward_reads().bottoms; }
  // Whether backward points each bottom's gradient at its top's storage instead of writing it
  // (a view: Flatten, Reshape), so that the plan gives both one place.
  virtual bool gradient_is_view() const { return false; }
  // A tensor the layer touches only inside its own backward (Convolution's f32 filter gradient,
  // summed there and added into the master gradient), null when it has none. Under the Net's
  // memory plan it lives in the arena at that one moment, so every layer's scratch shares the
  // same bytes: the Net hands the layer an allocator before setup (set_scratch_allocator), whose
  // tensors get a shape without storage until the plan places them. Without one the layer takes
  // the tensor from the context (a layer outside a Net, model.memory_plan: false).
  virtual Tensor* backward_scratch() { return nullptr; }
  // The most bytes of the context's shared workspace (Context::workspace) one of this layer's
  // passes takes on `device` at its current shapes: the forward's and, when `backward`, the
  // parameter gradients' and, when `bottom_grad`, the input gradient's. The Net sizes the
  // workspace by its largest layer before the first step and counts it in its plan; 0 for a
  // layer that takes none (or does not say: the workspace then grows when it is first asked).
  virtual int64_t workspace_bytes(const Device& /*device*/, bool /*backward*/,
                                  bool /*bottom_grad*/) const {
    return 0;
  }
  void set_scratch_allocator(Allocator* allocator) { scratch_allocator_ = allocator; }

  // Windows (core/VIEWS.md). Whether the layer, at its current shapes on `device`, can write top
  // k into a window of a wider blob (BlobWindow, one block per image or one for all) in forward
  // and read that top's gradient from the same window of the wider gradient in backward
  // (Convolution on the CPU in f32 nchw). Default: no.
  virtual bool writes_top_window(const Device& /*device*/, size_t /*k*/) const { return false; }
  // The axis along which the layer only lays its bottoms side by side into its top (Concat), -1
  // for every other layer. Such a layer copies only the bottoms that are not windows of its top
  // (bottom_is_window), and slices the gradient back to those alone.
  virtual int joins_bottoms_along() const { return -1; }
  // The axis along which the layer only cuts its one bottom into consecutive tops (Slice), -1 for
  // every other layer. The Net may make such tops views of the bottom where they are contiguous
  // (BlobWindow::view, top_window(k) then names the bottom): the layer copies only the tops that
  // are not, in forward and in backward.
  virtual int splits_bottom_along() const { return -1; }
  // Set by the Net after each memory plan: top k's window (null: none), and whether bottom k of a
  // joining layer is a window of its top.
  void set_top_window(size_t k, const BlobWindow* window);
  const BlobWindow* top_window(size_t k) const;
  void set_bottom_is_window(size_t k, bool window);
  bool bottom_is_window(size_t k) const { return k < bottom_windows_.size() && bottom_windows_[k]; }

  // The algorithms the layer's kernels run, for `crema time` ("forward implicit_gemm, ..."), when
  // it has a choice of them (Convolution); "" otherwise.
  virtual std::string describe_algorithm() const { return ""; }

  // State a resumed run needs that is neither a weight nor a buffer, because it must stay out of
  // weight files (Dropout's mask counter): tensors by role, sharing the layer's storage. Training
  // checkpoints save them as "<layer>.<role>" and copy them back on resume, so the run continues
  // exactly. Default: none.
  virtual std::vector<std::pair<std::string, Tensor>> run_state() { return {}; }

  // The layer as nodes of an inference graph (core/graph_export.h; `crema export --onnx`). The
  // default refuses, naming the layer: a layer type without an ONNX form cannot be exported.
  virtual void export_graph(const LayerIO& io, GraphBuilder& g) const;
  // Whether an exported inference graph keeps this layer: losses and metrics are left out
  // (their label inputs with them).
  virtual bool in_inference_graph() const { return !is_loss(); }

  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  std::vector<Buffer>& buffers() { return buffers_; }
  const std::vector<Buffer>& buffers() const { return buffers_; }

 protected:
  // Creates parameter "<layer>.<role>" with its lr/decay multipliers from the `param:` key
  // (param: {weight: {lr_mult: 1}, bias: {lr_mult: 2, decay_mult: 0}}). Returns its index.
  size_t add_param(const std::string& role, const Shape& shape, Context& ctx,
                   float default_lr_mult = 1.0f, float default_decay_mult = 1.0f);
  // Creates buffer "<layer>.<role>" filled with `value`. Returns its index.
  size_t add_buffer(const std::string& role, const Shape& shape, Context& ctx, float value = 0.0f);
  // Throws crema::Error "layer 'conv1' (Convolution): message".
  [[noreturn]] void fail(const std::string& message) const;

  // A tensor for backward_scratch(): on the plan's allocator when the Net set one (no storage until
  // the plan places it), else from the context.
  Tensor make_scratch(const Shape& shape, DType dtype, Context& ctx) const;

  LayerSpec spec_;
  std::vector<Param> params_;
  std::vector<Buffer> buffers_;
  Allocator* scratch_allocator_ = nullptr;  // set_scratch_allocator

 private:
  std::vector<BlobWindow> top_windows_;  // by top; parent null: none
  std::vector<bool> bottom_windows_;     // by bottom
};

}  // namespace crema
