// The subcommands of `crema`, callable from main.cpp and from tests. Each reads a config, does
// its work, prints to `out`, and throws crema::Error for anything the user should fix.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace crema {

struct CommandOptions {
  std::string config;                  // path of the YAML file
  std::vector<std::string> overrides;  // --set key=value, in order
  std::string device = "cpu";          // --device cpu | cuda:N
  std::optional<uint64_t> seed;        // --seed, over the config's `seed`
  int threads = 0;                     // --threads, CPU threads (0: all cores)
  std::string out_dir;                 // --out (train): where the run is written
  std::string weights;                 // --weights (test): a safetensors file
  int iterations = 50;                 // --iterations (time)
};

// What a training run measured, for tests and the benchmark.
struct TrainSummary {
  int64_t iterations = 0;
  double first_loss = 0.0;                                   // mean over the first display window
  double last_loss = 0.0;                                    // mean over the last display window
  double images_per_second = 0.0;                            // training steps only
  double data_wait_share = 0.0;                              // of the training loop's time
  std::vector<std::pair<std::string, double>> final_test;    // e.g. accuracy, loss
  std::string run_dir;
};

// crema train: trains, tests every solver.test_interval iterations and at the end, writes
// <run>/config.yaml (the resolved config) and <run>/final.safetensors.
TrainSummary train_command(const CommandOptions& options, std::ostream& out);
// crema test: evaluates --weights on the test set; returns the test outputs.
std::vector<std::pair<std::string, double>> test_command(const CommandOptions& options,
                                                         std::ostream& out);
// What crema time measured (milliseconds, means over the timed iterations).
struct TimeSummary {
  struct LayerTime {
    std::string name, type;
    double forward_ms = 0, backward_ms = 0;
  };
  std::vector<LayerTime> layers;
  double step_ms = 0;        // forward + backward + solver update, launched one by one
  double graph_step_ms = 0;  // the same with forward and backward replayed as a CUDA graph (GPU)
  int64_t batch_size = 0;
};
// crema time: per-layer forward and backward times and the whole training step, like `caffe time`.
TimeSummary time_command(const CommandOptions& options, std::ostream& out);
// crema summary: the train net's layers and shapes.
void summary_command(const CommandOptions& options, std::ostream& out);
// crema devices: one line per device this build can use ("cpu", then "cuda:N ..." per GPU).
void devices_command(std::ostream& out);

}  // namespace crema
