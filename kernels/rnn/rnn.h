// Recurrent networks: Elman RNN (tanh or relu), LSTM and GRU, with PyTorch's equations, gate
// order and weight layout, stacked in layers, optionally bidirectional, over sequences of
// different lengths. One call runs every layer and direction, as cuDNN's cudnnRNNForward does.
//
// Shapes (time-major): x [T, N, C], y [T, N, D*H], h0/hT/c0/cT [L*D, N, H], with T steps, N
// sequences, C input features, H the hidden size, L layers, D = 2 if bidirectional else 1.
// Pass p = l*D + d runs layer l in direction d (d = 1: reverse). Layer 0 reads x; layer l > 0
// reads layer l-1's output [T, N, D*H]. Each pass has (G gate blocks of H rows each):
//   w_ih [G*H, C_l]   w_hh [G*H, H]   b_ih [G*H]   b_hh [G*H]      C_0 = C, C_l = D*H for l > 0
// PyTorch names them weight_ih_l{l}, weight_hh_l{l}, bias_ih_l{l}, bias_hh_l{l}, with the
// suffix _reverse for d = 1.
//
// One step of a pass, with xp = w_ih x_t + b_ih and hp = w_hh h_{t-1} + b_hh (each [G*H]):
//   RNN   G = 1   h_t = act(xp + hp), act = tanh or relu
//   LSTM  G = 4   gate blocks i, f, g, o:  i = sigm(xp_i + hp_i)  f = sigm(xp_f + hp_f)
//                 g = tanh(xp_g + hp_g)    o = sigm(xp_o + hp_o)
//                 c_t = f * c_{t-1} + i * g          h_t = o * tanh(c_t)
//   GRU   G = 3   gate blocks r, z, n:  r = sigm(xp_r + hp_r)  z = sigm(xp_z + hp_z)
//                 n = tanh(xp_n + r * hp_n)          (the reset gate scales the hidden projection,
//                 h_t = (1 - z) * n + z * h_{t-1}     bias included: PyTorch's form, not Cho's)
//
// Lengths: lengths[n] in [1, T] (integral values in the dtype of x; absent = every sequence
// has T steps), as PyTorch's packed sequences. The forward direction runs t = 0 .. len-1 from
// h0; the reverse direction runs t = len-1 .. 0 from h0. Outputs at t >= len[n] are 0; hT/cT
// hold the state after each sequence's own last step (t = len-1 forward, t = 0 reverse).
//
// Backward through time: given dy (may be absent: zero), dhT and dcT (may be absent: zero),
// writes dx [T, N, C] (may be absent), dh0 and dc0 (may be absent) and ACCUMULATES the weight
// gradients (+=; a null gradient pointer / undefined Tensor is skipped: frozen parameter). The
// backward needs what the training forward saved in `reserve` (as cuDNN's reserve space), and
// the same x, h0, c0, weights and lengths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/context.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace crema::kernels {

enum class RnnCell { rnn_tanh, rnn_relu, lstm, gru };

struct RnnGeometry {
  RnnCell cell = RnnCell::lstm;
  int64_t T = 0, N = 0, C = 0, H = 0;  // steps, sequences, input features, hidden size
  int64_t layers = 1;
  bool bidirectional = false;

  int64_t gates() const;                    // G: 1, 4 or 3
  int64_t directions() const { return bidirectional ? 2 : 1; }
  int64_t passes() const { return layers * directions(); }
  int64_t input_size(int64_t layer) const;  // C for layer 0, D*H after
  // Throws crema::Error naming `where` for non-positive sizes.
  void validate(const char* where) const;
};

const char* rnn_cell_name(RnnCell cell);

// Raw pointers to one set of weights (or their gradients), indexed by pass p = l*D + d.
// Biases may be null (a layer without bias); gradients may be null (not wanted).
template <class T>
struct RnnWeights {
  std::vector<const T*> w_ih, w_hh, b_ih, b_hh;
};
template <class T>
struct RnnWeightGrads {
  std::vector<T*> w_ih, w_hh, b_ih, b_hh;
};

namespace ref {
// The definition as loops, sums in double; the oracle of the tests. Instantiated for float and
// double. lengths, h0, c0 (LSTM only), hT, cT may be null. The backward recomputes the forward
// itself (no reserve).
template <class T>
void rnn_forward(const RnnGeometry& g, const T* x, const T* lengths, const T* h0, const T* c0,
                 const RnnWeights<T>& w, T* y, T* hT, T* cT);
template <class T>
void rnn_backward(const RnnGeometry& g, const T* x, const T* lengths, const T* h0, const T* c0,
                  const RnnWeights<T>& w, const T* dy, const T* dhT, const T* dcT, T* dx, T* dh0,
                  T* dc0, const RnnWeightGrads<T>& dw);
}  // namespace ref

namespace cpu {
// The fast CPU path (float): each pass's input projection for all steps as one cpu::sgemm, one
// recurrent sgemm and one fused gate loop per step; the backward mirrors it and forms the weight
// gradients as one sgemm each over all steps. reserve/workspace sizes are in floats.
size_t rnn_reserve_floats(const RnnGeometry& g);
size_t rnn_workspace_floats(const RnnGeometry& g);
void rnn_forward(const RnnGeometry& g, const float* x, const float* lengths, const float* h0,
                 const float* c0, const RnnWeights<float>& w, float* y, float* hT, float* cT,
                 float* reserve, float* workspace, int num_threads);
void rnn_backward(const RnnGeometry& g, const float* x, const float* lengths, const float* h0,
                  const float* c0, const RnnWeights<float>& w, const float* y,
                  const float* reserve, const float* dy, const float* dhT, const float* dcT,
                  float* dx, float* dh0, float* dc0, const RnnWeightGrads<float>& dw,
                  float* workspace, int num_threads);
}  // namespace cpu

namespace cuda {
// The same on device pointers, queued on `stream`: no host synchronization, no allocation, so a
// training step can be captured in a CUDA graph; deterministic (no float atomics). lengths is a
// device array (values clamped into [0, T] by the kernels: never an out-of-bounds access).
// README.md has the version ladder and its measurements.
enum class RnnVersion {
  per_step_gemm = 1,  // v1: cuDNN's structure: all steps' input projection as one GEMM, then per
                      //     step one recurrent GEMM and one fused pointwise gate kernel; backward
                      //     the same in reverse, weight gradients as one GEMM over all steps
  fused_step,         // v2: v1 with each step's recurrent GEMM and pointwise kernel fused into one
                      //     kernel (the gate math in the GEMM's epilogue): one launch per step
  best = fused_step,
};
size_t rnn_reserve_floats(const RnnGeometry& g, RnnVersion version = RnnVersion::best);
size_t rnn_workspace_floats(const RnnGeometry& g, RnnVersion version = RnnVersion::best);
void rnn_forward(const RnnGeometry& g, const float* x, const float* lengths, const float* h0,
                 const float* c0, const RnnWeights<float>& w, float* y, float* hT, float* cT,
                 float* reserve, float* workspace, gpu::Stream stream,
                 RnnVersion version = RnnVersion::best);
void rnn_backward(const RnnGeometry& g, const float* x, const float* lengths, const float* h0,
                  const float* c0, const RnnWeights<float>& w, const float* y,
                  const float* reserve, const float* dy, const float* dhT, const float* dcT,
                  float* dx, float* dh0, float* dc0, const RnnWeightGrads<float>& dw,
                  float* workspace, gpu::Stream stream, RnnVersion version = RnnVersion::best);
}  // namespace cuda

// Tensor level. Every tensor on the context's device, one dtype (float32; float64 on the CPU
// runs the reference, for gradient checks). Optional tensors may be undefined (lengths, h0, c0,
// hT, cT, dy, dhT, dcT, dx, dh0, dc0, any gradient). Weights and gradients are indexed by pass.
// Throws crema::Error naming the op and the tensor when a shape does not fit.
struct RnnParams {
  std::vector<const Tensor*> w_ih, w_hh, b_ih, b_hh;  // b_* entries may be null: no bias
};
struct RnnParamGrads {
  std::vector<Tensor*> w_ih, w_hh, b_ih, b_hh;  // entries may be null: not wanted
};
// The reserve the training forward fills and the backward reads (float count; 0 for float64,
// whose backward recomputes), and the scratch both need (taken from ctx.workspace()).
size_t rnn_reserve_floats(const Context& ctx, const RnnGeometry& g, DType dtype);
void rnn_forward(Context& ctx, const RnnGeometry& g, const Tensor& x, const Tensor& lengths,
                 const Tensor& h0, const Tensor& c0, const RnnParams& w, Tensor& y, Tensor& hT,
                 Tensor& cT, Tensor& reserve);
void rnn_backward(Context& ctx, const RnnGeometry& g, const Tensor& x, const Tensor& lengths,
                  const Tensor& h0, const Tensor& c0, const RnnParams& w, const Tensor& y,
                  const Tensor& reserve, const Tensor& dy, const Tensor& dhT, const Tensor& dcT,
                  Tensor& dx, Tensor& dh0, Tensor& dc0, const RnnParamGrads& dw);

}  // namespace crema::kernels
