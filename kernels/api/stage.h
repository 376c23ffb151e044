// How an entry point of the primitive API feeds crema's Tensor-level kernels, which take packed
// tensors and (most of them) write their output whole:
//   an input already packed in the layout the kernel reads (and, on a GPU, 16-byte aligned) is
//   borrowed (Tensor::borrow: no copy);
//   any other is gathered into a packed scratch tensor from the context's allocator
//   (transform_strided, kernels/tensor_ops/);
//   an output is written in place when it is packed, overlaps no input and the blend is the
//   kernel's own (alpha 1, beta 0 for a kernel that writes; beta 0 or 1 for one that
//   accumulates, after zeroing for 0; any for a kernel that blends itself); otherwise the kernel
//   writes a packed scratch, and one strided pass blends it in: y = alpha * t + beta * y
//   (y not read when beta is 0, so NaN in y does not leak).
#pragma once

#include <initializer_list>

#include "core/context.h"
#include "core/tensor.h"
#include "kernels/api/tensor_desc.h"

namespace crema::kernels::api::stage {

// One descriptor of a call, by the name its messages give it (null: an absent optional one).
struct Named {
  const char* name;
  const TensorDesc* desc;
};
// validate_float on each present descriptor, each of the first's dtype; returns that dtype.
DType validate_all(const Context& ctx, const char* op, std::initializer_list<Named> descs);
// d has exactly `rank` dims (at least `rank` when at_least).
void require_rank(const char* op, const char* name, const TensorDesc& d, int rank,
                  bool at_least = false);

// Whether the kernels may take d's memory as their own tensor's: on a GPU 16-byte aligned, as the
// allocator's tensors are (vector loads: a kernel that checks falls back, but not every one need).
bool aligned(const TensorDesc& d);

// The layout an op with an NHWC path (convolution, pooling, spatial batch norm) runs in for its
// first activation `x`: nhwc when x is packed channels-last (and not also packed NCHW), else nchw.
Layout layout_for(const TensorDesc& x);
// The packed strides of dims in `layout` (nhwc: 4-D only, [H*W*C, 1, W*C, C]).
std::vector<int64_t> packed_strides(const Shape& dims, Layout layout);

// The packed tensor (in `layout`) a kernel reads for `d` (already validated): borrowed, or
// gathered into scratch (always when `copy`).
Tensor packed_input(Context& ctx, const TensorDesc& d, Layout layout = Layout::nchw,
                    bool copy = false);
// A parameter the kernel reads or updates in place (batch norm's statistics): it must be packed
// and hold numel(shape) elements; borrowed with `shape`.
Tensor packed_param(const char* op, const char* name, const TensorDesc& d, const Shape& shape);

// y = alpha * t + beta * y, t packed (in its layout) with y's dims (y not read when beta is 0).
void blend_packed(Context& ctx, const Tensor& t, const TensorDesc& y, double alpha, double beta);

// y = alpha * x + beta * y with x walked by x_strides over y's dims (0 along a broadcast dim):
// straight between the descriptors when x is y itself or apart from it, else x gathered first.
void blend_into(Context& ctx, double alpha, const TensorDesc& x,
                const std::vector<int64_t>& x_strides, double beta, const TensorDesc& y);

// What the kernel does to its output.
enum class Writes {
  whole,        // y = op(...)
  accumulated,  // y += op(...)
  blended,      // y = alpha * op(...) + beta * y, alpha and beta passed to the kernel
};

// One output of a call: what the kernel writes into (tensor(), with the alpha() and beta() to pass
// a Writes::blended kernel), then finish() blends it into the caller's descriptor if staged.
// The kernel's output is packed in `layout`.
class Output {
 public:
  Output(Context& ctx, const TensorDesc& y, double alpha, double beta, Writes writes,
         std::initializer_list<const TensorDesc*> inputs, Layout layout = Layout::nchw);
  // The kernel's output, viewed with `shape` when given (same element count: [K] for [1, K, 1, 1]).
  Tensor& tensor() { return tensor_; }
  Tensor tensor(const Shape& shape) { return tensor_.view(shape); }
  double alpha() const { return staged_ ? 1.0 : alpha_; }
  double beta() const { return staged_ ? 0.0 : beta_; }
  bool staged() const { return staged_; }
  void finish();

 private:
  Context& ctx_;
  TensorDesc y_;
  double alpha_, beta_;
  bool staged_ = false;
  Tensor tensor_;
};

}  // namespace crema::kernels::api::stage
