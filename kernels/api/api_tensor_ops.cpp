// The primitive API's tensor operations and GEMM. Transform, add, set and scale walk the
// descriptors' strides directly (transform_strided: no scratch); op-tensor, reduce-tensor and GEMM
// stage like the others (stage.h), with the kernels' own alpha and beta where y is packed.
#include "core/error.h"
#include "kernels/api/primitives.h"
#include "kernels/api/stage.h"
#include "kernels/tensor_ops/tensor_ops.h"

namespace crema::kernels::api {

using stage::blend_into;
using stage::Output;
using stage::packed_input;
using stage::require_rank;
using stage::validate_all;
using stage::Writes;

namespace {

// `b`'s dims against `full`'s: the same rank, each extent full's or 1 (broadcast).
void check_broadcast(const char* op, const char* name, const TensorDesc& b, const char* full_name,
                     const TensorDesc& full) {
  bool ok = b.ndim() == full.ndim();
  for (int k = 0; ok && k < b.ndim(); ++k) {
    ok = b.dims[size_t(k)] == full.dims[size_t(k)] || b.dims[size_t(k)] == 1;
  }
  if (!ok) {
    throw Error(std::string(op) + ": " + name + ": dims " + shape_str(b.dims) + ", expected " +
                full_name + "'s rank with each extent " + full_name + "'s (" +
                shape_str(full.dims) + ") or 1");
  }
}

// A 2-D operand as GEMM reads it: packed row-major as it is; column-major (a transposed view)
// as its packed transpose with the flag flipped; otherwise gathered.
Tensor gemm_operand(Context& ctx, const TensorDesc& d, bool* trans) {
  const bool column_major = d.dims[0] == 1 || d.strides[0] == 1;
  const bool packed_columns = column_major && (d.dims[1] == 1 || d.strides[1] == d.dims[0]);
  if (!d.is_contiguous() && packed_columns && stage::aligned(d)) {
    *trans = !*trans;
    return Tensor::borrow(d.data, {d.dims[1], d.dims[0]}, d.dtype, d.device);
  }
  return packed_input(ctx, d);
}

}  // namespace

void op_tensor(Context& ctx, OpTensorOp op, double alpha1, const TensorDesc& a, double alpha2,
               const TensorDesc* b, double beta, const TensorDesc& c) {
  const char* name = "op_tensor";
  const bool unary = kernels::detail::op_tensor_unary(op);
  validate_all(ctx, name, {{"a", &a}, {"b", unary ? nullptr : b}, {"c", &c}});
  validate_dims(name, "a", a, c.dims);
  if (!unary && b == nullptr) throw Error(std::string(name) + ": b: absent, and the op reads it");
  if (!unary) check_broadcast(name, "b", *b, "c", c);
  const Tensor at = packed_input(ctx, a);
  const Tensor bt = unary ? Tensor() : packed_input(ctx, *b);
  Output out(ctx, c, 1.0, beta, Writes::blended, {&a, unary ? nullptr : b});
  kernels::op_tensor(ctx, op, alpha1, at, alpha2, bt, out.beta(), out.tensor());
  out.finish();
}

void add_tensor(Context& ctx, double alpha, const TensorDesc& b, double beta, const TensorDesc& y) {
  const char* op = "add_tensor";
  validate_all(ctx, op, {{"b", &b}, {"y", &y}});
  check_broadcast(op, "b", b, "y", y);
  std::vector<int64_t> s = b.strides;  // b walked over y's dims, still along its broadcast dims
  for (size_t k = 0; k < s.size(); ++k) {
    if (b.dims[k] != y.dims[k]) s[k] = 0;
  }
  blend_into(ctx, alpha, b, s, beta, y);
}

void reduce_tensor(Context& ctx, ReduceOp op, double alpha, const TensorDesc& x, double beta,
                   const TensorDesc& y, const TensorDesc* indices) {
  const char* name = "reduce_tensor";
  validate_all(ctx, name, {{"x", &x}, {"y", &y}, {"indices", indices}});
  check_broadcast(name, "y", y, "x", x);
  if (indices != nullptr) validate_dims(name, "indices", *indices, y.dims);
  const Tensor xt = packed_input(ctx, x);
  Output out(ctx, y, alpha, beta, Writes::blended, {&x, indices});
  if (indices == nullptr) {
    kernels::reduce_tensor(ctx, op, out.alpha(), xt, out.beta(), out.tensor(), nullptr);
    return out.finish();
  }
  Output idx(ctx, *indices, 1.0, 0.0, Writes::whole, {&x, &y});
  kernels::reduce_tensor(ctx, op, out.alpha(), xt, out.beta(), out.tensor(), &idx.tensor());
  out.finish();
  idx.finish();
}

void transform_tensor(Context& ctx, double alpha, const TensorDesc& x, double beta,
                      const TensorDesc& y) {
  const char* op = "transform_tensor";
  validate_all(ctx, op, {{"x", &x}, {"y", &y}});
  validate_dims(op, "y", y, x.dims);
  blend_into(ctx, alpha, x, x.strides, beta, y);
}

void set_tensor(Context& ctx, const TensorDesc& y, double value) {
  const char* op = "set_tensor";
  validate_all(ctx, op, {{"y", &y}});
  Tensor one = ctx.empty({1}, y.dtype);
  kernels::set_tensor(ctx, one, value);
  transform_strided(ctx, y.dtype, y.dims, std::vector<int64_t>(y.dims.size(), 0), one.raw(),
                    y.strides, 1.0, 0.0, y.data);
}

void scale_tensor(Context& ctx, const TensorDesc& y, double alpha) {
  const char* op = "scale_tensor";
  validate_all(ctx, op, {{"y", &y}});
  transform_strided(ctx, y.dtype, y.dims, y.strides, y.data, y.strides, alpha, 0.0, y.data);
}

void gemm(Context& ctx, bool trans_a, bool trans_b, double alpha, const TensorDesc& a,
          const TensorDesc& b, double beta, const TensorDesc& c, cuda::GemmMath math) {
  const char* op = "gemm";
  validate_all(ctx, op, {{"a", &a}, {"b", &b}, {"c", &c}});
  require_rank(op, "a", a, 2);
  require_rank(op, "b", b, 2);
  require_rank(op, "c", c, 2);
  bool ta = trans_a, tb = trans_b;
  const Tensor at = gemm_operand(ctx, a, &ta), bt = gemm_operand(ctx, b, &tb);
  Output out(ctx, c, alpha, beta, Writes::blended, {&a, &b});
  kernels::gemm(ctx, ta, tb, float(out.alpha()), at, bt, float(out.beta()), out.tensor(), math);
  out.finish();
}

}  // namespace crema::kernels::api
