// The shared pieces of the memory-bound op families of crema bench (bench_memory_bound.cpp,
// bench_pointwise_ops.cpp, bench_pooling_ops.cpp): exact inputs, uploads, the check against the
// f64 reference, the storage dtype and its tolerance, and the table headed by the copy bandwidth.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "apps/bench.h"
#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"

namespace crema::bench {

// Random values in [low, high) rounded to `dtype`: the device's tensor (on the host) and the
// exact values, in memory order.
struct Input {
  Tensor host;
  std::vector<double> exact;
};
Input make_input(const Shape& shape, DType dtype, Layout layout, Random& random, double low,
                 double high);
// A device copy of a host tensor (its layout kept).
Tensor upload(Context& ctx, const Tensor& host);
// The worst relative error of several outputs (device tensors, widened) against references;
// synchronizes first. NaN sticks.
double worst_error(Context& ctx, const std::vector<const Tensor*>& got,
                   const std::vector<const std::vector<double>*>& want);
// A device tensor's values, widened to double (synchronizes first).
std::vector<double> download(Context& ctx, const Tensor& t);
// --shape's N,C,H,W shapes, or `defaults`.
std::vector<BatchNormShape4> shapes_of(const Options& options,
                                       std::vector<BatchNormShape4> defaults);
// bf16 for --math bf16, f32 otherwise.
DType storage_of(const Options& options);
// The tolerance of a result against the f64 reference: float arithmetic (1e-5), plus one rounding
// (2^-8) for a 16-bit result.
double tolerance_of(DType dtype);
// The table, after a line with the copy bandwidth its %peak column is of (copy_gbps); `what`
// says the dtype and layout.
Table open_table(Context& ctx, const std::string& what, std::ostream& out);
// Prints `row` (checked against "ref", its %peak of "dram"), timed with `launch` (measure_ms)
// when its check passed.
void time_row(Context& ctx, const Options& options, Table& table, Row row,
              const std::function<void(int)>& launch);

// An op's versions by name.
template <class V>
using Versions = std::vector<std::pair<std::string, V>>;

// The versions --version picks: all of them when it is empty; crema::Error naming the op's
// versions when it names none of them.
template <class V>
Versions<V> pick_versions(const Options& options, const std::string& op, const Versions<V>& all) {
  if (options.version.empty()) return all;
  std::string names;
  for (const auto& v : all) {
    if (v.first == options.version) return {v};
    names += (names.empty() ? "" : ", ") + v.first;
  }
  throw Error("crema bench " + op + ": --version '" + options.version + "': no such version (" +
              names + ")");
}

}  // namespace crema::bench
