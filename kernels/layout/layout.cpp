// Layout transforms, dispatch: checks the tensors once, simplifies the permutation, then runs the
// batched transpose or the general permutation for the device and dtype (float32: cpu:: or
// cuda::; float64 on the CPU: the reference).
#include "kernels/layout/layout.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

std::string order_str(const std::vector<int>& order) {
  std::string s = "[";
  for (size_t k = 0; k < order.size(); ++k) s += (k ? ", " : "") + std::to_string(order[k]);
  return s + "]";
}

void run_batched_transpose(Context& ctx, const char* op, int64_t B, int64_t R, int64_t S,
                           const Tensor& x, Tensor& y) {
  dispatch(ctx, op, x.dtype(),
           on_cuda(DType::f32,
                   [&](auto stream) {
                     cuda::batched_transpose(B, R, S, x.data<float>(), y.data<float>(),
                                             cuda::TransposeVersion::best, stream);
                   }),
           on_cpu(DType::f32,
                  [&] {
                    cpu::batched_transpose(B, R, S, x.data<float>(), y.data<float>(),
                                           ctx.num_threads());
                  }),
           on_cpu(DType::f64,
                  [&] { ref::batched_transpose(B, R, S, x.data<double>(), y.data<double>()); }));
}

}  // namespace

void check_permutation(const std::vector<int>& order, int ndim, const char* op) {
  std::vector<bool> seen(size_t(std::max(ndim, 0)), false);
  bool ok = int(order.size()) == ndim;
  for (int a : order) {
    ok = ok && a >= 0 && a < ndim && !seen[size_t(a)];
    if (ok) seen[size_t(a)] = true;
  }
  if (!ok) {
    throw Error(std::string(op) + ": order " + order_str(order) + " is not a permutation of the " +
                std::to_string(ndim) + " axes [0, " + std::to_string(ndim) + ")");
  }
}

Shape permuted_shape(const Shape& x_shape, const std::vector<int>& order) {
  check_permutation(order, int(x_shape.size()), "permute");
  Shape shape;
  for (int a : order) shape.push_back(x_shape[size_t(a)]);
  return shape;
}

std::vector<int> inverse_permutation(const std::vector<int>& order) {
  std::vector<int> inverse(order.size());
  for (size_t k = 0; k < order.size(); ++k) inverse[size_t(order[k])] = int(k);
  return inverse;
}

PermutePlan simplify_permutation(const Shape& x_shape, const std::vector<int>& order) {
  check_permutation(order, int(x_shape.size()), "permute");
  // Axes of extent 1 move nothing: drop them and renumber the others.
  std::vector<int> renumbered(x_shape.size(), -1);
  Shape kept;
  for (size_t a = 0; a < x_shape.size(); ++a) {
    if (x_shape[a] != 1) {
      renumbered[a] = int(kept.size());
      kept.push_back(x_shape[a]);
    }
  }
  // Runs of y's axes that read consecutive x axes in order are one axis: [first, last] of x.
  std::vector<std::pair<int, int>> runs;
  for (int a : order) {
    const int r = renumbered[size_t(a)];
    if (r < 0) continue;
    if (!runs.empty() && runs.back().second + 1 == r) {
      runs.back().second = r;
    } else {
      runs.emplace_back(r, r);
    }
  }
  PermutePlan plan;
  if (runs.size() <= 1) {
    plan.shape = {shape_numel(x_shape)};
    plan.order = {0};
    return plan;
  }
  // The runs partition x's axes into contiguous ranges; sorted by first axis they are x's merged
  // axes, and y's k-th axis is the merged axis of run k.
  std::vector<int> by_x(runs.size());
  std::iota(by_x.begin(), by_x.end(), 0);
  std::sort(by_x.begin(), by_x.end(),
            [&](int a, int b) { return runs[size_t(a)].first < runs[size_t(b)].first; });
  std::vector<int> merged_index(runs.size());
  for (size_t m = 0; m < by_x.size(); ++m) {
    const auto [first, last] = runs[size_t(by_x[m])];
    plan.shape.push_back(shape_count(kept, first, last + 1));
    merged_index[size_t(by_x[m])] = int(m);
  }
  for (size_t k = 0; k < runs.size(); ++k) plan.order.push_back(merged_index[k]);
  return plan;
}

void nchw_to_nhwc(Context& ctx, const Tensor& x, Tensor& y) {
  if (x.ndim() != 4) throw Error("nchw_to_nhwc: x is " + x.description() + ", expected 4-D NCHW");
  check_tensor(ctx, "nchw_to_nhwc", "x", x, x.shape(), x.dtype());
  check_tensor(ctx, "nchw_to_nhwc", "y", y, {x.dim(0), x.dim(2), x.dim(3), x.dim(1)}, x.dtype());
  if (x.numel() == 0) return;
  run_batched_transpose(ctx, "nchw_to_nhwc", x.dim(0), x.dim(1), x.dim(2) * x.dim(3), x, y);
}

void nhwc_to_nchw(Context& ctx, const Tensor& x, Tensor& y) {
  if (x.ndim() != 4) throw Error("nhwc_to_nchw: x is " + x.description() + ", expected 4-D NHWC");
  check_tensor(ctx, "nhwc_to_nchw", "x", x, x.shape(), x.dtype());
  check_tensor(ctx, "nhwc_to_nchw", "y", y, {x.dim(0), x.dim(3), x.dim(1), x.dim(2)}, x.dtype());
  if (x.numel() == 0) return;
  run_batched_transpose(ctx, "nhwc_to_nchw", x.dim(0), x.dim(1) * x.dim(2), x.dim(3), x, y);
}

void permute(Context& ctx, const Tensor& x, const std::vector<int>& order, Tensor& y) {
  check_tensor(ctx, "permute", "x", x, x.shape(), x.dtype());
  check_tensor(ctx, "permute", "y", y, permuted_shape(x.shape(), order), x.dtype());
  if (x.numel() == 0) return;
  const PermutePlan plan = simplify_permutation(x.shape(), order);
  const Shape& s = plan.shape;
  if (plan.order.size() == 1) {
    ctx.copy(y, x);
  } else if (plan.order == std::vector<int>{1, 0}) {
    run_batched_transpose(ctx, "permute", 1, s[0], s[1], x, y);
  } else if (plan.order == std::vector<int>{0, 2, 1}) {
    run_batched_transpose(ctx, "permute", s[0], s[1], s[2], x, y);
  } else {
    const int ndim = int(s.size());
    dispatch(ctx, "permute", x.dtype(),
             on_cuda(DType::f32,
                     [&](auto stream) {
                       if (ndim > cuda::kMaxPermuteAxes) {
                         throw Error("permute: order " + order_str(order) + " on " +
                                     x.description() + " leaves " + std::to_string(ndim) +
                                     " axes after merging; CUDA handles at most " +
                                     std::to_string(cuda::kMaxPermuteAxes));
                       }
                       cuda::permute(ndim, s.data(), plan.order.data(), x.data<float>(),
                                     y.data<float>(), stream);
                     }),
             on_cpu(DType::f32,
                    [&] {
                      cpu::permute(ndim, s.data(), plan.order.data(), x.data<float>(),
                                   y.data<float>(), ctx.num_threads());
                    }),
             on_cpu(DType::f64, [&] {
               ref::permute(ndim, s.data(), plan.order.data(), x.data<double>(), y.data<double>());
             }));
  }
}

}  // namespace crema::kernels
