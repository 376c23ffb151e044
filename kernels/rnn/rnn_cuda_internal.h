// Internal to the CUDA RNN: the per-step kernels and the bias-gradient sums that rnn_cuda.cu
// drives (in rnn_cuda_pointwise.cu and rnn_cuda_fused.cu). No CUDA header: plain structs of
// device pointers.
//
// Index conventions of one pass: step s = 0 .. T-1 is the s-th recurrence the pass runs. Sample n
// (length len = lengths[n] clamped into [0, T]) is active at step s when s < len, and then reads
// and writes time t = s (forward) or t = len-1-s (reverse). Tensors indexed by time ([T, N, ...])
// and by step ([steps, N, ...]) are told apart in the comments. An inactive sample keeps its
// state (h_s = h_{s-1}, c_s = c_{s-1}) and writes the zero output of time t = s >= len, so each
// time of each sample is written exactly once per pass.
#pragma once

#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/rnn/rnn.h"

namespace crema::kernels::cuda::rnn_detail {

// One forward step of one pass: the gate pre-activations are xp (time-indexed, no bias) + hp
// (this step's recurrent projection, no bias) + b_ih + b_hh.
struct GatesForward {
  RnnCell cell;
  int N, H, T, step;
  bool reverse;
  const float* lengths;  // [N] or null: every sequence has T steps
  const float* xp;       // [T, N, G*H] x_t w_ih^T, by time
  const float* hp;       // [N, G*H] h_{s-1} w_hh^T
  const float* b_ih;     // [G*H] or null
  const float* b_hh;     // [G*H] or null
  const float* h_prev;   // [N, H] state before the step
  const float* c_prev;   // [N, H] LSTM cell before the step
  float* h;              // [N, H] state after the step
  float* c;              // [N, H] LSTM cell after the step
  float* gates;          // [N, G*H] activations saved for backward (null: inference)
  float* hp_n;           // [N, H] GRU: w_hh_n h_{s-1} + b_hn, saved for backward (null: inference)
  float* y;              // [T, N, ldy] this direction's columns of the output, by time
  int64_t ldy;
  float* hT;  // [N, H] written at the last step (null: not wanted or not the last step)
  float* cT;
};
void gates_forward(const GatesForward& a, gpu::Stream stream);

// One backward step of one pass. dh = dh_in + dy_t; writes the gradients of the gate
// pre-activations twice: dxp (time-indexed: for dW_ih, db_ih, dx) and dhp (this step's row block
// of the step-indexed buffer: for the recurrent GEMM, dW_hh, db_hh). They differ only for GRU's
// n gate (dhp_n = dxp_n * r). dh_out receives the part of dh_{s-1} that does not go through
// w_hh (GRU: dh * z; an inactive sample: all of dh); the caller then adds dhp w_hh to it.
// dh_in may equal dh_out and dc_in dc_out (each element is read, then written, by one thread).
struct GatesBackward {
  RnnCell cell;
  int N, H, T, step;
  bool reverse;
  const float* lengths;  // [N] or null
  const float* gates;    // [N, G*H] saved activations of the step
  const float* hp_n;     // [N, H] GRU: saved w_hh_n h_{s-1} + b_hn
  const float* h;        // [N, H] state after the step
  const float* h_prev;   // [N, H] state before the step
  const float* c;        // [N, H] LSTM cell after the step
  const float* c_prev;   // [N, H] LSTM cell before the step
  const float* dy;       // [T, N, ldy] this direction's columns of dy, by time, or null (zero)
  int64_t ldy;
  const float* dh_in;  // [N, H] gradient reaching h_s from later steps (null: zero)
  const float* dc_in;  // [N, H] LSTM, reaching c_s (null: zero)
  float* dh_out;       // [N, H]
  float* dc_out;       // [N, H] LSTM
  float* dxp;          // [T, N, G*H] by time
  float* dhp;          // [N, G*H] this step
};
void gates_backward(const GatesBackward& a, gpu::Stream stream);

// v2 (rnn_cuda_fused.cu): one kernel per step, the recurrent GEMM with forward_cell /
// backward_cell in its epilogue. The forward reads h_{s-1} from a.h_prev (a.hp is not used); the
// backward adds dhp_{s+1} w_hh (dhp_next [N, G*H], null at the last step) to a.dh_in.
void fused_forward_step(const GatesForward& a, const float* w_hh, gpu::Stream stream);
void fused_backward_step(const GatesBackward& a, const float* dhp_next, const float* w_hh,
                         gpu::Stream stream);

// db[c] += sum over r of a[r * cols + c], a [rows, cols]; a fixed order for every column.
void column_sums_accumulate(const float* a, int64_t rows, int64_t cols, float* db,
                            gpu::Stream stream);

}  // namespace crema::kernels::cuda::rnn_detail
