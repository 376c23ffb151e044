// What a training run writes as it goes, besides checkpoints, into its run directory:
//   train.log          every line the run printed (the live progress line excepted)
//   metrics.csv        one row per display window (iteration, epoch, loss, lr, throughput) and
//   metrics.jsonl      one per test pass (test_<output> columns), the same rows as JSON lines
//   events.out.tfevents.*   the same scalars for TensorBoard (train/loss, test/accuracy, ...)
// Numbers are written in their shortest exact form, so a logged loss can be compared bit for bit.
//
// A write that fails while the run goes on (disk full, an I/O error) is reported once, as a
// warning naming the file and the system's reason, and that file is not written to again; the
// run goes on: these files are a record, what a resumed run needs is in the checkpoints, whose
// failures solver.on_write_error handles (checkpoint.h). Failing to create them at the start is
// an error: the run directory is not writable.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "apps/training/event_file.h"

namespace crema {

// Prints to the user and to train.log. With `live` (stdout is a terminal) the progress line is
// redrawn in place with \r, and the periodic display lines go to train.log only.
class RunLog {
 public:
  RunLog(std::ostream& out, const std::string& log_path, bool append, bool live);
  // A line for both the user and the log.
  void print(const std::string& line);
  // A display line: the log always; the user only when there is no live line.
  void periodic(const std::string& line);
  // Redraws the live line (terminal only).
  void live(const std::string& line);
  // Leaves the live line on screen and moves to the next one (end of an epoch).
  void end_live();
  bool is_live() const { return live_; }

 private:
  void clear_live();
  // Writes a line to train.log; its first failure warns the user and closes the file.
  void to_log(const std::string& line);
  std::ostream& out_;
  std::string log_path_;
  std::ofstream log_;
  bool live_;
  bool live_shown_ = false;
};

using Scalars = std::vector<std::pair<std::string, double>>;

class MetricsLog {
 public:
  // A fresh run (resume_iteration < 0) starts the files anew and removes an earlier run's event
  // files; a resumed run keeps the rows up to resume_iteration and drops the ones after it.
  // `warn` receives the one line that reports a failed write.
  MetricsLog(const std::string& run_dir, const std::vector<std::string>& test_names,
             int64_t resume_iteration, std::function<void(const std::string&)> warn);
  // A display window: `values` are loss, lr, images_per_second, iterations_per_second.
  void train(int64_t iteration, double epoch, const Scalars& values);
  // A test pass: `results` are the test net's outputs (accuracy, loss, ...).
  void test(int64_t iteration, double epoch, const Scalars& results);

 private:
  void row(int64_t iteration, double epoch, const Scalars& values, const std::string& prefix);
  // Appends `line` to `out` (the file at `path`); its first failure warns and closes it.
  void append(std::ofstream& out, const std::string& path, const std::string& line);
  std::vector<std::string> columns_;  // after iteration and epoch
  std::string csv_path_, jsonl_path_;
  std::ofstream csv_, jsonl_;
  std::unique_ptr<EventFileWriter> events_;  // null after a failed write
  std::function<void(const std::string&)> warn_;
};

}  // namespace crema
