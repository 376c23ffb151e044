#include "kernels/api/stage.h"

#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/shape.h"
#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::api::stage {

DType validate_all(const Context& ctx, const char* op, std::initializer_list<Named> descs) {
  const TensorDesc* first = nullptr;
  for (const Named& n : descs) {
    if (n.desc == nullptr) continue;
    validate_float(ctx, op, n.name, *n.desc);
    if (first == nullptr) first = n.desc;
    validate_same_dtype(op, n.name, *n.desc, first->dtype);
  }
  return first != nullptr ? first->dtype : DType::f32;
}

void require_rank(const char* op, const char* name, const TensorDesc& d, int rank, bool at_least) {
  if (d.ndim() == rank || (at_least && d.ndim() > rank)) return;
  throw Error(std::string(op) + ": " + name + ": " + std::to_string(d.ndim()) + " dims, expected " +
              (at_least ? "at least " : "") + std::to_string(rank));
}

Tensor packed_param(const char* op, const char* name, const TensorDesc& d, const Shape& shape) {
  if (d.numel() != shape_numel(shape)) {
    throw Error(std::string(op) + ": " + name + ": dims " + shape_str(d.dims) + ", expected " +
                std::to_string(shape_numel(shape)) + " elements " + shape_str(shape));
  }
  if (!d.is_contiguous()) {
    throw Error(std::string(op) + ": " + name + ": strides " + shape_str(d.strides) +
                " not supported: this parameter must be packed (row-major)");
  }
  return Tensor::borrow(d.data, shape, d.dtype, d.device);
}

bool aligned(const TensorDesc& d) {
  return d.device.is_cpu() || reinterpret_cast<uintptr_t>(d.data) % 16 == 0;
}

Layout layout_for(const TensorDesc& x) {
  return x.ndim() == 4 && x.is_nhwc_packed() && !x.is_contiguous() ? Layout::nhwc : Layout::nchw;
}

std::vector<int64_t> packed_strides(const Shape& dims, Layout layout) {
  if (layout == Layout::nhwc && dims.size() == 4) {
    return {dims[2] * dims[3] * dims[1], 1, dims[3] * dims[1], dims[1]};
  }
  return contiguous_strides(dims);
}

namespace {

bool packed_in(const TensorDesc& d, Layout layout) {
  return layout == Layout::nhwc && d.ndim() == 4 ? d.is_nhwc_packed() : d.is_contiguous();
}

}  // namespace

Tensor packed_input(Context& ctx, const TensorDesc& d, Layout layout, bool copy) {
  if (packed_in(d, layout) && aligned(d) && !copy) {
    return Tensor::borrow(d.data, d.dims, d.dtype, d.device, layout);
  }
  Tensor t = ctx.empty(d.dims, d.dtype);
  t.set_layout(layout);
  transform_strided(ctx, d.dtype, d.dims, d.strides, d.data, packed_strides(d.dims, layout), 1.0,
                    0.0, t.raw());
  return t;
}

Output::Output(Context& ctx, const TensorDesc& y, double alpha, double beta, Writes writes,
               std::initializer_list<const TensorDesc*> inputs, Layout layout)
    : ctx_(ctx), y_(y), alpha_(alpha), beta_(beta) {
  bool in_place = packed_in(y, layout) && aligned(y);
  for (const TensorDesc* in : inputs) {
    if (in != nullptr && overlaps(*in, y)) in_place = false;
  }
  switch (writes) {
    case Writes::whole:
      in_place = in_place && alpha == 1.0 && beta == 0.0;
      break;
    case Writes::accumulated:
      in_place = in_place && alpha == 1.0 && (beta == 0.0 || beta == 1.0);
      break;
    case Writes::blended:
      break;
  }
  staged_ = !in_place;
  if (staged_) {
    tensor_ = ctx.empty(y.dims, y.dtype);
    tensor_.set_layout(layout);
  } else {
    tensor_ = Tensor::borrow(y.data, y.dims, y.dtype, y.device, layout);
  }
  // An accumulating kernel adds into zeros unless it accumulates into the caller's y (beta 1).
  if (writes == Writes::accumulated && (staged_ || beta == 0.0)) set_tensor(ctx, tensor_, 0.0);
}

void blend_packed(Context& ctx, const Tensor& t, const TensorDesc& y, double alpha, double beta) {
  transform_strided(ctx, y.dtype, y.dims, packed_strides(y.dims, t.layout()), t.raw(), y.strides,
                    alpha, beta, y.data);
}

void blend_into(Context& ctx, double alpha, const TensorDesc& x,
                const std::vector<int64_t>& x_strides, double beta, const TensorDesc& y) {
  if (overlaps(x, y) && !(x.data == y.data && x_strides == y.strides)) {
    // A partial overlap: x's packed copy, walked with stride 0 along its broadcast dims.
    const Tensor xt = packed_input(ctx, x, Layout::nchw, true);
    std::vector<int64_t> s = contiguous_strides(x.dims);
    for (size_t k = 0; k < s.size(); ++k) {
      if (x.dims[k] != y.dims[k]) s[k] = 0;
    }
    return transform_strided(ctx, y.dtype, y.dims, s, xt.raw(), y.strides, alpha, beta, y.data);
  }
  transform_strided(ctx, y.dtype, y.dims, x_strides, x.data, y.strides, alpha, beta, y.data);
}

void Output::finish() {
  if (staged_) blend_packed(ctx_, tensor_, y_, alpha_, beta_);
}

}  // namespace crema::kernels::api::stage
