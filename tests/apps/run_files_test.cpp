// The files of a run directory: the TensorBoard event file (read back by an independent reader
// that checks every CRC), metrics.csv after a resume from an earlier checkpoint, the live
// progress line, `crema summary` and `crema plot`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "apps/commands.h"
#include "apps/training/event_file.h"
#include "core/config.h"
#include "core/error.h"
#include "core/net.h"
#include "layers/register_layers.h"
#include "tests/apps/app_test_util.h"
#include "tests/apps/run_dir_util.h"
#include "tests/support/synthetic_data.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

// CRC-32C bit by bit, straight from the definition (reflected polynomial 0x82F63B78): the
// oracle for the writer's table-driven one.
uint32_t crc32c_bitwise(const std::string& bytes) {
  uint32_t c = 0xffffffffu;
  for (unsigned char byte : bytes) {
    c ^= byte;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}
uint32_t masked(uint32_t c) {
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

uint64_t le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> scalars;
};

// A protobuf message's fields: (field number, wire type, varint value or bytes).
struct Field {
  int number, wire;
  uint64_t value;
  std::string bytes;
};
std::vector<Field> fields_of(const std::string& m) {
  std::vector<Field> out;
  size_t i = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const unsigned char b = static_cast<unsigned char>(m.at(i++));
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  while (i < m.size()) {
    const uint64_t key = varint();
    Field f{int(key >> 3), int(key & 7), 0, ""};
    if (f.wire == 0) f.value = varint();
    if (f.wire == 1) f.value = le(m, i, 8), i += 8;
    if (f.wire == 5) f.value = le(m, i, 4), i += 4;
    if (f.wire == 2) {
      const uint64_t n = varint();
      f.bytes = m.substr(i, n);
      i += n;
    }
    out.push_back(f);
  }
  EXPECT_EQ(i, m.size());
  return out;
}

// Reads every record of a TFRecord file, checking both CRCs of each, and decodes the Events.
std::vector<Event> read_events(const std::string& path) {
  const std::string file = testing::read_file(path);
  std::vector<Event> events;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 16, file.size());
    if (at + 16 > file.size()) break;
    const uint64_t length = le(file, at, 8);
    EXPECT_EQ(le(file, at + 8, 4), masked(crc32c_bitwise(file.substr(at, 8))))
        << "length CRC at " << at;
    const std::string data = file.substr(at + 12, length);
    EXPECT_EQ(le(file, at + 12 + length, 4), masked(crc32c_bitwise(data))) << "data CRC at " << at;
    Event e;
    for (const Field& f : fields_of(data)) {
      if (f.number == 1 && f.wire == 1) std::memcpy(&e.wall_time, &f.value, 8);
      if (f.number == 2 && f.wire == 0) e.step = int64_t(f.value);
      if (f.number == 3 && f.wire == 2) e.file_version = f.bytes;
      if (f.number == 5 && f.wire == 2) {
        for (const Field& value : fields_of(f.bytes)) {
          std::string tag;
          float v = 0;
          for (const Field& g : fields_of(value.bytes)) {
            if (g.number == 1) tag = g.bytes;
            if (g.number == 2 && g.wire == 5) {
              const uint32_t bits = uint32_t(g.value);
              std::memcpy(&v, &bits, 4);
            }
          }
          e.scalars.emplace_back(tag, v);
        }
      }
    }
    events.push_back(e);
    at += 16 + length;
  }
  return events;
}

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

class RunFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::fresh_dir("run_files_" + testing::test_name());
    options_.config = testing::write_synthetic_run(dir_, 100, 8);
    options_.out_dir = dir_ + "/run";
    options_.threads = 1;
    options_.overrides = {"solver.max_iter=20", "solver.display=2", "solver.test_interval=5"};
  }
  std::string train() {
    std::ostringstream log;
    train_command(options_, log);
    return log.str();
  }
  std::string dir_;
  CommandOptions options_;
};

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(crc32c("", 0), 0u);
  const std::string bytes = "\x01\x80\xff tensorboard";
  EXPECT_EQ(crc32c(bytes.data(), bytes.size()), crc32c_bitwise(bytes));
  EXPECT_EQ(masked_crc32c(bytes.data(), bytes.size()), masked(crc32c_bitwise(bytes)));
}

TEST_F(RunFiles, EventFileParsesAndHoldsTheMetrics) {
  train();
  const auto files = event_files(dir_ + "/run");
  ASSERT_EQ(files.size(), 1u);
  const std::vector<Event> events = read_events(files[0]);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.6e9);
  std::map<int64_t, float> loss, accuracy;
  for (const Event& e : events) {
    for (const auto& [tag, v] : e.scalars) {
      if (tag == "train/loss") {
        EXPECT_TRUE(loss.emplace(e.step, v).second) << "two losses at " << e.step;
      }
      if (tag == "test/accuracy") accuracy[e.step] = v;
    }
  }
  const auto rows = testing::read_csv(dir_ + "/run/metrics.csv");
  ASSERT_EQ(rows[0][2], "loss");
  const size_t acc = std::find(rows[0].begin(), rows[0].end(), "test_accuracy") - rows[0].begin();
  int train_rows = 0, test_rows = 0;
  for (size_t r = 1; r < rows.size(); ++r) {
    const int64_t step = std::stoll(rows[r][0]);
    if (!rows[r][2].empty()) {
      ++train_rows;
      EXPECT_EQ(loss.at(step), float(std::stod(rows[r][2]))) << step;
    } else {
      ++test_rows;
      EXPECT_EQ(accuracy.at(step), float(std::stod(rows[r][acc]))) << step;
    }
  }
  EXPECT_EQ(train_rows, 10);
  EXPECT_EQ(test_rows, 4);  // 5, 10, 15 and the final test at 20
  EXPECT_EQ(loss.size(), 10u);
}

TEST_F(RunFiles, ResumeFromAnEarlierCheckpointReplacesWhatCameAfter) {
  options_.overrides.push_back("++solver.snapshot_interval=3");
  options_.out_dir = dir_ + "/whole";
  train();
  options_.out_dir = dir_ + "/run";
  options_.stop_after = 6;
  train();
  // Keep checkpoint 6 under a name pruning leaves alone, run on to 12, then go back to 6.
  fs::copy(dir_ + "/run/checkpoints/iter_000006", dir_ + "/run/checkpoints/saved_at_6");
  options_.stop_after = 12;
  options_.resume = dir_ + "/run";
  options_.out_dir.clear();
  train();
  options_.stop_after = 0;
  options_.resume = dir_ + "/run/checkpoints/saved_at_6";
  train();
  EXPECT_EQ(testing::deterministic_metrics(dir_ + "/run/metrics.csv"),
            testing::deterministic_metrics(dir_ + "/whole/metrics.csv"));
  // Every event file together holds each display step's loss once, as in metrics.csv.
  std::map<int64_t, int> seen;
  for (const std::string& file : event_files(dir_ + "/run")) {
    for (const Event& e : read_events(file)) {
      for (const auto& scalar : e.scalars) seen[e.step] += scalar.first == "train/loss";
    }
  }
  for (int64_t step = 2; step <= 20; step += 2) EXPECT_EQ(seen[step], 1) << step;
  const std::string jsonl = testing::read_file(dir_ + "/run/metrics.jsonl");
  EXPECT_EQ(std::count(jsonl.begin(), jsonl.end(), '\n'), 10 + 4) << jsonl;
}

TEST_F(RunFiles, LiveProgressOnATerminalPlainLinesOtherwise) {
  options_.live_progress = true;
  options_.overrides.push_back("data.train.batch_size=10");  // 10 batches per epoch: 2 epochs
  const std::string shown = train();
  EXPECT_NE(shown.find("\repoch 1/2  iter "), std::string::npos) << shown;
  EXPECT_NE(shown.find("\repoch 2/2  iter 20/20  ETA 0:00"), std::string::npos) << shown;
  EXPECT_NE(shown.find(" img/s  lr "), std::string::npos) << shown;
  EXPECT_EQ(shown.find("\niter      2  loss"), std::string::npos) << "display lines on a terminal";
  const std::string log = testing::read_file(dir_ + "/run/train.log");
  EXPECT_NE(log.find("iter      2  loss"), std::string::npos) << log;
  EXPECT_EQ(log.find('\r'), std::string::npos) << "the live line went to train.log";
  options_.live_progress = false;
  const std::string plain = train();
  EXPECT_EQ(plain.find('\r'), std::string::npos);
  EXPECT_NE(plain.find("iter      2  loss"), std::string::npos) << plain;
  EXPECT_NE(plain.find("it/s  epoch 0.20  ETA "), std::string::npos) << plain;
}

TEST_F(RunFiles, ConfigCsvJsonlAndLogAreWritten) {
  train();
  for (const char* file :
       {"config.yaml", "metrics.csv", "metrics.jsonl", "train.log", "final.safetensors"}) {
    EXPECT_TRUE(fs::exists(dir_ + "/run/" + file)) << file;
  }
  EXPECT_EQ(testing::read_csv(dir_ + "/run/metrics.csv")[0],
            (std::vector<std::string>{"iteration", "epoch", "loss", "lr", "images_per_second",
                                      "iterations_per_second", "test_accuracy", "test_loss"}));
  const std::string jsonl = testing::read_file(dir_ + "/run/metrics.jsonl");
  EXPECT_EQ(jsonl.rfind("{\"iteration\":2,\"epoch\":", 0), 0u) << jsonl;
  EXPECT_NE(jsonl.find("\"test_accuracy\":"), std::string::npos) << jsonl;
}

// The line of `crema summary` that starts with `name`, without runs of spaces.
std::string summary_row(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(name + " ", 0) != 0) continue;
    std::string squeezed;
    for (char c : line) {
      if (c != ' ' || (!squeezed.empty() && squeezed.back() != ' ')) squeezed += c;
    }
    return squeezed;
  }
  return "(no row " + name + ")";
}

// Summary builds the net on the host by --device's precision rules: a GPU's bf16 channels-last
// plan on any machine, with or without a GPU.
TEST_F(RunFiles, SummaryPlansForTheDeviceOnTheHost) {
  options_.device = "cuda:0";
  options_.overrides.push_back("+model.precision=bf16");
  std::ostringstream out;
  summary_command(options_, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("(train phase, batch 16, on cuda:0)"), std::string::npos) << text;
  EXPECT_NE(text.find("precision bf16, layout nhwc"), std::string::npos) << text;
  EXPECT_EQ(summary_row(text, "conv1"), "conv1 Convolution [16, 8, 8, 8] bf16 nhwc 80 73728")
      << text;
  EXPECT_NE(text.find("planned peak:"), std::string::npos) << text;
}

TEST_F(RunFiles, SummaryCountsParametersMultiplyAddsAndMemory) {
  std::ostringstream out;
  summary_command(options_, out);
  const std::string text = out.str();
  // conv1: 8 filters of 1x3x3 on a 16x8x8x8 output: 8192 outputs x 9; ip1: 16x10 outputs x 128.
  EXPECT_EQ(summary_row(text, "conv1"), "conv1 Convolution [16, 8, 8, 8] 80 73728") << text;
  EXPECT_EQ(summary_row(text, "relu1"), "relu1 ReLU [16, 8, 8, 8] 0 0") << text;
  EXPECT_EQ(summary_row(text, "pool1"), "pool1 Pooling [16, 8, 4, 4] 0 0") << text;
  EXPECT_EQ(summary_row(text, "ip1"), "ip1 InnerProduct [16, 10] 1290 20480") << text;
  EXPECT_EQ(summary_row(text, "total"), "total 1370 94208") << text;
  EXPECT_NE(text.find("memory to train at batch 16 (estimate):"), std::string::npos) << text;
  EXPECT_NE(text.find("(SGD)"), std::string::npos) << text;

  // The estimate's parts: 1370 parameters; blobs data 16x64, label 16, conv1 (relu1 in place)
  // 16x512, pool1 16x128, ip1 16x10 and the scalar loss.
  Context ctx;
  const ConfigNode root = load_config(options_.config);
  Net net(root.at("model"), Phase::train, 16, builtin_layers(), ctx);
  const Net::Memory m = net.memory();
  EXPECT_EQ(m.params, 1370 * 4);
  EXPECT_EQ(m.buffers, 0);
  EXPECT_EQ(m.activations, (1024 + 16 + 8192 + 2048 + 160 + 1) * 4);
}

TEST_F(RunFiles, PlotDrawsAPngOrSaysGnuplotIsMissing) {
  train();
  const std::string binary = std::string(CREMA_BINARY_DIR) + "/bin/crema";
  const std::string err = dir_ + "/err.txt";
  // Without gnuplot on the PATH: one clear message, exit code 2.
  int status =
      std::system(("env PATH=/nonexistent " + binary + " plot " + dir_ + "/run 2> " + err).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(testing::read_file(err).find("apt-get install gnuplot-nox"), std::string::npos)
      << testing::read_file(err);
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed";
  }
  std::ostringstream out;
  const std::string png = plot_command(dir_ + "/run", "", out);
  EXPECT_EQ(png, dir_ + "/run/curves.png");
  EXPECT_EQ(testing::read_file(png).substr(0, 8), "\x89PNG\r\n\x1a\n");
  EXPECT_FALSE(fs::exists(png + ".tmp"));
  EXPECT_THROW(plot_command(dir_, "", out), Error);  // not a run directory
}

// Names are drawn as written: no enhanced-text markup (my_run's `_` is no subscript), quotes
// doubled inside gnuplot's strings.
TEST_F(RunFiles, PlotDrawsNamesAsWritten) {
  train();
  const std::string named = dir_ + "/my_run's";
  fs::create_directories(named);
  fs::copy_file(dir_ + "/run/metrics.csv", named + "/metrics.csv");
  const std::string script = plot_script(named, named + "/c.png");
  EXPECT_NE(script.find("set terminal pngcairo noenhanced"), std::string::npos) << script;
  EXPECT_NE(script.find("set terminal png noenhanced"), std::string::npos) << script;
  EXPECT_NE(script.find("set title 'my_run''s: loss'"), std::string::npos) << script;
  EXPECT_NE(script.find("set output '" + dir_ + "/my_run''s/c.png'"), std::string::npos) << script;
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed";
  }
  std::ostringstream out;
  EXPECT_EQ(testing::read_file(plot_command(named, "", out)).substr(0, 4), "\x89PNG");
}

}  // namespace
}  // namespace crema
