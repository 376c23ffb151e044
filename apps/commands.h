// The subcommands of `crema`, callable from main.cpp and from tests. Each reads a config, does
// its work, prints to `out`, and throws crema::Error for anything the user should fix.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/training/training.h"

namespace crema {

struct CommandOptions {
  std::string config;                  // path of the YAML file
  std::vector<std::string> overrides;  // --set key=value, in order
  std::string device = "cpu";          // --device cpu | cuda:N
  bool device_given = false;           // --device was on the command line
  std::optional<uint64_t> seed;        // --seed, over the config's `seed`
  int threads = 0;                     // --threads, CPU threads (0: all cores)
  std::string out_dir;                 // --out (train): where the run is written
  std::string weights;                 // --weights: safetensors or .pth (test; train: fine-tune)
  std::string resume;                  // --resume (train): a run directory or a checkpoint
  int64_t stop_after = 0;              // --stop-after (train): stop after this iteration, as Ctrl-C
  bool live_progress = false;          // train: redraw a progress line (stdout is a terminal)
  double timeout = 600.0;              // --timeout (train, several processes): seconds a rank
                                       // waits for another (rendezvous, a step) before failing
  std::vector<std::string> extract;    // --extract (test): blobs to save for every test sample
  std::string extract_to;              // --extract-to (test): the safetensors file for them
  int iterations = 50;                 // --iterations (time)
  std::string algo_cache;              // --algo-cache (train, time): measured algorithm choices
  std::vector<std::string> images;     // predict: the image files
  int top_k = 5;                       // --top-k (predict)
  std::string labels;                  // --labels (predict): class names, one per line
  bool json = false;                   // --json (predict)
};

// crema train: trains (from scratch, from --weights, or continuing --resume), tests every
// solver.test_interval iterations and at the end, checkpoints every solver.snapshot_interval
// iterations, and writes the run directory (apps/README.md lists its files).
TrainSummary train_command(const CommandOptions& options, std::ostream& out);
// crema test: evaluates --weights on the test set; returns the test outputs. With --extract, also
// saves the named blobs of every test sample to --extract-to ([samples, ...] per blob).
std::vector<std::pair<std::string, double>> test_command(const CommandOptions& options,
                                                         std::ostream& out);
// What crema time measured (milliseconds, means over the timed iterations).
struct TimeSummary {
  struct LayerTime {
    std::string name, type;
    double forward_ms = 0, backward_ms = 0;
    std::string algorithm;  // Layer::describe_algorithm(): the versions a convolution runs
  };
  std::vector<LayerTime> layers;
  double solver_ms = 0;      // the solver's update of every parameter (one fused launch on a GPU)
  double step_ms = 0;        // forward + backward + solver update, launched one by one
  double graph_step_ms = 0;  // the same with forward and backward replayed as a CUDA graph (GPU)
  int64_t batch_size = 0;
  // The context allocator's high-water mark (on the CPU the process's host heap, loader
  // included): compare with `crema summary`'s planned peak.
  int64_t peak_bytes = 0;
};
// crema time: per-layer forward and backward times and the whole training step, like `caffe time`.
TimeSummary time_command(const CommandOptions& options, std::ostream& out);
// crema export --onnx: the model in inference mode with --weights, as an ONNX file
// (apps/onnx/README.md).
void export_command(const CommandOptions& options, const std::string& onnx_path,
                    std::ostream& out);
// crema summary: the train net's layers, shapes, parameters and multiply-adds, and the memory
// training it takes at the configured batch.
void summary_command(const CommandOptions& options, std::ostream& out);
// crema plot: the loss and accuracy curves of a run directory as a PNG (with gnuplot); returns
// the PNG's path (`png`, or <run_dir>/curves.png when empty).
std::string plot_command(const std::string& run_dir, const std::string& png, std::ostream& out);
// The gnuplot script plot_command runs: the curves of `run_dir` drawn into `png`, names as they
// are written (no enhanced-text markup: my_run keeps its underscore).
std::string plot_script(const std::string& run_dir, const std::string& png);
// crema predict: the top_k classes of each image file (name, label, probability), printed as text
// or JSON (apps/predict_command.cpp says which blob, transforms and names it uses).
struct Prediction {
  struct Class {
    int64_t label = 0;
    std::string name;
    double probability = 0.0;
  };
  std::string image;
  std::vector<Class> top;  // most probable first
};
std::vector<Prediction> predict_command(const CommandOptions& options, std::ostream& out);
// crema devices: one line per device this build can use ("cpu", then "cuda:N ..." per GPU).
void devices_command(std::ostream& out);

}  // namespace crema
