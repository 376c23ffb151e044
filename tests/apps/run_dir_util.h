// Helpers for the tests of `crema train`'s run directory: starting the binary in the background,
// reading metrics.csv, and taking a picture of a directory tree to prove nothing changed.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace crema::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every file's bytes and every link's target under `dir`, by relative path.
inline std::map<std::string, std::string> tree_picture(const std::string& dir) {
  std::map<std::string, std::string> picture;
  namespace fs = std::filesystem;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string rel = fs::relative(it->path(), dir).string();
    if (it->is_symlink()) {
      picture[rel] = "-> " + fs::read_symlink(it->path()).string();
    } else if (it->is_regular_file()) {
      picture[rel] = read_file(it->path().string());
    } else {
      picture[rel] = "(dir)";
    }
  }
  return picture;
}

// metrics.csv as rows of fields; the header is row 0.
inline std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream s(line);
    std::string field;
    while (std::getline(s, field, ',')) fields.push_back(field);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    rows.push_back(fields);
  }
  return rows;
}

// The rows of metrics.csv without the timing columns (images_per_second,
// iterations_per_second), as text: what must be identical between two runs of the same training.
inline std::string deterministic_metrics(const std::string& path) {
  const auto rows = read_csv(path);
  std::string text;
  std::vector<bool> keep;
  for (const auto& name : rows.empty() ? std::vector<std::string>{} : rows[0]) {
    keep.push_back(name != "images_per_second" && name != "iterations_per_second");
  }
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < keep.size(); ++i) {
      if (keep[i]) text += row[i] + ",";
    }
    text += "\n";
  }
  return text;
}

// `crema ARGS` started in the background, stdout and stderr to files, with extra environment.
class Background {
 public:
  Background(const std::vector<std::string>& args, const std::string& log_prefix,
             const std::vector<std::string>& env = {}) {
    out_path_ = log_prefix + ".out", err_path_ = log_prefix + ".err";
    // Everything the child needs is prepared before fork: after it, only exec-safe calls.
    // $CREMA_TEST_CREMA: the binary where the tests run away from their build tree (a GPU
    // machine's bundle, scripts/ddp_device_check.sh).
    const char* binary = std::getenv("CREMA_TEST_CREMA");
    strings_.push_back(binary != nullptr ? binary : std::string(CREMA_BINARY_DIR) + "/bin/crema");
    strings_.insert(strings_.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (std::string& a : strings_) argv.push_back(a.data());
    argv.push_back(nullptr);
    env_ = env;
    for (char** e = environ; *e != nullptr; ++e) env_.emplace_back(*e);
    for (std::string& e : env_) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out, STDOUT_FILENO);
      dup2(err, STDERR_FILENO);
      execve(argv[0], argv.data(), envp.data());
      _exit(98);
    }
    close(out);
    close(err);
  }
  ~Background() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      wait();
    }
  }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { kill(pid_, sig); }
  // Waits for the process; returns its exit code, or 128 + signal when a signal ended it.
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string out() const { return read_file(out_path_); }
  std::string err() const { return read_file(err_path_); }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string out_path_, err_path_;
  std::vector<std::string> strings_, env_;
};

// Polls `condition` every millisecond for up to `seconds`; returns whether it came true.
template <class Condition>
bool wait_until(Condition condition, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return condition();
}

}  // namespace crema::testing
