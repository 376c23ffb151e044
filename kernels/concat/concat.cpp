// Concat and slice, dispatch: checks that the parts fit the whole along the axis, then runs the
// path for the device and dtype (float32: cpu:: or cuda::; bf16 and f16: cuda::; float64 on the
// CPU: the reference). The layout is resolved here: a 4-D nhwc tensor is viewed in its memory
// order [N, H, W, C], so channels are its last axis (outer = N*H*W, inner = 1: rows of C_p
// contiguous values per part), and every implementation, which sees only [outer, K, inner],
// serves both layouts.
#include "kernels/concat/concat.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

struct Geometry {
  int64_t outer, inner;
};

// Where logical axis `axis` of a tensor of `shape` in `layout` lies in memory, and the shape in
// memory order: nhwc moves a 4-D tensor's C (axis 1) last.
struct MemoryView {
  Shape shape;
  int axis;
};
MemoryView memory_view(const Shape& shape, Layout layout, int axis) {
  if (layout != Layout::nhwc || shape.size() != 4) return {shape, axis};
  constexpr int kMemoryAxis[4] = {0, 3, 1, 2};  // n, c, h, w -> their place in n, h, w, c
  return {{shape[0], shape[2], shape[3], shape[1]}, kMemoryAxis[axis]};
}

// The extents add up to the whole's along the axis, and every (non-null) part is the whole but
// for its extent along the axis.
Geometry check_parts(const Context& ctx, const char* op, const Tensor& whole, int axis,
                     const std::vector<int64_t>& extents, const std::vector<const Tensor*>& parts) {
  check_tensor(ctx, op, "whole", whole, whole.shape(), whole.dtype());
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
    const std::string name = "part " + std::to_string(p);
    check_tensor(ctx, op, name.c_str(), *parts[p], expected, whole.dtype());
    check_layout(op, name.c_str(), *parts[p], whole.layout());
  }
  const MemoryView m = memory_view(whole.shape(), whole.layout(), axis);
  return {shape_count(m.shape, 0, m.axis), shape_count(m.shape, m.axis + 1, int(m.shape.size()))};
}

// The parts' element pointers (null for a part that is skipped).
template <class T, class Part>
std::vector<T*> data_of(const std::vector<Part*>& parts) {
  std::vector<T*> pointers;
  for (Part* t : parts) {
    pointers.push_back(t ? t->template data<std::remove_const_t<T>>() : nullptr);
  }
  return pointers;
}

}  // namespace

void concat(Context& ctx, const std::vector<const Tensor*>& parts, int axis, Tensor& whole) {
  std::vector<int64_t> extents;
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
  concat(ctx, parts, axis, extents, whole);
}

void concat(Context& ctx, const std::vector<const Tensor*>& parts, int axis,
            const std::vector<int64_t>& extents, Tensor& whole) {
  const Geometry g = check_parts(ctx, "concat", whole, axis, extents, parts);
  const int num_parts = int(parts.size());
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::concat(g.outer, g.inner, num_parts, extents.data(), data_of<const T>(parts).data(),
                 whole.data<T>(), cuda::ConcatVersion::best, stream);
  };
  dispatch(ctx, "concat", whole.dtype(), on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::concat(g.outer, g.inner, num_parts, extents.data(),
                                data_of<const float>(parts).data(), whole.data<float>(),
                                ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::concat(g.outer, g.inner, num_parts, extents.data(),
                         data_of<const double>(parts).data(), whole.data<double>());
           }));
}

void slice(Context& ctx, const Tensor& whole, int axis, const std::vector<int64_t>& extents,
           const std::vector<Tensor*>& parts) {
  const Geometry g = check_parts(ctx, "slice", whole, axis, extents,
                                 std::vector<const Tensor*>(parts.begin(), parts.end()));
  const int num_parts = int(parts.size());
  const auto gpu = [&](auto element, auto stream) {
    using T = decltype(element);
    cuda::slice(g.outer, g.inner, num_parts, extents.data(), whole.data<T>(),
                data_of<T>(parts).data(), cuda::ConcatVersion::best, stream);
  };
  dispatch(ctx, "slice", whole.dtype(), on_cuda_typed<float>(gpu), on_cuda_typed<bf16_t>(gpu),
           on_cuda_typed<f16_t>(gpu),
           on_cpu(DType::f32,
                  [&] {
                    cpu::slice(g.outer, g.inner, num_parts, extents.data(), whole.data<float>(),
                               data_of<float>(parts).data(), ctx.num_threads());
                  }),
           on_cpu(DType::f64, [&] {
             ref::slice(g.outer, g.inner, num_parts, extents.data(), whole.data<double>(),
                        data_of<double>(parts).data());
           }));
}

}  // namespace crema::kernels
