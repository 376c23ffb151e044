// Tensor: an n-dimensional array with a shape, a dtype and a device, over reference-counted
// storage. Copying a Tensor shares the storage (like a PyTorch tensor); clone() copies the data.
//
// float32 is the training dtype; float64 exists for references and gradient checks on the CPU;
// bf16 and f16 (core/float16.h: bf16_t, f16_t) are storage for mixed precision, which the ops that
// implement them widen to float to compute (kernels::cast converts between dtypes).
// Element access goes through data<T>(), which checks that T matches the dtype.
//
// A 4-D tensor's shape is always the logical [N, C, H, W]; its layout says how memory orders it:
// nchw (channels-first, Caffe's and PyTorch's default: element (n, c, h, w) at
// ((n*C + c)*H + h)*W + w) or nhwc (channels-last, what tensor cores read best: at
// ((n*H + h)*W + w)*C + c), as PyTorch's channels_last keeps the shape and changes the strides.
// A filter [K, C/groups, R, S] in nhwc is KRSC. Other ranks have one order; ops ignore their
// layout. reshape, view and clone keep the layout; set_layout only relabels (it moves no data:
// kernels::permute or a Convert layer does that).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/float16.h"
#include "core/shape.h"

namespace crema {

class Allocator;

enum class DType { f32, f64, bf16, f16 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

enum class Layout { nchw, nhwc };
const char* layout_name(Layout layout);  // "nchw", "nhwc"

template <class T>
DType dtype_of();
template <>
inline DType dtype_of<float>() {
  return DType::f32;
}
template <>
inline DType dtype_of<double>() {
  return DType::f64;
}
template <>
inline DType dtype_of<bf16_t>() {
  return DType::bf16;
}
template <>
inline DType dtype_of<f16_t>() {
  return DType::f16;
}

class Tensor {
 public:
  Tensor() = default;
  // Uninitialized storage for `shape` on `device`, from `allocator` (host memory when null).
  explicit Tensor(Shape shape, DType dtype = DType::f32, Device device = Device::cpu(),
                  Allocator* allocator = nullptr);

  // Host tensors initialized from values (tests, fixtures).
  static Tensor from_vector(Shape shape, const std::vector<float>& values);
  // A tensor over memory the caller owns (on `device`, laid out contiguously in `layout`), which
  // it never frees: how the primitive API (kernels/api/) hands a caller's buffers to the kernels
  // without a copy. The memory must outlive every copy of the tensor; reshape may not grow it.
  static Tensor borrow(void* data, Shape shape, DType dtype, Device device,
                       Layout layout = Layout::nchw);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return int(shape_.size()); }
  // Extent of axis `axis`; negative axes count from the end (-1 is the last).
  int64_t dim(int axis) const;
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  void set_layout(Layout layout) { layout_ = layout; }
  Device device() const { return device_; }
  std::string description()
      const;  // "f32[64, 20, 24, 24] on cpu", "bf16[8, 64, 56, 56] nhwc on cuda:0"

  template <class T>
  T* data();
  template <class T>
  const T* data() const;
  void* raw() { return storage_ ? storage_->ptr : nullptr; }
  const void* raw() const { return storage_ ? storage_->ptr : nullptr; }

  // Gives the tensor a new shape. Keeps the storage when it is large enough and not more than
  // twice too large; otherwise allocates anew (contents are then undefined).
  void reshape(const Shape& shape);
  // A tensor sharing this storage with another shape of the same number of elements.
  Tensor view(const Shape& shape) const;
  // Deep copy on the same device.
  Tensor clone() const;
  // Copies all elements from `src` (same numel and dtype), synchronously, between any devices.
  // (Copies ordered on a context's stream: Context::copy.)
  void copy_from(const Tensor& src);
  // True when both share storage.
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }

  // The elements as floats on the host (a synchronous copy for device tensors; f64 rounded,
  // bf16 and f16 widened exactly): tests, scalars.
  std::vector<float> to_vector() const;
  // Host tensors only, every dtype (rounded to nearest even for bf16 and f16); device tensors are
  // filled through Context::fill, on the stream.
  void fill(float value);

 private:
  struct Storage {
    void* ptr = nullptr;
    size_t bytes = 0;
    Allocator* allocator = nullptr;
    ~Storage();
  };
  void check_dtype(DType wanted) const;

  Shape shape_;
  DType dtype_ = DType::f32;
  Layout layout_ = Layout::nchw;
  Device device_;
  Allocator* allocator_ = nullptr;
  std::shared_ptr<Storage> storage_;
};

template <class T>
T* Tensor::data() {
  check_dtype(dtype_of<T>());
  return static_cast<T*>(raw());
}
template <class T>
const T* Tensor::data() const {
  check_dtype(dtype_of<T>());
  return static_cast<const T*>(raw());
}

}  // namespace crema
