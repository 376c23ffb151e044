// Checkpoints: all a training run needs to continue exactly, one directory per checkpoint.
//
//   <run>/checkpoints/iter_000500/
//     model.safetensors    parameters and buffers under PyTorch's names and layouts (conv1.weight
//                          [K, C, R, S], ip1.weight [out, in], bn1.running_mean, ...): an
//                          equivalent torch.nn.Module loads it with load_state_dict
//     solver.safetensors   the solver's per-parameter state (conv1.weight.momentum_buffer, ...)
//     layers.safetensors   the layers' run state (Layer::run_state: drop1.step, ...)
//     state.json           iteration, position in the data order, the random generator's state,
//                          the open loss window, the best test metric so far, the rollbacks and
//                          their learning-rate factor (solver.on_nonfinite), the loss scaler's
//                          scale and counts (fp16: optim/loss_scale.h), the model's YAML
//   <run>/checkpoints/last -> iter_000500     symbolic links, each replaced atomically
//   <run>/checkpoints/best -> iter_000400     (only with solver.keep_best)
//
// Writing never touches a complete checkpoint: the files go into checkpoints/.tmp-iter_000500/
// (each written atomically and fsync'ed), the directory is fsync'ed and renamed to iter_000500
// (atomic), then `last` (and `best`) are re-pointed (a new link renamed over the old one), and
// only then are checkpoints that neither link names removed (renamed to .trash-* first, so a
// half-removed directory never looks like a checkpoint). A crash or SIGKILL at any point leaves
// the previous checkpoint whole; leftovers (.tmp-*, .trash-*) are cleared by the next write.
// A failed write (a full disk, an I/O error) throws CheckpointWriteError and also leaves the
// previous checkpoint whole and `last` naming it (or, when only the pruning failed, the new one);
// the partial .tmp-* directory is removed at once, to give its space back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/net.h"
#include "core/tensor.h"
#include "optim/loss_scale.h"

namespace crema {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A checkpoint that could not be written: one line naming the file or directory and the system's
// reason ("writing '<run>/checkpoints/.tmp-iter_000500/model.safetensors.tmp' failed: No space
// left on device"). solver.on_write_error decides what the run does (apps/training/README.md).
class CheckpointWriteError : public Error {
 public:
  explicit CheckpointWriteError(const std::string& message) : Error(message) {}
};

// The best test metric so far and the checkpoint that holds it.
struct BestMetric {
  std::string metric;  // a test output: accuracy, loss, ...
  bool maximize = true;
  double value = 0.0;
  int64_t iteration = 0;
  std::string checkpoint;  // directory name under checkpoints/
};

// state.json: what a resumed run restores besides the tensors, and what it checks.
struct TrainingState {
  int64_t iteration = 0;      // completed iterations (solver steps)
  int64_t data_position = 0;  // training batches consumed: the loader's stream position
  int64_t batch_size = 0;     // these four must match for the data order to continue
  int64_t batches_per_epoch = 0;
  int iter_size = 1;
  uint64_t seed = 0;
  std::string rng;                // Context::random().state()
  float loss_sum = 0.0f;          // the display window still open: its summed loss,
  int64_t window_iterations = 0;  // iterations
  int64_t window_images = 0;      // and images
  bool test_pending = false;      // a test was due at `iteration` but Ctrl-C came first
  std::optional<BestMetric> best;
  int64_t rollbacks = 0;  // solver.on_nonfinite: rollback: reloads so far, and the factor they
  double lr_scale = 1.0;  // multiplied the learning rate by (a resumed run keeps both)
  std::optional<LossScaleState> loss_scale;  // the loss scaler's, when the run scales its loss
  std::string model;                         // the config's model section as YAML
  std::string solver_type;
  std::vector<std::string> classes;  // the run's class list (class_list.h); empty in older ones
};

// Writes the checkpoint of `state.iteration` into <run_dir>/checkpoints and returns its
// directory. `solver_state` is Solver::state, `layer_state` layer_state(net) (device tensors are
// copied to the host here).
// The environment variable CREMA_TEST_CHECKPOINT_DELAY_MS (tests only) pauses that many
// milliseconds after each file, so a test can kill the process in the middle of a write.
// Throws CheckpointWriteError when a file, link or directory cannot be written.
std::string write_checkpoint(const std::string& run_dir, const Net& net,
                             const NamedTensors& solver_state, const NamedTensors& layer_state,
                             const TrainingState& state);

struct Checkpoint {
  std::string dir;
  TrainingState state;
  NamedTensors model, solver, layers;  // on the host, f32
  // What reading converted, for the log ("model.safetensors: converted 10 bf16 tensors to f32"),
  // or "": crema writes f32, but a checkpoint's files may have been stored in bf16 or f16 since.
  std::string notes;
};

// What --resume names: a checkpoint directory, or a run directory (its checkpoints/last, else the
// newest complete iter_* directory). Throws crema::Error saying what was expected.
std::string find_checkpoint(const std::string& path);
// Reads and checks all three files (bf16 and f16 tensors widened to f32, as Checkpoint::notes
// says); throws crema::Error naming the file and what is wrong.
Checkpoint read_checkpoint(const std::string& dir);
// The run directory of a checkpoint at <run>/checkpoints/<name>, or "" if it lies elsewhere.
std::string run_dir_of(const std::string& checkpoint_dir);

// Throws crema::Error "cannot resume from <dir>: ..." unless the checkpoint's state `saved` was
// trained like the run `now` is configured: the same model (the first differing line is named),
// seed, batch size, batches per epoch and iter_size (so that the data order continues) and
// solver type; each message says how to start a new run from the checkpoint's weights instead.
void check_same_run(const TrainingState& saved, const TrainingState& now, const std::string& dir);

// The net's parameters and buffers by name, sharing the net's storage.
NamedTensors net_tensors(Net& net);
// Every layer's run state as "<layer>.<role>", sharing the layers' storage.
NamedTensors layer_state(Net& net);
// How `saved` differs from `targets` in names and shapes ("" when they match):
// "conv1.weight is [8, 1, 3, 3] there but [16, 1, 3, 3] here; it lacks ip2.bias; it has no place
// here for ip9.weight".
std::string tensor_mismatch(const NamedTensors& targets, const NamedTensors& saved);
// Copies `saved` into `targets`, which must hold exactly the same names with the same shapes, in
// float32. Otherwise throws crema::Error "<source> does not fit <what>: <tensor_mismatch>".
void restore_exactly(const NamedTensors& targets, const NamedTensors& saved,
                     const std::string& source, const std::string& what);

// Fine-tuning (--weights FILE): copies every net tensor the file has, by name, from safetensors
// or a PyTorch checkpoint (core/weights_file.h). A shape mismatch throws, naming the layer and
// both shapes and suggesting to rename the layer (Caffe's rule); PyTorch's scalar
// num_batches_tracked [] fills crema's [1].
struct WeightsReport {
  int64_t copied = 0;
  std::vector<std::string> missing;  // net tensors the file lacks: they keep their fillers
  std::vector<std::string> unused;   // file tensors the net has no place for
  std::string notes;                 // how the file was read ("converted 3 bf16 tensors to f32")
};
WeightsReport copy_weights_by_name(Net& net, const std::string& path);
// A buffer a weights file may lack without harm: a batch norm's num_batches_tracked, which only
// counts updates (train, test and export all accept a file without it).
bool is_optional_buffer(const std::string& name);
// For commands that cannot run on fillers (test, export): throws crema::Error "<path> lacks
// <names>, which the model needs" when the file lacked any tensor but optional buffers.
void require_all_weights(const std::string& path, const WeightsReport& report);

}  // namespace crema
