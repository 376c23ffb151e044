// Flat pack and unpack, dispatch: checks every tensor and slice once, then runs the path for the
// context's device and the flat buffer's dtype.
#include "kernels/cast/flat.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/tensor_checks.h"

namespace crema::kernels {
namespace {

// The slices of tensors[k] at offsets[k] of `flat`, checked: f32 tensors on the context's
// device, each inside flat, no two overlapping.
std::vector<FlatSlice> checked_slices(Context& ctx, const char* op,
                                      const std::vector<const Tensor*>& tensors,
                                      const std::vector<int64_t>& offsets, const Tensor& flat) {
  check_tensor(ctx, op, "flat", flat, flat.shape(), flat.dtype());
  if (tensors.size() != offsets.size()) {
    throw Error(std::string(op) + ": " + std::to_string(tensors.size()) + " tensors but " +
                std::to_string(offsets.size()) + " offsets");
  }
  std::vector<FlatSlice> slices;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const std::string name = "tensor " + std::to_string(k);
    if (tensors[k] == nullptr) throw Error(std::string(op) + ": " + name + " is null");
    const Tensor& t = *tensors[k];
    check_tensor(ctx, op, name.c_str(), t, t.shape());
    if (offsets[k] < 0 || offsets[k] + t.numel() > flat.numel()) {
      throw Error(std::string(op) + ": " + name + " (" + std::to_string(t.numel()) +
                  " elements at offset " + std::to_string(offsets[k]) + ") falls outside flat (" +
                  std::to_string(flat.numel()) + " elements)");
    }
    slices.push_back({const_cast<float*>(t.data<float>()), offsets[k], t.numel()});
  }
  std::vector<size_t> order(slices.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return slices[a].offset < slices[b].offset; });
  for (size_t j = 1; j < order.size(); ++j) {
    const FlatSlice& before = slices[order[j - 1]];
    if (before.n > 0 && slices[order[j]].n > 0 &&
        before.offset + before.n > slices[order[j]].offset) {
      throw Error(std::string(op) + ": tensors " + std::to_string(order[j - 1]) + " and " +
                  std::to_string(order[j]) + " overlap in flat");
    }
  }
  return slices;
}

// Runs `gpu(stream)` or `host()` for flat's dtype: f32, bf16 or f16 on either device.
template <class Gpu, class Host>
void dispatch_flat(Context& ctx, const char* op, DType dtype, const Gpu& gpu, const Host& host) {
  dispatch(ctx, op, dtype, on_cuda(DType::f32, gpu), on_cuda(DType::bf16, gpu),
           on_cuda(DType::f16, gpu), on_cpu(DType::f32, host), on_cpu(DType::bf16, host),
           on_cpu(DType::f16, host));
}

}  // namespace

void pack_flat(Context& ctx, const std::vector<const Tensor*>& tensors,
               const std::vector<int64_t>& offsets, Tensor& flat) {
  const char* op = "pack_flat";
  const std::vector<FlatSlice> s = checked_slices(ctx, op, tensors, offsets, flat);
  const int count = int(s.size());
  dispatch_flat(
      ctx, op, flat.dtype(),
      [&](auto stream) { cuda::pack_flat(s.data(), count, flat.dtype(), flat.raw(), stream); },
      [&] { cpu::pack_flat(s.data(), count, flat.dtype(), flat.raw(), ctx.num_threads()); });
}

void unpack_flat(Context& ctx, const Tensor& flat, const std::vector<int64_t>& offsets,
                 const std::vector<Tensor*>& tensors) {
  const char* op = "unpack_flat";
  const std::vector<const Tensor*> read_only(tensors.begin(), tensors.end());
  const std::vector<FlatSlice> s = checked_slices(ctx, op, read_only, offsets, flat);
  const int count = int(s.size());
  dispatch_flat(
      ctx, op, flat.dtype(),
      [&](auto stream) { cuda::unpack_flat(flat.raw(), flat.dtype(), s.data(), count, stream); },
      [&] { cpu::unpack_flat(flat.raw(), flat.dtype(), s.data(), count, ctx.num_threads()); });
}

}  // namespace crema::kernels
