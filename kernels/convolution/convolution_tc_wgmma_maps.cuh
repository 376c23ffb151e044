// The tensor maps of the wgmma + TMA convolutions (host side; convolution_tc_wgmma.cuh has the
// kernels and their TMA loads): the driver's encoders, looked up at run time, and the maps the
// passes build -- a tiled view (tensor_map: boxes of 128 bytes of channels by rows, optionally
// stepping strides), a matrix (matrix_map), and the im2col view (im2col_map: a convolution's
// output positions walked flat, each reading its window's pixel at a tap's offset). Included by
// sm_90a files only, through convolution_tc_wgmma.cuh.
#pragma once

#include <cuda.h>  // CUtensorMap and the encoders' signatures; reached through cudart
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/convolution/convolution_tc.h"

namespace crema::kernels::cuda::tc::wg {

// A box row: 128 bytes of channels, the 128B swizzle's span.
constexpr int kRowBytes = 128;

// A driver function by name, through the runtime (no -lcuda link); each encoder below looks
// its own up once.
template <class Fn>
Fn driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess || fn == nullptr) {
    throw DeviceError(std::string("conv2d_tc (wgmma): the driver has no ") + name);
  }
  return reinterpret_cast<Fn>(fn);
}
inline auto tensor_map_encoder() {
  static const auto encode =
      driver_function<decltype(&cuTensorMapEncodeTiled)>("cuTensorMapEncodeTiled");
  return encode;
}
inline auto im2col_map_encoder() {
  static const auto encode =
      driver_function<decltype(&cuTensorMapEncodeIm2col)>("cuTensorMapEncodeIm2col");
  return encode;
}

// What a tensor map reads: the driver's element type and its bytes. f32 tensors are read as
// FLOAT32, bits unchanged (the tensor cores truncate them to TF32).
struct MapType {
  CUtensorMapDataType type;
  int bytes;
  int slab() const { return kRowBytes / bytes; }  // channels in a 128-byte row
};
inline MapType map_type(TcType type) {
  return {type == TcType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
          2};
}
inline constexpr MapType kF32Map{CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4};

// A tensor map: `rank` dimensions (innermost, the channels, first; sizes `dims`, byte strides of
// dimensions 1.. `strides`, multiples of 16), boxes `box` (128 bytes of channels first: 64
// 16-bit, 32 f32), written 128B-swizzled, zeros outside the tensor. `steps` (null: all 1): a box
// reads every steps[i]-th element of dimension i from its corner, box[i] / steps[i] of them (the
// driver's elementStrides; the channels' step must be 1), each outside the tensor a zero.
inline CUtensorMap tensor_map(MapType type, const void* base, int rank, const cuuint64_t* dims,
                              const cuuint64_t* strides, const cuuint32_t* box,
                              const cuuint32_t* steps = nullptr) {
  CUtensorMap map;
  const cuuint32_t ones[4] = {1, 1, 1, 1};
  const cuuint32_t* element_strides = steps != nullptr ? steps : ones;
  const CUresult r = tensor_map_encoder()(
      &map, type.type, cuuint32_t(rank), const_cast<void*>(base), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw DeviceError("conv2d_tc (wgmma): cuTensorMapEncodeTiled failed (CUresult " +
                      std::to_string(int(r)) + ")");
  }
  return map;
}

inline CUtensorMap tensor_map(TcType type, const void* base, int rank, const cuuint64_t* dims,
                              const cuuint64_t* strides, const cuuint32_t* box,
                              const cuuint32_t* steps = nullptr) {
  return tensor_map(map_type(type), base, rank, dims, strides, box, steps);
}

// A row-major [rows, cols] matrix: boxes of 128 bytes of columns x box_rows rows.
inline CUtensorMap matrix_map(MapType type, const void* base, int64_t rows, int64_t cols,
                              int box_rows) {
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(cols) * cuuint64_t(type.bytes)};
  const cuuint32_t box[2] = {cuuint32_t(type.slab()), cuuint32_t(box_rows)};
  return tensor_map(type, base, 2, dims, strides, box);
}
inline CUtensorMap matrix_map(TcType type, const void* base, int64_t rows, int64_t cols,
                              int box_rows) {
  return matrix_map(map_type(type), base, rows, cols, box_rows);
}

// An NHWC tensor [N, height, width, channels] read the im2col way (tma_load_im2col_4d):
// `positions` a load, 128 bytes of channels each (64 16-bit ones), 128B-swizzled. A position walks
// w from lower_w to width - 1 + upper_w in steps of step_w, then the same for h (lower_h ..
// height - 1 + upper_h, step_h), then n: a convolution's output positions, each the corner of its
// window, with lower = -pad and upper = pad - (taps - 1) * dilation. The corners must lie within
// [-128, 127], the steps within 1..8.
inline CUtensorMap im2col_map(MapType t, const void* base, int64_t N, int64_t height, int64_t width,
                              int64_t channels, int lower_h, int lower_w, int upper_h, int upper_w,
                              int step_h, int step_w, int positions) {
  const cuuint64_t dims[4] = {cuuint64_t(channels), cuuint64_t(width), cuuint64_t(height),
                              cuuint64_t(N)};
  const cuuint64_t strides[3] = {cuuint64_t(channels * t.bytes),
                                 cuuint64_t(width * channels * t.bytes),
                                 cuuint64_t(height * width * channels * t.bytes)};
  const int lower[2] = {lower_w, lower_h}, upper[2] = {upper_w, upper_h};  // w first, as dims
  const cuuint32_t steps[4] = {1, cuuint32_t(step_w), cuuint32_t(step_h), 1};
  CUtensorMap map;
  const CUresult r = im2col_map_encoder()(
      &map, t.type, 4, const_cast<void*>(base), dims, strides, lower, upper, cuuint32_t(t.slab()),
      cuuint32_t(positions), steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw DeviceError("conv2d_tc (wgmma): cuTensorMapEncodeIm2col failed (CUresult " +
                      std::to_string(int(r)) + ")");
  }
  return map;
}

}  // namespace crema::kernels::cuda::tc::wg
