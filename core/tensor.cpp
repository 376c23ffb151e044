#include "core/tensor.h"

#include <cstring>

#include "core/allocator.h"
#include "core/cuda_runtime.h"
#include "core/error.h"

namespace crema {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::bf16:
    case DType::f16:
      return 2;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
  }
  return "?";
}

const char* layout_name(Layout layout) {
  return layout == Layout::nhwc ? "nhwc" : "nchw";
}

Tensor::Storage::~Storage() {
  if (ptr != nullptr && allocator != nullptr) allocator->deallocate(ptr, bytes);  // null: borrowed
}

Tensor::Tensor(Shape shape, DType dtype, Device device, Allocator* allocator)
    : shape_(std::move(shape)), dtype_(dtype), device_(device), allocator_(allocator) {
  for (int64_t extent : shape_) {
    if (extent < 0) throw Error("cannot create a tensor of shape " + shape_str(shape_));
  }
  if (allocator_ == nullptr) {
    CREMA_CHECK(device_.is_cpu(), "a device tensor needs the device's allocator");
    allocator_ = &host_allocator();
  }
  storage_ = std::make_shared<Storage>();
  storage_->allocator = allocator_;
  storage_->bytes = nbytes();
  storage_->ptr = allocator_->allocate(storage_->bytes);
}

Tensor Tensor::borrow(void* data, Shape shape, DType dtype, Device device, Layout layout) {
  Tensor t;
  for (int64_t extent : shape) {
    if (extent < 0) throw Error("cannot borrow a tensor of shape " + shape_str(shape));
  }
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.layout_ = layout;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>();
  t.storage_->ptr = data;
  t.storage_->bytes = t.nbytes();  // allocator stays null: the storage frees nothing
  return t;
}

Tensor Tensor::from_vector(Shape shape, const std::vector<float>& values) {
  Tensor t(std::move(shape));
  CREMA_CHECK(size_t(t.numel()) == values.size(), "from_vector: shape and value count differ");
  // An empty vector's data() may be null, which memcpy may not be given even for 0 bytes.
  if (t.nbytes() > 0) std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

int64_t Tensor::dim(int axis) const {
  const int n = ndim();
  const int a = axis < 0 ? axis + n : axis;
  CREMA_CHECK(a >= 0 && a < n,
              "axis " + std::to_string(axis) + " out of range for " + description());
  return shape_[a];
}

std::string Tensor::description() const {
  const char* order = layout_ == Layout::nhwc ? " nhwc" : "";
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + order + " on " + device_.str();
}

void Tensor::check_dtype(DType wanted) const {
  CREMA_CHECK(dtype_ == wanted, std::string("tensor is ") + dtype_name(dtype_) + ", accessed as " +
                                    dtype_name(wanted));
}

void Tensor::reshape(const Shape& shape) {
  const size_t wanted = size_t(shape_numel(shape)) * dtype_size(dtype_);
  if (storage_ != nullptr && wanted <= storage_->bytes && 2 * wanted >= storage_->bytes) {
    shape_ = shape;
    return;
  }
  const Layout layout = layout_;
  *this = Tensor(shape, dtype_, device_, allocator_);
  layout_ = layout;
}

Tensor Tensor::view(const Shape& shape) const {
  CREMA_CHECK(shape_numel(shape) == numel(),
              "view " + shape_str(shape) + " of " + description() + " changes the element count");
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(shape_, dtype_, device_, allocator_);
  t.layout_ = layout_;
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  CREMA_CHECK(src.numel() == numel() && src.dtype() == dtype_,
              "copy_from " + src.description() + " into " + description());
  if (nbytes() == 0) return;
  if (src.device().is_cpu() && device_.is_cpu()) {
    std::memcpy(raw(), src.raw(), nbytes());
  } else {
    // Synchronous, on the legacy stream of the GPU involved (the destination's when both are),
    // which waits for that GPU's blocking streams: the Contexts' (core/context.h).
    const gpu::DeviceGuard guard((device_.is_cuda() ? device_ : src.device()).index);
    gpu::copy(raw(), src.raw(), nbytes(), nullptr);
  }
}

namespace {

float widen(double v) {
  return float(v);
}
float widen(bf16_t v) {
  return to_f32(v);
}
float widen(f16_t v) {
  return to_f32(v);
}

template <class T>
void widen_into(const T* p, std::vector<float>& out) {
  for (size_t i = 0; i < out.size(); ++i) out[i] = widen(p[i]);
}

template <class T>
void fill_with(T* p, int64_t n, T value) {
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

}  // namespace

std::vector<float> Tensor::to_vector() const {
  if (!device_.is_cpu()) {
    Tensor host(shape_, dtype_);
    host.copy_from(*this);
    return host.to_vector();
  }
  std::vector<float> out(static_cast<size_t>(numel()));
  switch (dtype_) {
    case DType::f32:
      if (!out.empty()) std::memcpy(out.data(), raw(), nbytes());
      break;
    case DType::f64:
      widen_into(data<double>(), out);
      break;
    case DType::bf16:
      widen_into(data<bf16_t>(), out);
      break;
    case DType::f16:
      widen_into(data<f16_t>(), out);
      break;
  }
  return out;
}

void Tensor::fill(float value) {
  CREMA_CHECK(device_.is_cpu(), "fill on " + description());
  switch (dtype_) {
    case DType::f32:
      return fill_with(data<float>(), numel(), value);
    case DType::f64:
      return fill_with(data<double>(), numel(), double(value));
    case DType::bf16:
      return fill_with(data<bf16_t>(), numel(), to_bf16(value));
    case DType::f16:
      return fill_with(data<f16_t>(), numel(), to_f16(value));
  }
}

}  // namespace crema
