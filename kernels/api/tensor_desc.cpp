#include "kernels/api/tensor_desc.h"

#include <algorithm>
#include <numeric>

#include "core/context.h"
#include "core/error.h"
#include "core/shape.h"

namespace crema::kernels::api {
namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  return shape_str(v);
}

std::string prefix(const char* op, const char* name) {
  return std::string(op) + ": " + name + ": ";
}

}  // namespace

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t step = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    s[k] = step;
    step *= dims[k];
  }
  return s;
}

TensorDesc TensorDesc::contiguous(const void* data, DType dtype, Device device,
                                  std::vector<int64_t> dims) {
  std::vector<int64_t> s = contiguous_strides(dims);
  return strided(data, dtype, device, std::move(dims), std::move(s));
}

TensorDesc TensorDesc::nchw(const void* data, DType dtype, Device device, int64_t N, int64_t C,
                            int64_t H, int64_t W) {
  return contiguous(data, dtype, device, {N, C, H, W});
}

TensorDesc TensorDesc::nhwc(const void* data, DType dtype, Device device, int64_t N, int64_t C,
                            int64_t H, int64_t W) {
  return strided(data, dtype, device, {N, C, H, W}, {H * W * C, 1, W * C, C});
}

TensorDesc TensorDesc::strided(const void* data, DType dtype, Device device,
                               std::vector<int64_t> dims, std::vector<int64_t> strides) {
  TensorDesc d;
  d.data = const_cast<void*>(data);  // a view: inputs are only read (the entry points say which)
  d.dtype = dtype;
  d.device = device;
  d.dims = std::move(dims);
  d.strides = std::move(strides);
  return d;
}

TensorDesc TensorDesc::of(const Tensor& t) {
  const Shape& s = t.shape();
  if (t.ndim() == 4 && t.layout() == Layout::nhwc) {
    return nhwc(t.raw(), t.dtype(), t.device(), s[0], s[1], s[2], s[3]);
  }
  return contiguous(t.raw(), t.dtype(), t.device(), s);
}

int64_t TensorDesc::numel() const {
  return std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<int64_t>());
}

TensorDesc TensorDesc::transposed(int a, int b) const {
  CREMA_CHECK(a >= 0 && b >= 0 && a < ndim() && b < ndim(), "transposed: dim out of range");
  TensorDesc t = *this;
  std::swap(t.dims[size_t(a)], t.dims[size_t(b)]);
  std::swap(t.strides[size_t(a)], t.strides[size_t(b)]);
  return t;
}

bool TensorDesc::is_contiguous() const {
  const std::vector<int64_t> want = contiguous_strides(dims);
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] != 1 && strides[k] != want[k]) return false;  // extent 1: its stride is unused
  }
  return true;
}

bool TensorDesc::is_nhwc_packed() const {
  if (ndim() != 4) return false;
  const TensorDesc packed = nhwc(nullptr, dtype, device, dims[0], dims[1], dims[2], dims[3]);
  for (size_t k = 0; k < 4; ++k) {
    if (dims[k] != 1 && strides[k] != packed.strides[k]) return false;
  }
  return true;
}

std::string TensorDesc::str() const {
  return std::string(dtype_name(dtype)) + ints_str(dims) + " strides " + ints_str(strides) +
         " on " + device.str();
}

void validate(const Context& ctx, const char* op, const char* name, const TensorDesc& d) {
  const std::string at = prefix(op, name);
  if (d.ndim() < 1 || d.ndim() > kMaxDescDims) {
    throw Error(at + std::to_string(d.ndim()) + " dims, expected 1 to " +
                std::to_string(kMaxDescDims));
  }
  if (d.strides.size() != d.dims.size()) {
    throw Error(at + std::to_string(d.strides.size()) + " strides for " +
                std::to_string(d.dims.size()) + " dims");
  }
  for (int k = 0; k < d.ndim(); ++k) {
    if (d.dims[size_t(k)] < 0) throw Error(at + "dims " + ints_str(d.dims) + " has a negative one");
    if (d.strides[size_t(k)] < 0) {
      throw Error(at + "stride " + std::to_string(d.strides[size_t(k)]) + " of dim " +
                  std::to_string(k) + " is negative (strides count elements forward)");
    }
  }
  if (!(d.device == ctx.device())) {
    throw Error(at + "on " + d.device.str() + ", but the context runs on " + ctx.device().str());
  }
  if (d.numel() == 0) return;
  if (d.data == nullptr) throw Error(at + "data is null for " + d.str());
  // No two indices at one address: sorted by stride, each dim must step past the whole span of
  // the dims inside it (extent-1 dims are never stepped).
  std::vector<int> order;
  for (int k = 0; k < d.ndim(); ++k) {
    if (d.dims[size_t(k)] > 1) order.push_back(k);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return d.strides[size_t(a)] < d.strides[size_t(b)]; });
  int64_t span = 1;  // the elements the dims inside reach: max offset + 1
  for (int k : order) {
    const int64_t stride = d.strides[size_t(k)], extent = d.dims[size_t(k)];
    if (stride < span) {
      throw Error(at + "stride " + std::to_string(stride) + " of dim " + std::to_string(k) +
                  " (extent " + std::to_string(extent) + ") overlaps: two elements share an " +
                  "address in " + d.str());
    }
    span = stride * (extent - 1) + span;
  }
}

void validate_float(const Context& ctx, const char* op, const char* name, const TensorDesc& d) {
  validate(ctx, op, name, d);
  const bool ok = d.dtype == DType::f32 || (d.dtype == DType::f64 && ctx.device().is_cpu());
  if (!ok) {
    throw Error(prefix(op, name) + "dtype " + dtype_name(d.dtype) + " not supported by " + op +
                " on " + ctx.device().str() + " (f32, and f64 on the cpu)");
  }
}

void validate_same_dtype(const char* op, const char* name, const TensorDesc& d, DType want) {
  if (d.dtype != want) {
    throw Error(prefix(op, name) + "dtype " + dtype_name(d.dtype) + ", expected " +
                dtype_name(want) + " (the op's first tensor's)");
  }
}

void validate_dims(const char* op, const char* name, const TensorDesc& d,
                   const std::vector<int64_t>& dims) {
  if (d.dims != dims) {
    throw Error(prefix(op, name) + "dims " + ints_str(d.dims) + ", expected " + ints_str(dims));
  }
}

bool overlaps(const TensorDesc& a, const TensorDesc& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  auto range = [](const TensorDesc& d, uintptr_t* lo, uintptr_t* hi) {
    int64_t last = 0;
    for (size_t k = 0; k < d.dims.size(); ++k) last += (d.dims[k] - 1) * d.strides[k];
    *lo = reinterpret_cast<uintptr_t>(d.data);
    *hi = *lo + uintptr_t(last + 1) * dtype_size(d.dtype);
  };
  uintptr_t alo, ahi, blo, bhi;
  range(a, &alo, &ahi);
  range(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

}  // namespace crema::kernels::api
