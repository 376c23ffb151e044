// crema: train, test and inspect networks described in YAML.
//
//   crema train CONFIG [--device cpu|cuda:N] [--set key=value]... [--out DIR] [--seed N] [--threads N]
//               [--weights FILE | --resume RUN_DIR|CHECKPOINT] [--stop-after N]
//               [--gpus 0,1|all] [--timeout SECONDS]
//   crema test CONFIG --weights FILE [--device ...] [--set key=value]...
//              [--extract BLOB --extract-to FILE]
//   crema export CONFIG --weights FILE --onnx OUT.onnx [--set key=value]...

//   crema predict CONFIG --weights FILE IMAGE... [--top-k 5] [--labels FILE] [--json]
//   crema summary CONFIG [--device ...] [--set key=value]...   (plans for --device on the host)
//   crema plot RUN_DIR [--out FILE.png]
//   crema time CONFIG [--device ...] [--iterations N] [--set key=value]...
//   crema devices
//   crema export-images [CONFIG --split S | --images F --labels F] --out DIR [--classes 5,7,9] [--per-class N]
//   crema pack SOURCE OUT [--shard-size 256MB] [--max-side N] [--quality Q] [--skip-bad]
//              [--workers N] [--root DIR] [--num-classes N]
//   crema bench-loader CONFIG [--split S] [--workers 1,2,4] [--batches N] [--decode gpu]
//   crema bench gemm|conv|conv-tc|rnn|batch-norm|softmax|optimizer|layer-norm|global-pool|pooling|
//               lrn|activation|eltwise|dropout|concat|op-tensor|reduce-tensor|transform-tensor|
//               scale|cast|layout|loss|accuracy|im2col|lcn|api
//               [--shape S]... [--version V] [--math fp32|tf32|bf16]
//               [--warmup N] [--layout nchw|nhwc] [--repeats N] [--device cuda:N]
//
// Anything the user should fix ends with one line "crema: error: ..." and exit code 2. A training
// run stopped by Ctrl-C or SIGTERM (after writing its checkpoint) exits with 130 or 143, as
// shells report those signals; one stopped by a non-finite loss or gradient (solver.on_nonfinite)
// exits with 3; one stopped because a checkpoint or the final weights could not be written (a
// full disk; solver.on_write_error) exits with 4; a rank of a run on several GPUs whose peer died
// or hung exits with 5 (apps/distributed/watchdog.h). `crema bench` exits with 1 when a version
// fails its check.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "apps/bench.h"
#include "apps/commands.h"
#include "apps/data_commands.h"
#include "apps/distributed/launcher.h"
#include "apps/distributed/world.h"
#include "core/cuda_runtime.h"
#include "core/error.h"

namespace {

void add_common(CLI::App& command, crema::CommandOptions& options) {
  command.add_option("config", options.config, "the YAML config file")->required();
  command.add_option("--set", options.overrides, "override a config key: --set solver.base_lr=0.02")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  command.add_option("--device", options.device, "cpu or cuda:N")->capture_default_str();
  command.parse_complete_callback(
      [&command, &options] { options.device_given = command.count("--device") > 0; });
  command.add_option("--threads", options.threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber);
}

// A GPU takes work through a few hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 unless set, 32
// at most), and streams beyond them share one: a kernel then waits behind whatever another stream
// queued ahead of it. With decode: gpu, nvJPEG's per-image conversion kernels (on its own streams)
// sat behind whole training steps (a CUDA graph's kernels): ResNet-50 bf16 fed from JPEGs stalled
// on data 10-12% of the time with 8 queues, 45% with 1, 0.0% with 32 (data/MEASUREMENTS.md, "GPU
// decoding"). Set before the first CUDA call; a value the user set is kept.
void widen_gpu_queues() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0); }

}  // namespace

int main(int argc, char** argv) {
  widen_gpu_queues();
  CLI::App app{"crema: a Caffe-style training framework on its own primitives"};
  app.require_subcommand(1);
  crema::CommandOptions options;
  uint64_t seed = 0;

  CLI::App* train = app.add_subcommand("train", "train a network");
  add_common(*train, options);
  train->add_option("--out", options.out_dir, "run directory (default runs/<name>)");
  CLI::Option* seed_option = train->add_option("--seed", seed, "random seed (overrides the config's)");
  CLI::Option* train_weights =
      train->add_option("--weights", options.weights,
                        "start from these weights (safetensors or PyTorch .pth), copied by name");
  train
      ->add_option("--resume", options.resume,
                   "continue a run: its directory or one of its checkpoints")
      ->excludes(train_weights);
  train->add_option("--stop-after", options.stop_after,
                    "stop after iteration N as Ctrl-C would: write a checkpoint, exit with 0");
  std::string gpus;
  train->add_option("--gpus", gpus,
                    "train on these GPUs of this host, one process each (0,1 or all; "
                    "batch_size is per GPU)");
  train
      ->add_option("--timeout", options.timeout,
                   "several processes: seconds to wait for another rank (rendezvous, a step) "
                   "before stopping with an error")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  CLI::App* test = app.add_subcommand("test", "evaluate weights on the test set");
  add_common(*test, options);
  test->add_option("--weights", options.weights, "weights (safetensors or PyTorch .pth)")->required();
  test->add_option("--extract", options.extract, "blobs to save for every test sample (e.g. ip2)")
      ->delimiter(',');
  test->add_option("--extract-to", options.extract_to, "safetensors file for the --extract blobs");

  std::string onnx_path;
  CLI::App* export_model = app.add_subcommand("export", "write the model in inference mode as ONNX");
  add_common(*export_model, options);
  export_model->add_option("--weights", options.weights, "weights file")->required();
  export_model->add_option("--onnx", onnx_path, "the ONNX file to write")->required();

  CLI::App* predict =
      app.add_subcommand("predict", "the top-k classes of image files, with their probabilities");
  add_common(*predict, options);
  predict->add_option("--weights", options.weights, "the trained weights")->required();
  predict->add_option("images", options.images, "image files (JPEG, PNG, ...)")->required();
  predict->add_option("--top-k", options.top_k, "classes printed per image")->capture_default_str();
  predict->add_option("--labels", options.labels,
                      "class names, one per line (default: the run's classes.txt)");
  predict->add_flag("--json", options.json, "print JSON");

  CLI::App* summary = app.add_subcommand(
      "summary", "layers, shapes, parameters, multiply-adds and the memory training takes");
  add_common(*summary, options);

  CLI::App* time = app.add_subcommand("time", "time each layer's forward and backward and the whole step");
  add_common(*time, options);
  time->add_option("--iterations", options.iterations, "timed iterations")->capture_default_str();
  // --workspace-limit is model.workspace_limit (layers/conv_algorithms.h), set after the --set's.
  std::string workspace_limit;
  for (CLI::App* command : {train, test, time}) {
    command->add_option("--workspace-limit", workspace_limit,
                        "scratch a convolution pass may use (256MiB, 2GiB, none)");
  }
  for (CLI::App* command : {train, time}) {
    command->add_option("--algo-cache", options.algo_cache,
                        "JSON file of measured algorithm choices (algorithm: find), read and "
                        "updated");
  }

  CLI::App* plot = app.add_subcommand("plot", "draw a run's loss and accuracy curves as a PNG (gnuplot)");
  std::string plot_dir, plot_png;
  plot->add_option("run_dir", plot_dir, "the run directory")->required();
  plot->add_option("--out", plot_png, "the PNG file (default RUN_DIR/curves.png)");

  CLI::App* devices = app.add_subcommand("devices", "list the devices this build can run on");

  crema::ExportImagesOptions export_options;
  CLI::App* export_images = app.add_subcommand("export-images", "write a dataset as an image folder (PNG or JPEG)");
  export_images->add_option("config", export_options.config, "a config whose data.<split>.source is written");
  export_images->add_option("--set", export_options.overrides, "override a config key")->allow_extra_args(false);
  export_images->add_option("--split", export_options.split, "train or test")->capture_default_str();
  export_images->add_option("--images", export_options.images, "IDX images file (instead of a config)");
  export_images->add_option("--labels", export_options.labels, "IDX labels file");
  export_images->add_option("--out", export_options.out_dir, "the folder to write")->required();
  export_images->add_option("--classes", export_options.classes, "labels to export (default all)")->delimiter(',');
  export_images->add_option("--per-class", export_options.per_class, "at most N per class, the first ones (0: all)");
  export_images->add_option("--class-names", export_options.class_names, "names by label, for the folders")->delimiter(',');
  export_images->add_option("--format", export_options.format, "png or jpg")->capture_default_str();
  export_images->add_option("--quality", export_options.quality, "JPEG quality 1..100")->capture_default_str();
  export_images->add_option("--list", export_options.list_file, "also write a '<path> <label>' list file");

  crema::PackCommandOptions pack_options;
  CLI::App* pack =
      app.add_subcommand("pack", "write an image folder or list file as shard files and an index");
  pack->add_option("source", pack_options.source,
                   "an image folder, or a list file of '<path> <label>' lines")
      ->required();
  pack->add_option("out", pack_options.out_dir, "the folder to write")->required();
  pack->add_option("--shard-size", pack_options.shard_size, "bytes per shard (256MB, 1GiB, ...)")
      ->capture_default_str();
  pack->add_option("--max-side", pack_options.max_side,
                   "re-encode images with a longer side as JPEG of this side (0: keep the files)")
      ->capture_default_str();
  pack->add_option("--quality", pack_options.quality, "JPEG quality of re-encoded images, 1..100")
      ->capture_default_str();
  pack->add_flag("--skip-bad", pack_options.skip_bad,
                 "leave out files that do not decode, and list them");
  pack->add_option("--workers", pack_options.workers,
                   "threads decoding and re-encoding files (0: one per core)")
      ->capture_default_str();
  pack->add_option("--root", pack_options.root,
                   "list file: the folder its paths start from (default: the list's)");
  pack->add_option("--num-classes", pack_options.num_classes,
                   "list file: the number of classes (default: largest label + 1)");
  pack->add_option("--max-image-pixels", pack_options.max_pixels,
                   "refuse larger images (decompression bombs)")
      ->capture_default_str();

  crema::BenchLoaderOptions bench_options;
  CLI::App* bench_loader = app.add_subcommand("bench-loader", "images/s the data loader delivers, by worker count");
  bench_loader
      ->add_option("config", bench_options.config,
                   "the YAML config file (any source: a folder, a packed dataset, ...)")
      ->required();
  bench_loader->add_option("--set", bench_options.overrides, "override a config key")->allow_extra_args(false);
  bench_loader->add_option("--split", bench_options.split, "train or test")->capture_default_str();
  bench_loader->add_option("--workers", bench_options.workers, "worker counts")->delimiter(',')->capture_default_str();
  bench_loader->add_option("--batches", bench_options.batches, "timed batches per worker count")->capture_default_str();
  bench_loader->add_option("--decode", bench_options.decode, "cpu or gpu (nvJPEG): data.<split>.decode");

  crema::bench::Options kernel_bench;
  std::string kernel_bench_op, kernel_bench_device = "cuda:0";
  CLI::App* bench = app.add_subcommand(
      "bench", "check every CUDA version of an op against its reference, then time it");
  bench->add_option("op", kernel_bench_op,
                    "gemm, conv, conv-tc (16-bit or tf32 NHWC), rnn, batch-norm (NHWC), "
                    "softmax, optimizer, or a memory-bound op: layer-norm, global-pool, pooling, "
                    "lrn, activation, eltwise, dropout, concat, op-tensor, reduce-tensor, "
                    "transform-tensor, scale, cast, layout, loss, accuracy, im2col, lcn (GB/s "
                    "against the copy bandwidth), api (the primitive API's cost over its kernels)")
      ->required()
      ->check(CLI::IsMember(crema::bench::bench_ops()));
  bench->add_option("--shape", kernel_bench.shapes, "a shape (repeatable; default: the op's list)")
      ->allow_extra_args(false);
  bench->add_option("--version", kernel_bench.version, "only this version (default: every one)");
  bench->add_option("--math", kernel_bench.math, "fp32, tf32 or bf16")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
  bench->add_option("--layout", kernel_bench.layout,
                    "conv: nchw, or nhwc (the raw NHWC passes on NHWC tensors, no transforms); "
                    "layer-norm, global-pool, pooling: the tensors' layout")
      ->capture_default_str()
      ->check(CLI::IsMember({"nchw", "nhwc"}));
  bench->add_option("--warmup", kernel_bench.warmup, "untimed calls first")->capture_default_str();
  bench->add_option("--repeats", kernel_bench.repeats, "timed calls (the median is printed)")
      ->capture_default_str();
  bench->add_option("--device", kernel_bench_device, "cuda:N")->capture_default_str();

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
  if (!workspace_limit.empty()) {
    options.overrides.push_back("++model.workspace_limit=" + workspace_limit);
  }
  if (seed_option->count() > 0) options.seed = seed;
  options.live_progress = isatty(STDOUT_FILENO) != 0;

  try {
    if (*train && !gpus.empty()) {
      if (options.device_given) throw crema::Error("--gpus and --device cannot be combined");
      // CREMA_TEST_LAUNCH_CPU: the launcher's tests run its children on the CPU.
      const bool on_cpu = std::getenv("CREMA_TEST_LAUNCH_CPU") != nullptr;
      const std::vector<int> devices =
          crema::distributed::parse_gpu_list(gpus, on_cpu ? 8 : crema::gpu::device_count());
      return crema::distributed::launch_per_gpu(
          devices, crema::distributed::without_gpus_option({argv + 1, argv + argc}),
          on_cpu ? "cpu" : "cuda:{}");
    }
    if (*train) {
      const crema::TrainSummary result = crema::train_command(options, std::cout);
      if (result.interrupted) return 128 + result.signal;
      if (result.diverged) return 3;
      if (result.write_failed) return 4;
    }
    if (*test) crema::test_command(options, std::cout);
    if (*export_model) crema::export_command(options, onnx_path, std::cout);

    if (*predict) crema::predict_command(options, std::cout);
    if (*summary) crema::summary_command(options, std::cout);
    if (*time) crema::time_command(options, std::cout);
    if (*plot) crema::plot_command(plot_dir, plot_png, std::cout);
    if (*devices) crema::devices_command(std::cout);
    if (*export_images) crema::export_images_command(export_options, std::cout);
    if (*pack) crema::pack_command(pack_options, std::cout);
    if (*bench_loader) crema::bench_loader_command(bench_options, std::cout);
    if (*bench) {
      return crema::bench::bench_command(kernel_bench_op, kernel_bench_device, kernel_bench,
                                         std::cout);
    }
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
