#include "apps/training/run_log.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/serialization.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

// Keeps the first line of `path` (a header, when `header` is given it replaces it) and the
// complete lines whose leading integer (the iteration) is <= max_iteration; `leading` extracts
// that integer from a line, returning false for a damaged one.
template <class Leading>
void truncate_lines(const std::string& path, const std::string& header, int64_t max_iteration,
                    Leading leading) {
  std::ifstream in(path);
  if (!in) return;
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  std::string kept = header.empty() ? "" : header + "\n";
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) break;  // a line cut short by a crash
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    int64_t iteration = 0;
    if (leading(line, iteration) && iteration <= max_iteration) kept += line + "\n";
  }
  write_file_atomic(path, kept);
}

bool csv_iteration(const std::string& line, int64_t& iteration) {
  try {
    size_t used = 0;
    iteration = std::stoll(line, &used);
    return used == line.find(',');
  } catch (const std::exception&) {
    return false;
  }
}

bool json_iteration(const std::string& line, int64_t& iteration) {
  const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
  if (row.is_discarded() || !row.is_object() || !row.contains("iteration") ||
      !row["iteration"].is_number_integer()) {
    return false;
  }
  iteration = row["iteration"].get<int64_t>();
  return true;
}

std::ofstream open_append(const std::string& path) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  return out;
}

std::string stopped_writing(const std::string& path, const std::string& reason) {
  return "warning: writing '" + path + "' failed: " + reason + "; it is not written to from now " +
         "on (the run goes on)";
}

}  // namespace

RunLog::RunLog(std::ostream& out, const std::string& log_path, bool append, bool live)
    : out_(out),
      log_path_(log_path),
      log_(log_path, append ? std::ios::app : std::ios::trunc),
      live_(live) {
  if (!log_) throw Error("cannot write '" + log_path + "': " + std::strerror(errno));
}

void RunLog::to_log(const std::string& line) {
  if (!log_.is_open()) return;
  log_ << line << "\n" << std::flush;
  if (log_) return;
  const std::string reason = std::strerror(errno);
  log_.close();
  clear_live();
  out_ << stopped_writing(log_path_, reason) << "\n" << std::flush;
}

void RunLog::clear_live() {
  if (live_shown_) out_ << "\r\033[K";
  live_shown_ = false;
}

void RunLog::print(const std::string& line) {
  clear_live();
  out_ << line << "\n" << std::flush;
  to_log(line);
}

void RunLog::periodic(const std::string& line) {
  if (!live_) out_ << line << "\n" << std::flush;
  to_log(line);
}

void RunLog::live(const std::string& line) {
  if (!live_) return;
  out_ << "\r" << line << "\033[K" << std::flush;
  live_shown_ = true;
}

void RunLog::end_live() {
  if (live_shown_) out_ << "\n" << std::flush;
  live_shown_ = false;
}

MetricsLog::MetricsLog(const std::string& run_dir, const std::vector<std::string>& test_names,
                       int64_t resume_iteration, std::function<void(const std::string&)> warn)
    : warn_(std::move(warn)) {
  columns_ = {"loss", "lr", "images_per_second", "iterations_per_second"};
  for (const std::string& name : test_names) columns_.push_back("test_" + name);
  std::string header = "iteration,epoch";
  for (const std::string& c : columns_) header += "," + c;
  csv_path_ = run_dir + "/metrics.csv", jsonl_path_ = run_dir + "/metrics.jsonl";
  const std::string& csv = csv_path_;
  const std::string& jsonl = jsonl_path_;
  std::vector<std::string> event_files;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      event_files.push_back(entry.path().string());
    }
  }
  if (resume_iteration < 0) {
    write_file_atomic(csv, header + "\n");
    write_file_atomic(jsonl, "");
    for (const std::string& path : event_files) fs::remove(path);
  } else {
    if (!fs::exists(csv)) write_file_atomic(csv, header + "\n");
    truncate_lines(csv, header, resume_iteration, csv_iteration);
    truncate_lines(jsonl, "", resume_iteration, json_iteration);
    for (const std::string& path : event_files) truncate_event_file(path, resume_iteration);
  }
  csv_ = open_append(csv);
  jsonl_ = open_append(jsonl);
  events_ = std::make_unique<EventFileWriter>(run_dir);
}

void MetricsLog::train(int64_t iteration, double epoch, const Scalars& values) {
  row(iteration, epoch, values, "");
}

void MetricsLog::test(int64_t iteration, double epoch, const Scalars& results) {
  row(iteration, epoch, results, "test_");
}

void MetricsLog::row(int64_t iteration, double epoch, const Scalars& values,
                     const std::string& prefix) {
  std::string csv = fmt::format("{},{}", iteration, epoch);
  nlohmann::ordered_json json = {{"iteration", iteration}, {"epoch", epoch}};
  Scalars tensorboard;
  for (const std::string& column : columns_) {
    csv += ",";
    for (const auto& [name, value] : values) {
      if (prefix + name != column) continue;
      csv += fmt::format("{}", value);
      json[column] = value;
      tensorboard.emplace_back((prefix.empty() ? "train/" : "test/") + name, value);
    }
  }
  append(csv_, csv_path_, csv);
  append(jsonl_, jsonl_path_, json.dump());
  if (!events_) return;
  try {
    events_->scalars(iteration, tensorboard);
  } catch (const Error& e) {
    events_.reset();
    warn_(std::string("warning: ") + e.what() + "; it is not written to from now on (the run " +
          "goes on)");
  }
}

void MetricsLog::append(std::ofstream& out, const std::string& path, const std::string& line) {
  if (!out.is_open()) return;
  out << line << "\n" << std::flush;
  if (out) return;
  const std::string reason = std::strerror(errno);
  out.close();
  warn_(stopped_writing(path, reason));
}

}  // namespace crema
