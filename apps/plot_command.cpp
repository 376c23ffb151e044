// crema plot RUN_DIR: the loss and test curves of a run as one PNG, drawn by gnuplot.
//
// Reads <run>/metrics.csv (apps/training/run_log.h): training rows carry `loss`, test rows the
// test_* columns. The top panel shows the training loss (and test_loss), the bottom one the other
// test outputs (test_accuracy, ...). The data go to gnuplot inline, as datablocks, so gnuplot needs
// no CSV handling; the PNG is written to a temporary name and renamed. Text is drawn as it is
// (`noenhanced`: gnuplot's enhanced mode would set the `_` of a run named my_run as a subscript),
// and quotes in names are doubled inside gnuplot's single-quoted strings.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>

#include <fmt/format.h>

#include "apps/commands.h"
#include "core/error.h"

namespace crema {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, ',')) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// A datablock of (iteration, column) rows where the column has a value.
std::string datablock(const std::string& name, const std::vector<std::vector<std::string>>& rows,
                      size_t column) {
  std::string text = "$" + name + " << EOD\n";
  for (const auto& row : rows) {
    if (column < row.size() && !row[column].empty()) text += row[0] + " " + row[column] + "\n";
  }
  return text + "EOD\n";
}

// `text` as a gnuplot single-quoted string.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string plot_script(const std::string& run_dir, const std::string& png) {
  const std::string csv_path = run_dir + "/metrics.csv";
  std::ifstream csv(csv_path);
  if (!csv)
    throw Error("cannot open " + csv_path + " (is " + run_dir +
                " a run directory of crema train?)");
  std::string line;
  std::getline(csv, line);
  const std::vector<std::string> header = split(line);
  if (header.size() < 3 || header[0] != "iteration") {
    throw Error(csv_path + ": not a crema metrics file");
  }
  std::vector<std::vector<std::string>> rows;
  while (std::getline(csv, line)) rows.push_back(split(line));
  if (rows.empty()) throw Error(csv_path + " has no rows yet: nothing to plot");

  std::string script, loss_plot, metric_plot;
  for (size_t c = 2; c < header.size(); ++c) {
    const std::string& name = header[c];
    const bool loss = name == "loss" || name == "test_loss";
    if (!loss && name.rfind("test_", 0) != 0) continue;
    script += datablock("c" + std::to_string(c), rows, c);
    std::string& plot = loss ? loss_plot : metric_plot;
    const bool train = name == "loss";
    plot += fmt::format("{}$c{} using 1:2 with {} linewidth 2 title {}", plot.empty() ? "" : ", ",
                        c, train ? "lines" : "linespoints",
                        quoted(train ? "train loss" : "test " + name.substr(5)));
  }
  script +=
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      "  set terminal pngcairo noenhanced size 900," +
      std::string(metric_plot.empty() ? "450" : "800") +
      "\n"
      "} else {\n"
      "  set terminal png noenhanced size 900,800\n"
      "}\n";
  script += "set output " + quoted(png) + "\nset grid\nset key top right\nset xlabel 'iteration'\n";
  if (!metric_plot.empty()) script += "set multiplot layout 2,1\n";
  script += "set title " + quoted(fs::path(run_dir).filename().string() + ": loss") + "\nplot " +
            loss_plot + "\n";
  if (!metric_plot.empty()) {
    script += "set title 'test'\nset key bottom right\nplot " + metric_plot + "\nunset multiplot\n";
  }
  return script + "set output\n";
}

std::string plot_command(const std::string& run_dir, const std::string& png, std::ostream& out) {
  const std::string target = png.empty() ? run_dir + "/curves.png" : png;
  const std::string temp = target + ".tmp";
  const std::string script = plot_script(run_dir, temp);
  if (!on_path("gnuplot")) {
    throw Error(
        "crema plot draws with gnuplot, which is not installed (Debian/Ubuntu: apt-get install "
        "gnuplot-nox)");
  }

  char script_path[] = "/tmp/crema_plot_XXXXXX";
  const int fd = ::mkstemp(script_path);
  if (fd < 0) throw Error("cannot create a temporary file for the gnuplot script");
  const bool written = ::write(fd, script.data(), script.size()) == ssize_t(script.size());
  ::close(fd);
  std::string output;
  int status = -1;
  if (written) {
    FILE* pipe = ::popen(fmt::format("gnuplot '{}' 2>&1", script_path).c_str(), "r");
    if (pipe != nullptr) {
      char buffer[512];
      while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
      status = ::pclose(pipe);
    }
  }
  ::unlink(script_path);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(temp)) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    for (char& c : output) c = c == '\n' ? ' ' : c;
    throw Error("gnuplot failed to draw " + target + ": " + output);
  }
  fs::rename(temp, target);
  out << "curves of " << run_dir << " in " << target << "\n";
  return target;
}

}  // namespace crema
