// crema: train, test and inspect networks described in YAML.
//
//   crema train CONFIG [--device cpu|cuda:N] [--set key=value]... [--out DIR] [--seed N] [--threads N]
//   crema test CONFIG --weights FILE [--device ...] [--set key=value]...
//   crema summary CONFIG [--set key=value]...
//   crema time CONFIG [--device ...] [--iterations N] [--set key=value]...
//   crema devices
//
// Anything the user should fix ends with one line "crema: error: ..." and exit code 2.
#include <CLI/CLI.hpp>
#include <iostream>

#include "apps/commands.h"
#include "core/error.h"

namespace {

void add_common(CLI::App& command, crema::CommandOptions& options) {
  command.add_option("config", options.config, "the YAML config file")->required();
  command.add_option("--set", options.overrides, "override a config key: --set solver.base_lr=0.02")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  command.add_option("--device", options.device, "cpu or cuda:N")->capture_default_str();
  command.add_option("--threads", options.threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"crema: a Caffe-style training framework on its own primitives"};
  app.require_subcommand(1);
  crema::CommandOptions options;
  uint64_t seed = 0;

  CLI::App* train = app.add_subcommand("train", "train a network");
  add_common(*train, options);
  train->add_option("--out", options.out_dir, "run directory (default runs/<name>)");
  CLI::Option* seed_option = train->add_option("--seed", seed, "random seed (overrides the config's)");

  CLI::App* test = app.add_subcommand("test", "evaluate weights on the test set");
  add_common(*test, options);
  test->add_option("--weights", options.weights, "safetensors weights file")->required();

  CLI::App* summary = app.add_subcommand("summary", "print the layers and shapes of a network");
  add_common(*summary, options);

  CLI::App* time = app.add_subcommand("time", "time each layer's forward and backward and the whole step");
  add_common(*time, options);
  time->add_option("--iterations", options.iterations, "timed iterations")->capture_default_str();

  CLI::App* devices = app.add_subcommand("devices", "list the devices this build can run on");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "crema: error: " << e.what() << " (see crema --help)\n";
    return 2;
  }
  if (seed_option->count() > 0) options.seed = seed;

  try {
    if (*train) crema::train_command(options, std::cout);
    if (*test) crema::test_command(options, std::cout);
    if (*summary) crema::summary_command(options, std::cout);
    if (*time) crema::time_command(options, std::cout);
    if (*devices) crema::devices_command(std::cout);
  } catch (const crema::Error& e) {
    std::cout.flush();
    std::cerr << "crema: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "crema: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
