// A full disk (ENOSPC) or a failed write while `crema train` runs: at every write point of a
// checkpoint the run stops with exit code 4 and one line naming the file and the reason, the
// previous checkpoint stays loadable, and --resume from it ends bit for bit where a run that
// never failed ends. solver.on_write_error: continue goes on; a failed metrics, train.log or
// TensorBoard write warns once and the run goes on; an unwritable run directory fails before the
// first step. The failures are injected by write_fail_shim.cpp (LD_PRELOAD) into a subprocess.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/training/checkpoint.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/error_text.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

// Checkpoints at iterations 2, 4 and 6: a failure is injected into the one of iteration 4.
const std::vector<std::string> kOverrides = {"solver.max_iter=6", "++solver.snapshot_interval=2",
                                             "solver.display=1", "solver.test_interval=3"};

// One injected failure: the call, the suffix of the path it acts on, the first matching call to
// fail, and the iteration of the checkpoint `last` names afterwards.
struct WritePoint {
  const char* call;
  const char* suffix;
  int at;
  int64_t last;
};

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

class WriteFailures : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("write_" + testing::test_name());
    config_ = testing::write_synthetic_run(dir_, 64, 4);
  }

  CommandOptions options(const std::string& out) const {
    CommandOptions o;
    o.config = config_;
    o.threads = 1;
    o.overrides = kOverrides;
    o.out_dir = out;
    return o;
  }

  // The run that never failed, in-process.
  std::string reference_weights() {
    std::ostringstream log;
    train_command(options(dir_ + "/whole"), log);
    return testing::read_file(dir_ + "/whole/final.safetensors");
  }

  // `crema train` into `run` with the failure injected; returns its exit code, output in out_.
  int train_failing(const std::string& run, const std::string& call, const std::string& suffix,
                    int at, const std::vector<std::string>& extra = {},
                    const std::string& error_number = std::to_string(ENOSPC)) {
    std::vector<std::string> args = {"train", config_, "--out", run, "--threads", "1"};
    for (const std::string& o : kOverrides) args.insert(args.end(), {"--set", o});
    args.insert(args.end(), extra.begin(), extra.end());
    const char* asan = std::getenv("ASAN_OPTIONS");  // the shim is loaded before ASan's runtime
    testing::Background crema(
        args, run + "-log",
        {"LD_PRELOAD=" + std::string(CREMA_BINARY_DIR) + "/lib/libcrema_write_fail_shim.so",
         "CREMA_FAIL_CALL=" + call, "CREMA_FAIL_PATH=" + suffix,
         "CREMA_FAIL_AT=" + std::to_string(at), "CREMA_FAIL_ERRNO=" + error_number,
         "ASAN_OPTIONS=verify_asan_link_order=0" + std::string(asan ? ":" : "") +
             (asan ? asan : "")});
    const int code = crema.wait();
    out_ = crema.out() + crema.err();
    return code;
  }

  std::string dir_, config_, out_;
};

TEST_F(WriteFailures, EveryCheckpointWritePointStopsKeepsTheLastAndResumesExactly) {
  const std::string whole = reference_weights();
  const std::vector<WritePoint> points = {
      {"mkdir", "/.tmp-iter_000004", 1, 2},
      {"write", "/.tmp-iter_000004/model.safetensors.tmp", 1, 2},
      {"fsync", "/.tmp-iter_000004/model.safetensors.tmp", 1, 2},
      {"rename", "/.tmp-iter_000004/model.safetensors", 1, 2},
      {"fsync", "/.tmp-iter_000004", 1, 2},  // the directory, after model.safetensors
      {"write", "/.tmp-iter_000004/solver.safetensors.tmp", 1, 2},
      {"write", "/.tmp-iter_000004/layers.safetensors.tmp", 1, 2},
      {"write", "/.tmp-iter_000004/state.json.tmp", 1, 2},
      {"fsync", "/.tmp-iter_000004/state.json.tmp", 1, 2},
      {"rename", "/.tmp-iter_000004/state.json", 1, 2},
      {"fsync", "/.tmp-iter_000004", 5, 2},  // the directory, complete
      {"rename", "/checkpoints/iter_000004", 1, 2},
      {"fsync", "/checkpoints", 4, 2},  // 3 per checkpoint: after its rename,
      {"symlink", "/checkpoints/.tmp-link-last", 2, 2},
      {"rename", "/checkpoints/last", 2, 2},
      {"fsync", "/checkpoints", 5, 4},  // after `last` names it,
      {"rename", "/checkpoints/.trash-iter_000002", 1, 4},
      {"fsync", "/checkpoints", 6, 4},  // after the old one's removal
      {"write", "/final.safetensors.tmp", 1, 6},
  };
  for (const WritePoint& p : points) {
    const std::string what = std::string(p.call) + " " + p.suffix + " #" + std::to_string(p.at);
    const std::string run = dir_ + "/run_" + std::to_string(&p - points.data());
    EXPECT_EQ(train_failing(run, p.call, p.suffix, p.at), 4) << what << "\n" << out_;
    EXPECT_EQ(count(out_, "No space left on device"), 1u) << what << "\n" << out_;
    EXPECT_CONTAINS(out_, "stopped after iteration");
    const std::string last = find_checkpoint(run);
    EXPECT_EQ(read_checkpoint(last).state.iteration, p.last) << what;
    EXPECT_FALSE(fs::exists(run + "/checkpoints/.tmp-iter_000004")) << what;

    if (p.last == 6) {  // the run's end: the checkpoint holds the final weights
      EXPECT_EQ(testing::read_file(last + "/model.safetensors"), whole) << what;
      continue;
    }
    CommandOptions o = options("");
    o.resume = run;
    std::ostringstream log;
    train_command(o, log);
    EXPECT_EQ(testing::read_file(run + "/final.safetensors"), whole) << what;
    EXPECT_EQ(testing::deterministic_metrics(run + "/metrics.csv"),
              testing::deterministic_metrics(dir_ + "/whole/metrics.csv"))
        << what;
  }
}

// With solver.keep_best the `best` link is one more write point: checkpoints at 2, 3 (the first
// test, a new best), 4 and 6; the second re-pointing of `best` (iteration 4's) fails after `last`
// named iteration 4.
TEST_F(WriteFailures, TheBestLinkStopsWithLastWhole) {
  const std::string whole = reference_weights();
  for (const char* call : {"symlink", "rename"}) {
    const std::string run = dir_ + "/run_" + call;
    const std::string suffix =
        std::string(call) == "symlink" ? "/checkpoints/.tmp-link-best" : "/checkpoints/best";
    EXPECT_EQ(train_failing(run, call, suffix, 2, {"--set", "++solver.keep_best=loss"}), 4) << out_;
    EXPECT_EQ(count(out_, "No space left on device"), 1u) << out_;
    EXPECT_EQ(read_checkpoint(find_checkpoint(run)).state.iteration, 4) << call;
    CommandOptions o = options("");
    o.resume = run;
    std::ostringstream log;
    train_command(o, log);
    EXPECT_EQ(testing::read_file(run + "/final.safetensors"), whole) << call;
  }
}

TEST_F(WriteFailures, ContinueReportsTheLostCheckpointAndGoesOn) {
  const std::string whole = reference_weights();
  const std::string run = dir_ + "/run";
  EXPECT_EQ(train_failing(run, "write", "/.tmp-iter_000004/model.safetensors.tmp", 1,
                          {"--set", "++solver.on_write_error=continue"}),
            0)
      << out_;
  EXPECT_CONTAINS(out_, "warning: the checkpoint of iteration 4 was not written: writing '" + run +
                            "/checkpoints/.tmp-iter_000004/model.safetensors.tmp' failed: " +
                            "No space left on device; the last checkpoint is ");
  EXPECT_EQ(count(out_, "No space left on device"), 1u) << out_;
  EXPECT_EQ(read_checkpoint(find_checkpoint(run)).state.iteration, 6);
  EXPECT_EQ(testing::read_file(run + "/final.safetensors"), whole);
}

TEST_F(WriteFailures, OnWriteErrorIsStopOrContinue) {
  CommandOptions o = options(dir_ + "/run");
  o.overrides.push_back("++solver.on_write_error=ignore");
  std::ostringstream log;
  const std::string message = testing::error_of([&] { train_command(o, log); });
  EXPECT_CONTAINS(message, "solver.on_write_error is stop or continue, got 'ignore'");
  EXPECT_FALSE(fs::exists(dir_ + "/run"));  // refused before the run directory is made
}

TEST_F(WriteFailures, LogFilesWarnOnceAndTheRunGoesOn) {
  const std::string whole = reference_weights();
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const std::vector<std::string> suffixes = {"/metrics.csv", "/metrics.jsonl", "/train.log",
                                             "." + std::string(host)};  // events.out.tfevents.*
  for (const std::string& suffix : suffixes) {
    const std::string run = dir_ + "/run_" + std::to_string(&suffix - suffixes.data());
    EXPECT_EQ(train_failing(run, "write", suffix, 3), 0) << suffix << "\n" << out_;
    EXPECT_EQ(count(out_, "No space left on device"), 1u) << suffix << "\n" << out_;
    EXPECT_CONTAINS(out_, "it is not written to from now on (the run goes on)");
    EXPECT_EQ(read_checkpoint(find_checkpoint(run)).state.iteration, 6);
    EXPECT_EQ(testing::read_file(run + "/final.safetensors"), whole) << suffix;
  }
}

TEST_F(WriteFailures, AnUnwritableRunDirectoryFailsBeforeTheFirstStep) {
  testing::write_text(dir_ + "/file", "not a directory\n");
  std::ostringstream log;
  EXPECT_EQ(testing::error_of([&] { train_command(options(dir_ + "/file/run"), log); }),
            "the run directory '" + dir_ +
                "/file/run' is not writable: cannot create it: Not a directory");

  const std::string run = dir_ + "/run";
  EXPECT_EQ(train_failing(run, "open", "/config.yaml.tmp", 1, {}, std::to_string(EACCES)), 2)
      << out_;
  EXPECT_EQ(out_, "crema: error: the run directory '" + run + "' is not writable: cannot write '" +
                      run + "/config.yaml.tmp': Permission denied\n");
  EXPECT_FALSE(fs::exists(run + "/metrics.csv"));
}

}  // namespace
}  // namespace crema
