// Net: a directed graph of layers connected by blob names (Caffe's bottoms and tops).
//
// Built from the `model:` part of a config for one phase (train or test):
//   model:
//     inputs: {data: [1, 28, 28], label: []}   # per-sample shapes; the batch dimension is added
//     layers:
//       - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 20, ...}
//       - {name: relu1, type: ReLU, bottom: conv1, top: conv1}          # top == bottom: in place
//       - {name: acc, type: Accuracy, bottom: [ip2, label], top: acc, phase: test}
//
// Construction does, in order:
//   1. keeps the layers of this phase (a layer with `phase:` exists only in that phase), and fuses
//      BatchNorm + ReLU and BatchNorm + Eltwise SUM + ReLU into one layer each where no other layer
//      reads the blobs between them (core/net_fusion.h; `model.fuse: false` turns it off);
//   2. inserts a Split layer after any blob that feeds several layers, so that each consumer has
//      its own gradient and Split sums them (a consumer that was in place on the shared blob is
//      then given its own top: in-place on a shared input would corrupt the other readers);
//   3. creates each layer, checks its bottom/top counts, runs setup and reshape: every shape is
//      inferred once here (that pass powers `crema summary` and the error messages);
//   4. decides which layers need backward: a layer runs backward when it contributes to a loss and
//      has parameters or a bottom whose gradient is needed (the input blobs need none);
//   5. shares parameters that name the same `param: {weight: {name: shared}}` across layers;
//   6. plans memory (`model.memory_plan: true`, the default; net_memory.cpp): every activation and
//      activation gradient gets a place in one arena, shared with tensors whose lives do not
//      overlap, so that a value is overwritten once nothing later in the step reads it. Again
//      whenever shapes or the backward decisions change. A Concat's bottom whose producer can
//      write it in place is a window of the Concat's top, with no storage of its own, and a
//      Slice's contiguous top a view of its bottom, where that does not make the arena larger
//      (`model.concat_views: true`, the default; `always`: wherever the rules allow; VIEWS.md).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/context.h"
#include "core/layer.h"
#include "core/net_memory.h"
#include "core/net_precision.h"
#include "core/registry.h"

namespace crema {

class Net {
 public:
  // `plan_for`, when given, is the device whose precision rules (which dtype and layout each
  // layer runs: core/net_precision.h) shape the net instead of ctx's: `crema summary --device
  // cuda:0` plans a GPU's bf16 channels-last net on a host context, on a machine without one.
  Net(const ConfigNode& model, Phase phase, int64_t batch_size, const LayerRegistry& registry,
      Context& ctx, const Device* plan_for = nullptr);
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  Phase phase() const { return phase_; }
  int64_t batch_size() const { return batch_size_; }
  // Input names and their per-sample shapes, as declared in model.inputs.
  const std::vector<std::pair<std::string, Shape>>& inputs() const { return inputs_; }
  bool has_blob(const std::string& name) const { return blob_index_.count(name) != 0; }
  // The blob currently bound to `name` (the last one written under that name). Under the memory
  // plan, a value is readable after forward only where code outside the step reads it: the
  // inputs, the loss tops, the values no layer reads (outputs) and those named by keep(); another
  // blob's storage may hold a later tensor by then. Shapes are always right.
  Blob& blob(const std::string& name);
  // Keeps blob `name`'s value whole, readable after forward (`crema test --extract`, predict).
  void keep(const std::string& name);

  // Changes the batch size of the inputs and re-infers every shape (a smaller last test batch).
  void set_batch_size(int64_t batch_size, Context& ctx);

  // Runs every layer forward. Nothing is read back to the host, so on a GPU the whole pass is
  // queued on the stream (and can be captured in a CUDA graph).
  void forward(Context& ctx);
  // The objective after forward: the sum of loss_weight * loss over the loss tops. Reads the
  // values back (a synchronization on a GPU).
  double loss() const;
  // The loss tops and their weights, for code that sums them on the device.
  const std::vector<std::pair<Blob*, float>>& loss_tops() const { return loss_tops_; }
  // Runs backward through the layers that need it. Parameter gradients accumulate (+=). A
  // test-phase net under the memory plan runs forward only (an Error).
  // `after_layer(i)`, when given, is called after layer i's turn (whether or not it ran), last
  // layer first: from then on, the gradients of the parameters whose first user is layer i are
  // final (training on several GPUs starts averaging them there: apps/distributed/).
  void backward(Context& ctx, const std::function<void(size_t layer)>& after_layer = {});
  // Its first part: the loss tops' gradients set to their weights, gradients no layer writes
  // zeroed. Code that runs backward_layer one by one (crema time) calls it first.
  void begin_backward(Context& ctx);
  // Zeroes every parameter gradient (the update zeroes them itself; this is for a dropped step).
  void zero_param_grads(Context& ctx);

  // Loss scaling (fp16 training, optim/loss_scale.h): begin_backward seeds each loss top's
  // gradient with loss_weight * scale instead of loss_weight, so every gradient of the pass is
  // `scale` times the true one (the loss values themselves are not scaled). 1 by default.
  void set_loss_scale(float scale) { loss_scale_ = scale; }
  float loss_scale() const { return loss_scale_; }

  // Scalar blobs that no layer consumes (losses, accuracy), by name, with their current values
  // (read back from the device: only after a forward pass, when they hold values).
  std::vector<std::pair<std::string, double>> outputs() const;
  // Their names alone, sorted; reads nothing, so it may be asked before the first forward.
  std::vector<std::string> output_names() const;

  // Every learnable parameter once (a shared parameter appears under its first owner's name).
  const std::vector<Param*>& learnable_params() const { return learnable_; }
  // Every layer's buffers (running statistics), saved with the weights.
  const std::vector<Buffer*>& buffers() const { return buffers_; }
  // Makes this net's parameters and buffers share storage with `other`'s of the same name
  // (the test net evaluates the train net's weights and running statistics). Parameter shapes
  // must agree.
  void share_params_from(Net& other);

  // Weights as safetensors, by parameter name; loading also reads PyTorch checkpoints
  // (core/weights_file.h). Loading checks every name and shape and says
  // which layer to rename on a mismatch; `strict` also requires every net parameter be present.
  void save_weights(const std::string& path) const;
  void load_weights(const std::string& path, bool strict);

  // A table: layer, type, top shapes, parameter count and multiply-adds of one forward pass
  // (Layer::multiply_adds), with the totals.
  std::string summary() const;
  // What the net holds, in bytes.
  struct Memory {
    int64_t params = 0;       // learnable parameters, each shared one once (their grads: as many)
    int64_t buffers = 0;      // running statistics
    int64_t activations = 0;  // every blob's value: what keeping all of them whole takes, and as
                              // much again for their gradients
    bool planned = false;     // model.memory_plan; the five below are 0 without it
    int64_t kept = 0;         // values kept whole under the plan (inputs, losses, outputs, keep())
    int64_t arena = 0;        // the plan's arena: every other value and every activation gradient
    int64_t blocks = 0;       // the plan's blocks summed, as if none shared a byte
    int64_t peak = 0;         // the most of them alive at one moment: what any arena needs
    int64_t views = 0;        // blobs that live in another's storage (core/VIEWS.md), of
    int64_t view_candidates = 0;    // those the rules allow (the plan keeps those costing no bytes)
    int64_t view_copies_saved = 0;  // bytes the views' layers do not copy a step (both passes)
    int64_t layer_state = 0;  // what the layers keep themselves (saved inputs, masks, statistics),
                              // as the context's allocator counted it while they were set up
    int64_t workspace = 0;    // the context's shared workspace: the largest layer's
                              // (Layer::workspace_bytes), sized before the first step
  };
  Memory memory() const;
  // The blobs that live in another's storage under the current plan (a Concat's bottoms, a
  // Slice's tops: core/VIEWS.md), by name; and those the rules allow, before the plan weighs
  // their bytes.
  std::vector<std::string> view_blobs() const;
  std::vector<std::string> view_candidate_blobs() const;

  // Divergence diagnosis, run once after a non-finite loss or gradient was seen (each reads
  // values back to the host, so it is slow and never part of a step).
  // Re-runs forward layer by layer on the inputs the net holds and returns the name of the first
  // layer whose top then holds a NaN or an infinity ("" when none does).
  std::string first_nonfinite_layer(Context& ctx);
  // The name of the first learnable parameter whose gradient holds a NaN or an infinity, in
  // learnable_params order ("" when none does); and of the first parameter, then buffer, whose
  // value does.
  std::string first_nonfinite_grad() const;
  std::string first_nonfinite_param() const;

  // Per-layer access for `crema time`.
  size_t num_layers() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_[i]; }
  void forward_layer(size_t i, Context& ctx);
  void backward_layer(size_t i, Context& ctx);
  bool layer_runs_backward(size_t i) const { return runs_backward_[i]; }
  // Layer i's bottom and top blobs, in its order (for exporters).
  const std::vector<Blob*>& layer_bottoms(size_t i) const { return wiring_[i].bottoms; }
  const std::vector<Blob*>& layer_tops(size_t i) const { return wiring_[i].tops; }
  // Decides again which layers run backward and which bottoms get a gradient (step 4 above);
  // called after parameters' lr_mult changed (solver.param_groups freezing some).
  void decide_backward();

 private:
  struct Wiring {
    std::vector<Blob*> bottoms;
    std::vector<Blob*> tops;
    std::vector<bool> propagate_down;
    std::vector<float> loss_weights;  // one per top; non-zero only for loss layers' tops
  };

  std::vector<LayerSpec> read_layer_specs(const ConfigNode& model);
  void insert_splits(std::vector<LayerSpec>& specs) const;
  void build(std::vector<LayerSpec> specs, const LayerRegistry& registry, Context& ctx);
  // A blob named `name` stored as `format` (planned: its storage from the memory plan).
  Blob* new_blob(const std::string& name, const BlobFormat& format, bool planned, Context& ctx);
  // Wires, sets up and reshapes `layer`, its new tops stored as `format`.
  void add_layer(LayerSpec spec, std::unique_ptr<Layer> layer, const BlobFormat& format,
                 Context& ctx);
  // A Convert layer from blob `blob` to a new blob stored as `format`; returns that blob's name.
  std::string add_convert(const std::string& blob, const BlobFormat& format,
                          const LayerRegistry& registry, Context& ctx);
  void share_named_params();
  [[noreturn]] void fail_at_layer(size_t i, const std::string& message) const;
  size_t blob_index_of(const Blob* blob) const;
  // The memory plan (net_memory.cpp): places every value and gradient; unplace_memory lets the
  // layers reshape planned tensors (they get shapes without storage) before the next plan.
  void plan_memory();
  void unplace_memory();
  // The blocks a plan with the current windows_ packs (net_memory.cpp).
  PlanBlocks memory_blocks() const;
  // A tensor of `like`'s shape and layout from `allocator`.
  Tensor remade(const Tensor& like, DType dtype, Allocator* allocator) const;
  // Windows (net_windows.cpp, core/VIEWS.md): which Concat bottoms live in their Concat's top and
  // which Slice tops in their Slice's bottom, kept where they do not grow the arena, and telling
  // the layers; run first by plan_memory. window_candidates lists the windows each layer could
  // have; forget_windows takes the last plan's away, place_windows gives the new ones their places.
  void plan_windows();
  std::vector<std::vector<std::pair<size_t, BlobWindow>>> window_candidates() const;
  void forget_windows();
  void place_windows();
  // The most bytes of the context's workspace one layer's pass takes (Layer::workspace_bytes).
  int64_t largest_workspace() const;

  ConfigNode model_;  // our copy: the layer specs point into it
  Phase phase_;
  int64_t batch_size_;
  std::vector<std::pair<std::string, Shape>> inputs_;
  // Where planned values and gradients live, by blob index (net_memory.cpp); declared before the
  // blobs so that they outlive the tensors that point at them.
  std::vector<std::unique_ptr<PlacedAllocator>> value_places_, grad_places_;
  std::vector<std::unique_ptr<PlacedAllocator>> scratch_places_;  // by layer index
  std::vector<std::unique_ptr<Blob>> blobs_;
  std::map<std::string, size_t> blob_index_;  // name -> latest blob bearing it
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Wiring> wiring_;
  std::vector<bool> runs_backward_;
  std::vector<bool> blob_needs_grad_;  // by blob index
  std::vector<size_t> grads_to_zero_;  // blobs whose consumers write no gradient
  std::vector<Param*> learnable_;
  std::vector<Buffer*> buffers_;
  std::vector<std::pair<Blob*, float>> loss_tops_;
  float loss_scale_ = 1.0f;  // set_loss_scale

  // The memory plan.
  bool memory_plan_ = true;
  // model.concat_views (always: views_always_, the plan keeps even those that cost bytes), and
  // the windows by blob index (parent null: storage of its own).
  bool concat_views_ = true;
  bool views_always_ = false;
  std::vector<BlobWindow> windows_;
  std::vector<size_t> window_candidates_;  // the last plan's candidates, by blob index
  NetPrecision precision_;  // model.precision and model.layout (core/net_precision.h)
  Allocator* allocator_;    // the context's: the arena and the kept values come from it
  Device device_;           // the context's: where the tensors live
  Device runs_on_;          // whose precision rules the layers follow (the constructor's plan_for)
  Tensor arena_;
  std::vector<bool> value_kept_;  // by blob index
  std::set<std::string> kept_names_;
  std::vector<MemoryBlock> plan_blocks_;  // the last plan's blocks, reused while they fit
  int64_t layer_state_ = 0;
};

}  // namespace crema
