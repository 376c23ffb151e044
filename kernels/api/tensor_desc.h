// TensorDesc: one tensor as the primitive API (kernels/api/primitives.h) takes it, cuDNN's
// tensor descriptor and its data pointer in one value: a dtype, 1 to 8 dims, a stride per dim
// in elements (any order, none negative; an offset into a larger buffer is a moved pointer) and
// the device the memory lives on. It owns nothing: the caller's memory must outlive the call.
//
//   TensorDesc x = TensorDesc::nchw(ptr, DType::f32, Device::cuda(0), N, C, H, W);
//   TensorDesc t = x.transposed(2, 3);             // a view of x with H and W swapped
//   TensorDesc s = TensorDesc::strided(ptr + 7, DType::f32, dev, {2, 3, 4, 5}, {400, 100, 10, 1});
//
// A 4-D activation's dims are always the logical [N, C, H, W]; NHWC is only its strides
// ([H*W*C, 1, W*C, C]), as PyTorch's channels_last. Validation (validate, below) throws
// crema::Error naming the op and the tensor: "convolution_forward: y: stride 0 of dim 1 (extent
// 3) overlaps: ...", "lrn_forward: y: dtype bf16 not supported by lrn_forward on cuda:0 (f32, and
// f64 on the cpu)".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/device.h"
#include "core/tensor.h"

namespace crema::kernels::api {

// The most dims a descriptor holds (cuDNN's CUDNN_DIM_MAX).
constexpr int kMaxDescDims = 8;

struct TensorDesc {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // in elements, one per dim

  // Row-major packed (the last dim contiguous): what crema's Tensors are.
  static TensorDesc contiguous(const void* data, DType dtype, Device device,
                               std::vector<int64_t> dims);
  // 4-D activations, logical [N, C, H, W]: packed NCHW, or packed channels-last.
  static TensorDesc nchw(const void* data, DType dtype, Device device, int64_t N, int64_t C,
                         int64_t H, int64_t W);
  static TensorDesc nhwc(const void* data, DType dtype, Device device, int64_t N, int64_t C,
                         int64_t H, int64_t W);
  // Any strides (cudnnSetTensorNdDescriptor).
  static TensorDesc strided(const void* data, DType dtype, Device device, std::vector<int64_t> dims,
                            std::vector<int64_t> strides);
  // A crema Tensor as a descriptor (an nhwc 4-D tensor gets channels-last strides).
  static TensorDesc of(const Tensor& t);

  int ndim() const { return int(dims.size()); }
  int64_t numel() const;
  // The same memory with dims a and b swapped (a transposed view).
  TensorDesc transposed(int a, int b) const;
  // Row-major packed, and packed channels-last (4-D only).
  bool is_contiguous() const;
  bool is_nhwc_packed() const;
  // "f32[2, 3, 4, 5] strides [60, 20, 5, 1] on cpu"
  std::string str() const;
};

// Row-major packed strides of `dims`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);

// Throws crema::Error "OP: NAME: ..." unless d has 1..8 dims, none negative, as many strides,
// none negative, no two elements at one address (some ordering of the dims nests each inside the
// next), a data pointer unless empty, and the context's device.
void validate(const Context& ctx, const char* op, const char* name, const TensorDesc& d);
// validate, then: the dtype is f32, or f64 on the cpu (what every primitive here runs), and
// equals `want` when given (the dtype of the op's first tensor).
void validate_float(const Context& ctx, const char* op, const char* name, const TensorDesc& d);
void validate_same_dtype(const char* op, const char* name, const TensorDesc& d, DType want);
// d's dims equal `dims`: "convolution_forward: y: dims [2, 4, 5, 5], expected [2, 4, 6, 6]".
void validate_dims(const char* op, const char* name, const TensorDesc& d,
                   const std::vector<int64_t>& dims);
// Whether two descriptors' address ranges overlap (in-place calls, aliasing).
bool overlaps(const TensorDesc& a, const TensorDesc& b);

}  // namespace crema::kernels::api
