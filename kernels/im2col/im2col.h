// im2col / col2im: turn a convolution into a matrix product (Caffe's layout).
//
// For one image im [C, H, W] and an R x S filter window with padding, stride and dilation, the
// output has P x Q positions:
//   P = (H + 2*pad_h - dilation_h*(R-1) - 1) / stride_h + 1     (Q likewise from W, S)
// im2col lays every receptive field out as a column:
//   col[(c*R + r)*S + s, p*Q + q] = im[c, p*stride_h - pad_h + r*dilation_h,
//                                         q*stride_w - pad_w + s*dilation_w]
// reading 0 where the index falls outside the image. col is [C*R*S, P*Q]: row (c, r, s) holds
// one filter tap for all output positions, so a convolution is y[K, P*Q] = w[K, C*R*S] * col.
//
// col2im is the adjoint (transpose) of im2col: every col entry is added back to the pixel it
// was read from, and entries that came from the padding are dropped:
//   im[c, h, w] += sum of col[(c*R + r)*S + s, p*Q + q] over all (r, s, p, q) that read (h, w)
// It ACCUMULATES into im, so for dx = col2im(dcol) zero im first. It is what the backward pass
// of a convolution needs: dx = col2im(w^T * dy).
//
// Raw-pointer functions on one image. The cpu:: versions are single-threaded: callers
// parallelize over images and channels (channel c of im touches only rows c*R*S .. (c+1)*R*S-1
// of col, so calling with C = 1 on pointer offsets splits the work without races).
#pragma once

#include <cstdint>

#include "core/cuda_runtime.h"

namespace crema::kernels {

// Geometry of the patches of one image: C channels of H x W, an R x S window.
struct Im2colGeometry {
  int64_t C, H, W;
  int64_t R, S;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;

  int64_t P() const { return (H + 2 * pad_h - dilation_h * (R - 1) - 1) / stride_h + 1; }
  int64_t Q() const { return (W + 2 * pad_w - dilation_w * (S - 1) - 1) / stride_w + 1; }
  int64_t col_rows() const { return C * R * S; }
  int64_t col_cols() const { return P() * Q(); }
};

namespace ref {
// im [C, H, W] -> col [C*R*S, P*Q] (written).
template <class T>
void im2col(const Im2colGeometry& g, const T* im, T* col);
// col [C*R*S, P*Q] -> im [C, H, W] (accumulated: im += col2im(col)).
template <class T>
void col2im(const Im2colGeometry& g, const T* col, T* im);
}  // namespace ref

namespace cpu {
// im [C, H, W] -> col [C*R*S, P*Q] with row stride ldcol >= P*Q (written; columns past P*Q are
// left alone). ldcol > P*Q lets a caller place several images side by side in one matrix
// [C*R*S, N*P*Q] by passing col + n*P*Q and ldcol = N*P*Q.
void im2col(const Im2colGeometry& g, const float* im, float* col, int64_t ldcol);
// col [C*R*S, P*Q] with row stride ldcol -> im [C, H, W] (accumulated).
void col2im(const Im2colGeometry& g, const float* col, int64_t ldcol, float* im);
}  // namespace cpu

// CUDA, batched over images, queued on `stream`: image n is im + n*im_stride ([C, H, W] there; a
// stride larger than C*H*W picks one group's channels out of a wider tensor) and owns columns
// n*P*Q .. (n+1)*P*Q - 1 of col [C*R*S, images*P*Q] (row stride ldcol >= images*P*Q).
namespace cuda {
// im2col's versions (README.md, "Versions"):
//   thread_per_entry  one thread per col entry, its (row, column) decoded from a flat 64-bit index
//                     (a 64-bit division and eight 32-bit ones per entry);
//   row_vectors       block (x, y): col row y's (c, r, s) decoded once, each thread 8 consecutive
//                     columns whose (n, p, q) it decodes once and steps, written as two 16-byte
//                     stores where ldcol and col are 16-byte aligned.
enum class Im2colVersion { thread_per_entry, row_vectors, best = row_vectors };
// Writes col.
void im2col(const Im2colGeometry& g, int64_t images, const float* im, int64_t im_stride, float* col,
            int64_t ldcol, Im2colVersion version, gpu::Stream stream);
// ACCUMULATES into the images, as a gather: one thread per pixel adds the col entries that read
// it, in a fixed (r, s) order (deterministic, no atomics).
void col2im(const Im2colGeometry& g, int64_t images, const float* col, int64_t ldcol, float* im,
            int64_t im_stride, gpu::Stream stream);
}  // namespace cuda

}  // namespace crema::kernels
