// crema bench: the pieces every op family shares (bench.h).
#include "apps/bench.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>

#include "core/error.h"

namespace crema::bench {
namespace {

// Traffic between two uses of one input copy: several times the 50-60 MB L2 of an H100/H200, so
// every timed call reads its inputs from DRAM, as a layer in a network does.
constexpr double kRotationBytes = 200e6;
constexpr int kMaxCopies = 256;
// What one row's timed calls may take at most (milliseconds), for measure_ms.
constexpr double kRowBudgetMs = 2000;
// A call shorter than kBurstSpanMs is timed in bursts of back-to-back calls spanning about that
// (ceil(span / one call), at most kMaxBurst), each sample divided by its count: timed one at a
// time, such a call's event pair also holds the host's launch of it (a few microseconds the GPU
// idles, varying call to call), which a network's back-to-back kernels do not pay. Every sample,
// one call or a burst, is queued behind a hold (gpu::hold), so its calls run at the GPU's pace
// even where the host launches slower than a call runs (LeNet's 4 us pools) and no sample holds a
// launch gap: a burst of k calls and one of k + 1 time the same thing.
constexpr double kBurstSpanMs = 0.2;
// The hold before each sample: more than the host takes to queue it (a launch costs a few us).
constexpr double kHoldUs = 50, kHoldPerCallUs = 50;
constexpr int kMaxBurst = 200;

std::string or_dash(const std::string& text) {
  return text.empty() ? "-" : text;
}

}  // namespace

void check_options(const Options& options) {
  if (options.math != "fp32" && options.math != "tf32" && options.math != "bf16") {
    throw Error("--math: expected fp32, tf32 or bf16, got '" + options.math + "'");
  }
  if (options.layout != "nchw" && options.layout != "nhwc") {
    throw Error("--layout: expected nchw or nhwc, got '" + options.layout + "'");
  }
  if (options.warmup < 0) {
    throw Error("--warmup: must not be negative, got " + std::to_string(options.warmup));
  }
  if (options.repeats < 1) {
    throw Error("--repeats: must be at least 1, got " + std::to_string(options.repeats));
  }
}

// Dense peaks from NVIDIA's H100 SXM / H200 data sheets (tensor-core numbers without sparsity).
DevicePeak device_peak(const Context& ctx) {
  DevicePeak peak;
  peak.name = ctx.device().is_cuda() ? gpu::device_description(ctx.device().index) : "cpu";
  const bool h100 = peak.name.find("H100") != std::string::npos;
  const bool h200 = peak.name.find("H200") != std::string::npos;
  if (h100 || h200) {
    peak.fp32_tflops = 67;
    peak.tf32_tflops = 495;
    peak.bf16_tflops = 989;
    peak.dram_gbps = h200 ? 4800 : 3350;
  }
  return peak;
}

double median_ms(Context& ctx, int warmup, int repeats, const std::function<void(int)>& launch,
                 int burst) {
  int call = 0;
  for (int i = 0; i < warmup; ++i) launch(call++);
  const gpu::Event start = gpu::create_event(), stop = gpu::create_event();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    // Each sample is queued behind a hold long enough to queue it all (kHoldPerCallUs a call),
    // so its calls run back to back at the GPU's pace, not at the host's launch rate, and the
    // start event does not wait for the host's first launch.
    gpu::hold(ctx.stream(), kHoldUs + kHoldPerCallUs * burst);
    gpu::record(start, ctx.stream());
    for (int b = 0; b < burst; ++b) launch(call++);
    gpu::record(stop, ctx.stream());
    gpu::synchronize_event(stop);
    times.push_back(gpu::elapsed_ms(start, stop) / burst);
  }
  gpu::destroy_event(start);
  gpu::destroy_event(stop);
  if (times.empty()) return 0;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int burst_for(double single_ms) {
  return int(std::clamp(std::ceil(kBurstSpanMs / std::max(single_ms, 1e-4)), 1.0, double(kMaxBurst)));
}

double measure_ms(Context& ctx, const Options& options, const std::function<void(int)>& launch) {
  // A first untimed call (lazy setup), then three single calls: their median sizes the row.
  const double first = median_ms(ctx, 1, 3, launch);
  const int burst = burst_for(first);
  const double sample_ms = first * burst;
  const int affordable = int(std::max(1.0, kRowBudgetMs / std::max(sample_ms, 1e-3)));
  const int repeats = std::clamp(affordable, std::min(3, options.repeats), options.repeats);
  const int warmup = std::min(options.warmup, std::max(1, affordable / 10));
  // The sizing calls were calls 0-3; the count goes on, so the input rotation does too.
  return median_ms(ctx, warmup, repeats, [&](int i) { launch(i + 4); }, burst);
}

int rotation_copies(size_t bytes) {
  if (bytes == 0) return 1;
  const double copies = std::ceil(kRotationBytes / double(bytes));
  return int(std::clamp(copies, 1.0, double(kMaxCopies)));
}

double copy_gbps(Context& ctx) {
  const int64_t n = int64_t(1) << 28;  // floats
  const Tensor src = ctx.zeros({n});
  Tensor dst = ctx.empty({n});
  const double ms = median_ms(ctx, 3, 20, [&](int) { ctx.copy(dst, src); });
  return 2.0 * double(n) * sizeof(float) / ms / 1e6;
}

double relative_error(const float* out, const double* ref, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(out[i]) - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  if (norm == 0) return diff == 0 ? 0 : INFINITY;
  return std::sqrt(diff / norm);
}

Table::Table(std::ostream& out, DevicePeak peak) : out_(out), peak_(std::move(peak)) {}

// One line per row, every field one token (shapes may hold spaces: they come first), so that
// scripts/bench/compare_cudnn.py can read the table from the right.
void Table::print(const Row& row) {
  if (!header_printed_) {
    out_ << fmt::format("device: {}", peak_.name);
    if (peak_.fp32_tflops > 0) {
      out_ << fmt::format(
          " (peaks: fp32 {:.0f}, tf32 {:.0f}, bf16 {:.0f} TFLOP/s; DRAM {:.0f} GB/s)",
          peak_.fp32_tflops, peak_.tf32_tflops, peak_.bf16_tflops, peak_.dram_gbps);
    }
    out_ << "\n";
    out_ << fmt::format(
        "{:<32} {:<15} {:<18} {:<12} {:>9} {:>7} {:>10} {:>8} {:>8} {:>6} {:>9} {}\n", "shape",
        "pass", "version", "check", "rel.err", "tol", "ms", "TFLOP/s", "GB/s", "%peak", "ws_MB",
        "status");
    header_printed_ = true;
  }
  const bool passed = row.rel_error <= row.tolerance;  // false for NaN
  if (!passed) failed_ = true;
  std::string ms = "-", tflops = "-", gbps = "-", fraction = "-";
  if (passed && row.ms > 0) {
    ms = fmt::format("{:.4f}", row.ms);
    if (row.flops > 0) tflops = fmt::format("{:.2f}", row.flops / row.ms / 1e9);
    if (row.bytes > 0) gbps = fmt::format("{:.1f}", row.bytes / row.ms / 1e6);
    double peak = 0, achieved = 0;
    if (row.peak == "dram") {
      peak = peak_.dram_gbps, achieved = row.bytes / row.ms / 1e6;
    } else {
      peak = row.peak == "tf32"   ? peak_.tf32_tflops
             : row.peak == "bf16" ? peak_.bf16_tflops
                                  : peak_.fp32_tflops;
      achieved = row.flops / row.ms / 1e9;
    }
    if (peak > 0 && achieved > 0) fraction = fmt::format("{:.1f}", 100.0 * achieved / peak);
  }
  out_ << fmt::format(
      "{:<32} {:<15} {:<18} {:<12} {:>9.2e} {:>7.0e} {:>10} {:>8} {:>8} {:>6} {:>9.1f} {}\n",
      row.shape, or_dash(row.pass), row.version, or_dash(row.check), row.rel_error, row.tolerance,
      ms, tflops, gbps, fraction, row.workspace_bytes / 1e6, passed ? "ok" : "FAIL");
  out_.flush();
}

}  // namespace crema::bench
