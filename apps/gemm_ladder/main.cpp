// crema_gemm_ladder: every rung of the CUDA GEMM ladder (kernels/gemm/ladder/gemm_ladder.h) on one
// shape per path, checked and timed, one table row per rung and math. It calls the GEMM op and its
// ladder and nothing of crema but core (it links crema_kernel_ladders, whose static libraries give
// it only the objects it uses: no layers, solvers, data or apps): the lesson in one program.
//
//   crema_gemm_ladder [--shape M,N,K[,NN|NT|TN|TT]] [--tc-shape M,N,K[,LAYOUT]] [--path simt|tc]
//                     [--rungs s1,s7,...] [--repeats N] [--cublas FILE] [--cublas-ms MATH=MS]...
//                     [--profile]
//
// Defaults: the SIMT path on 4096,4096,4096,NN; the tensor-core path on 8192,8192,8192,NT (the
// layout t4's TMA path reads in place). Each rung runs once on a NaN-poisoned C and is checked at
// kSamples elements against dot products in double on the host, the error of each divided by
// sum_k |a_ik b_kj| (the scale of its rounding error); "max err" is the largest, and a row fails
// above its math's bound (fp32 1e-4, tf32 2e-3, bf16 1e-2) or with a NaN anywhere in C. Then
// it is timed: the median of up to --repeats calls (about 2 s per rung at most) after two warm-up
// calls, each call between two CUDA events. TFLOP/s = 2MNK / time; "% best" is against the fastest
// row of the path; "% cuBLAS" against cuBLAS in the same math and shape, when given: a time with
// --cublas-ms fp32=2.75, or the lines of scripts/bench/peer_gemm.py's output in --cublas FILE
// ("cuBLAS fp32 8192,8192,8192,NN 21.5 ms 51.1 TFLOP/s"). --profile runs each rung once, unchecked
// and untimed, for a profiler (scripts/bench/gemm_ladder.sh runs ncu on it). Exit status 0 when
// every row passed its check, 1 when one failed, 2 on bad arguments or without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/build_config.h"
#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/random.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/ladder/gemm_ladder.h"

namespace {

using namespace crema;
namespace cuda = kernels::cuda;
namespace ladder = kernels::cuda::ladder;
using cuda::GemmMath;
using ladder::Path;
using ladder::Rung;

constexpr int kSamples = 1024;
constexpr double kRungBudgetMs = 2000;

struct GemmSize {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  std::string str() const {
    return std::to_string(M) + "," + std::to_string(N) + "," + std::to_string(K) + "," +
           (trans_a ? "T" : "N") + (trans_b ? "T" : "N");
  }
};

GemmSize parse_shape(const std::string& text) {
  GemmSize s;
  std::string layout = "NN";
  std::stringstream in(text);
  std::string part;
  std::vector<std::string> parts;
  while (std::getline(in, part, ',')) parts.push_back(part);
  try {
    if (parts.size() < 3 || parts.size() > 4) throw Error("");
    s.M = std::stoll(parts[0]), s.N = std::stoll(parts[1]), s.K = std::stoll(parts[2]);
    if (parts.size() == 4) layout = parts[3];
  } catch (const std::exception&) {
    throw Error("--shape '" + text + "': expected M,N,K or M,N,K,LAYOUT");
  }
  if (s.M < 1 || s.N < 1 || s.K < 1 || layout.size() != 2 ||
      layout.find_first_not_of("NT") != std::string::npos) {
    throw Error("--shape '" + text + "': sizes must be positive, LAYOUT one of NN, NT, TN, TT");
  }
  s.trans_a = layout[0] == 'T', s.trans_b = layout[1] == 'T';
  return s;
}

struct Options {
  GemmSize simt = parse_shape("4096,4096,4096,NN");
  GemmSize tensor_core = parse_shape("8192,8192,8192,NT");
  std::optional<Path> only_path;
  std::vector<Rung> rungs;  // empty: all
  int repeats = 10;
  bool profile = false;
  std::map<std::string, double> cublas_ms;  // "fp32 8192,8192,8192,NN" -> ms; "fp32" -> ms
};

// The lines of scripts/bench/peer_gemm.py's output: "cuBLAS MATH M,N,K,LAYOUT MS ms ...".
void read_cublas_file(const std::string& path, Options& options) {
  std::ifstream in(path);
  if (!in) throw Error("--cublas " + path + ": cannot open");
  std::string line;
  int found = 0;
  while (std::getline(in, line)) {
    std::stringstream words(line);
    std::string tag, math, shape, unit;
    double ms = 0;
    if (words >> tag >> math >> shape >> ms >> unit && tag == "cuBLAS" && unit == "ms") {
      options.cublas_ms[math + " " + shape] = ms, ++found;
    }
  }
  if (found == 0) throw Error("--cublas " + path + ": no line 'cuBLAS MATH M,N,K,LAYOUT MS ms'");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(arg + ": needs a value");
      return argv[++i];
    };
    if (arg == "--shape") {
      o.simt = parse_shape(value());
    } else if (arg == "--tc-shape") {
      o.tensor_core = parse_shape(value());
    } else if (arg == "--path") {
      const std::string p = value();
      if (p != "simt" && p != "tc") throw Error("--path: expected simt or tc, got '" + p + "'");
      o.only_path = p == "simt" ? Path::simt : Path::tensor_core;
    } else if (arg == "--rungs") {
      std::stringstream in(value());
      std::string name;
      while (std::getline(in, name, ',')) {
        const std::optional<Rung> rung = ladder::from_name(name);
        if (!rung) throw Error("--rungs: no rung '" + name + "' (a label s1..t5 or a name)");
        o.rungs.push_back(*rung);
      }
    } else if (arg == "--repeats") {
      const std::string n = value();
      o.repeats = std::atoi(n.c_str());
      if (o.repeats < 1) throw Error("--repeats: expected a positive count, got '" + n + "'");
    } else if (arg == "--cublas") {
      read_cublas_file(value(), o);
    } else if (arg == "--cublas-ms") {
      const std::string v = value();
      const size_t eq = v.find('=');
      const double ms = eq == std::string::npos ? 0 : std::atof(v.c_str() + eq + 1);
      if (ms <= 0 || !cuda::gemm_math_from_name(v.substr(0, eq))) {
        throw Error("--cublas-ms: expected MATH=MS (fp32=2.75), got '" + v + "'");
      }
      o.cublas_ms[v.substr(0, eq)] = ms;
    } else if (arg == "--profile") {
      o.profile = true;
    } else {
      throw Error("unknown argument '" + arg + "' (the header of apps/gemm_ladder/main.cpp)");
    }
  }
  return o;
}

// The operands of one shape: on the host for the check, on the device for the rungs.
struct Problem {
  GemmSize s;
  int64_t lda, ldb;
  std::vector<float> a, b;
  Tensor dev_a, dev_b, dev_c;
  std::vector<int64_t> where;           // the checked elements of C
  std::vector<double> expected, scale;  // their values in double, and sum_k |a_ik b_kj|

  Problem(Context& ctx, const GemmSize& shape, Random& random)
      : s(shape), lda(shape.trans_a ? shape.M : shape.K), ldb(shape.trans_b ? shape.K : shape.N) {
    a.resize(size_t(s.M * s.K));
    b.resize(size_t(s.K * s.N));
    for (float& v : a) v = float(random.uniform(-1.0, 1.0));
    for (float& v : b) v = float(random.uniform(-1.0, 1.0));
    dev_a = ctx.empty({s.M * s.K});
    dev_b = ctx.empty({s.K * s.N});
    dev_c = ctx.empty({s.M * s.N});
    dev_a.copy_from(Tensor::from_vector({s.M * s.K}, a));
    dev_b.copy_from(Tensor::from_vector({s.K * s.N}, b));
    for (int t = 0; t < kSamples; ++t) {
      const int64_t i = int64_t(random.below(uint64_t(s.M))),
                    j = int64_t(random.below(uint64_t(s.N)));
      double sum = 0, abs_sum = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        const double p = double(a[size_t(s.trans_a ? k * lda + i : i * lda + k)]) *
                         double(b[size_t(s.trans_b ? j * ldb + k : k * ldb + j)]);
        sum += p, abs_sum += std::fabs(p);
      }
      where.push_back(i * s.N + j);
      expected.push_back(sum);
      scale.push_back(abs_sum);
    }
  }

  void launch(Rung rung, GemmMath math, float* workspace, gpu::Stream stream) {
    ladder::sgemm(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f, dev_a.data<float>(), lda,
                  dev_b.data<float>(), ldb, 0.0f, dev_c.data<float>(), s.N, stream, rung, math,
                  workspace);
  }

  // The largest sampled error over its scale; NaN when C holds a NaN anywhere (not written).
  double max_error() const {
    const std::vector<float> c = dev_c.to_vector();
    if (std::any_of(c.begin(), c.end(), [](float v) { return std::isnan(v); })) return NAN;
    double worst = 0;
    for (size_t t = 0; t < where.size(); ++t) {
      const double err = std::fabs(double(c[size_t(where[t])]) - expected[t]);
      worst = std::max(worst, err / std::max(scale[t], 1e-30));
    }
    return worst;
  }
};

double bound(GemmMath math) {
  switch (math) {
    case GemmMath::tf32:
      return 2e-3;
    case GemmMath::bf16:
      return 1e-2;
    case GemmMath::fp32:
      break;
  }
  return 1e-4;
}

// Median milliseconds of one call, between two events per call.
double time_ms(Context& ctx, int repeats, const std::function<void()>& call) {
  gpu::Event start = gpu::create_event(), stop = gpu::create_event();
  auto one = [&] {
    gpu::record(start, ctx.stream());
    call();
    gpu::record(stop, ctx.stream());
    gpu::synchronize_event(stop);
    return double(gpu::elapsed_ms(start, stop));
  };
  one();  // warm-up: first-launch costs
  const double first = one();
  const int n = std::clamp(int(kRungBudgetMs / std::max(first, 1e-3)), 1, repeats);
  std::vector<double> times{first};
  for (int i = 1; i < n; ++i) times.push_back(one());
  gpu::destroy_event(start);
  gpu::destroy_event(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Row {
  Rung rung = Rung::uncoalesced;
  GemmMath math = GemmMath::fp32;
  double ms = NAN, error = NAN;
  std::string note;  // why there is no time
};

std::string fixed(double v, int digits) {
  if (std::isnan(v)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

void print_path(const std::string& title, const GemmSize& s, const std::vector<Row>& rows,
                const Options& options) {
  const double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
  double best = 0;
  for (const Row& r : rows) {
    if (!std::isnan(r.ms)) best = std::max(best, flops / r.ms / 1e9);
  }
  std::printf("\n%s, %s\n", title.c_str(), s.str().c_str());
  std::printf("%-4s %-18s %-5s %10s %8s %7s %9s %9s  %s\n", "rung", "name", "math", "ms", "TFLOP/s",
              "% best", "% cuBLAS", "max err", "idea");
  for (const Row& r : rows) {
    const char* math = cuda::gemm_math_name(r.math);
    const double tflops = flops / r.ms / 1e9;
    std::string vs_cublas = "-";
    auto cublas = options.cublas_ms.find(std::string(math) + " " + s.str());
    if (cublas == options.cublas_ms.end()) cublas = options.cublas_ms.find(math);
    if (cublas != options.cublas_ms.end() && !std::isnan(r.ms)) {
      vs_cublas = fixed(100.0 * cublas->second / r.ms, 1);
    }
    char error[32];
    std::snprintf(error, sizeof error, "%.1e", r.error);
    std::printf("%-4s %-18s %-5s %10s %8s %7s %9s %9s  %s%s\n", ladder::label(r.rung).c_str(),
                ladder::name(r.rung), math, fixed(r.ms, 3).c_str(), fixed(tflops, 1).c_str(),
                fixed(100.0 * tflops / best, 1).c_str(), vs_cublas.c_str(),
                std::isnan(r.error) ? "-" : error, ladder::idea(r.rung), r.note.c_str());
  }
  for (const auto& [what, ms] : options.cublas_ms) {  // cuBLAS's rows in the maths above
    const std::string math = what.substr(0, what.find(' '));
    const bool shown = std::any_of(rows.begin(), rows.end(), [&](const Row& r) {
      return math == cuda::gemm_math_name(r.math);
    });
    if (shown && (what == math + " " + s.str() || what == math)) {
      std::printf("%-4s %-18s %-5s %10s %8s\n", "-", "cuBLAS", math.c_str(), fixed(ms, 3).c_str(),
                  fixed(flops / ms / 1e9, 1).c_str());
    }
  }
}

// Runs the rungs of one path; false when one failed its check.
bool run_path(Context& ctx, Path path, const GemmSize& shape, const Options& options,
              Random& random) {
  std::vector<Rung> rungs;
  for (Rung r : ladder::rungs()) {
    const bool picked =
        options.rungs.empty() || std::count(options.rungs.begin(), options.rungs.end(), r) > 0;
    if (ladder::path(r) == path && picked) rungs.push_back(r);
  }
  if (rungs.empty()) return true;
  Problem problem(ctx, shape, random);
  std::vector<Row> rows;
  bool passed = true;
  for (Rung rung : rungs) {
    for (GemmMath math : {GemmMath::fp32, GemmMath::tf32, GemmMath::bf16}) {
      if (!ladder::supports(rung, math)) continue;
      Row row;
      row.rung = rung, row.math = math;
      const GemmSize& s = shape;
      const size_t floats =
          ladder::sgemm_workspace(s.trans_a, s.trans_b, s.M, s.N, s.K, rung, math);
      float* workspace = floats > 0 ? ctx.workspace(floats) : nullptr;
      auto call = [&] { problem.launch(rung, math, workspace, ctx.stream()); };
      try {
        if (options.profile) {
          call();
          ctx.synchronize();
          continue;
        }
        ctx.fill(problem.dev_c, NAN);
        call();
        ctx.synchronize();
        row.error = problem.max_error();
        if (row.error <= bound(math)) {
          row.ms = time_ms(ctx, options.repeats, call);
        } else {
          row.note = "  [FAILED the check]";
          passed = false;
        }
      } catch (const Error& e) {  // t3-t5 off compute capability 9.0
        row.note = std::string("  [not run: ") + e.what() + "]";
      }
      rows.push_back(row);
    }
  }
  if (!options.profile) {
    print_path(path == Path::simt ? "fp32 SIMT path" : "tensor-core path", shape, rows, options);
  }
  return passed;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    if (!kBuiltWithCuda || gpu::device_count() == 0) {
      std::fprintf(stderr, "crema_gemm_ladder: no CUDA device (%s)\n",
                   kBuiltWithCuda ? "none found" : "a build without CUDA");
      return 2;
    }
    Context ctx(Device::cuda(0));
    Random random(1);
    std::printf("crema GEMM ladder on %s\n", gpu::device_description(0).c_str());
    bool passed = true;
    for (Path path : {Path::simt, Path::tensor_core}) {
      if (options.only_path && *options.only_path != path) continue;
      const GemmSize& shape = path == Path::simt ? options.simt : options.tensor_core;
      passed = run_path(ctx, path, shape, options, random) && passed;
    }
    return passed ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "crema_gemm_ladder: %s\n", e.what());
    return 2;
  }
}
