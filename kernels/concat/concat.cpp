// Concat and slice, dispatch: checks that the parts fit the whole along the axis, then runs the
// CPU or the CUDA path.
#include "kernels/concat/concat.h"

#include <string>

#include "core/error.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

struct Geometry {
  int64_t outer, inner;
};

// The extents add up to the whole's along the axis, and every (non-null) part is the whole but
// for its extent along the axis.
Geometry check_parts(const Context& ctx, const char* op, const Tensor& whole, int axis,
                     const std::vector<int64_t>& extents, const std::vector<const Tensor*>& parts) {
  check_tensor(ctx, op, "whole", whole, whole.shape());
  if (axis < 0 || axis >= whole.ndim()) {
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " +
                whole.description());
  }
  int64_t total = 0;
  std::string listed;
  for (int64_t e : extents) {
    total += e;
    listed += (listed.empty() ? "" : ", ") + std::to_string(e);
  }
  if (total != whole.dim(axis) || extents.size() != parts.size()) {
    throw Error(std::string(op) + ": parts of extents [" + listed + "] along axis " +
                std::to_string(axis) + " do not make up the whole " + whole.description());
  }
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p] == nullptr) continue;
    Shape expected = whole.shape();
    expected[size_t(axis)] = extents[p];
    check_tensor(ctx, op, ("part " + std::to_string(p)).c_str(), *parts[p], expected);
  }
  return {shape_count(whole.shape(), 0, axis), shape_count(whole.shape(), axis + 1, whole.ndim())};
}

}  // namespace

void concat(Context& ctx, const std::vector<const Tensor*>& parts, int axis, Tensor& whole) {
  std::vector<int64_t> extents;
  std::vector<const float*> pointers;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p] == nullptr || !parts[p]->defined() || parts[p]->ndim() != whole.ndim() ||
        axis < 0 || axis >= whole.ndim()) {
      throw Error("concat: part " + std::to_string(p) + " is " +
                  (parts[p] && parts[p]->defined() ? parts[p]->description() : "missing") +
                  ", expected a tensor of the whole's rank " + whole.description() + " and axis " +
                  std::to_string(axis) + " within it");
    }
    extents.push_back(parts[p]->dim(axis));
  }
  const Geometry g = check_parts(ctx, "concat", whole, axis, extents, parts);
  for (const Tensor* t : parts) pointers.push_back(t->data<float>());
  const int num_parts = int(parts.size());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::concat(g.outer, g.inner, num_parts, extents.data(), pointers.data(), whole.data<float>(),
                 cuda::ConcatVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::concat(g.outer, g.inner, num_parts, extents.data(), pointers.data(), whole.data<float>(),
              ctx.num_threads());
}

void slice(Context& ctx, const Tensor& whole, int axis, const std::vector<int64_t>& extents,
           const std::vector<Tensor*>& parts) {
  const Geometry g = check_parts(ctx, "slice", whole, axis, extents,
                                 std::vector<const Tensor*>(parts.begin(), parts.end()));
  std::vector<float*> pointers;
  for (Tensor* t : parts) pointers.push_back(t ? t->data<float>() : nullptr);
  const int num_parts = int(parts.size());
#ifdef CREMA_WITH_CUDA
  if (ctx.device().is_cuda()) {
    cuda::slice(g.outer, g.inner, num_parts, extents.data(), whole.data<float>(), pointers.data(),
                cuda::ConcatVersion::best, ctx.stream());
    return;
  }
#endif
  cpu::slice(g.outer, g.inner, num_parts, extents.data(), whole.data<float>(), pointers.data(),
             ctx.num_threads());
}

}  // namespace crema::kernels
