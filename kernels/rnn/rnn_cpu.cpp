// Recurrent networks, fast CPU path, forward: cuDNN's structure on cpu::sgemm.
//
// Per pass (layer l, direction d):
//   1. the input projection of all T steps as ONE sgemm, [T*N, C_l] x w_ih^T -> [T*N, G*H],
//      written straight into the pass's gate rows of the reserve;
//   2. per step t (in the direction's order) one recurrent sgemm, h [N, H] x w_hh^T -> hp
//      [N, G*H], and one fused gate loop that adds both biases, applies the activations in place
//      over the reserve's gate row, and updates the running state h (c) of the sequences active
//      at t (t < len[n]; the others keep theirs: a finished forward sequence keeps its last
//      state, a reverse one that has not started keeps h0).
// The gate loop runs row by row (one sequence: rnn_cpu_gates.cpp); rows go to OpenMP threads
// when a step has enough of them. Every element is computed the same way whatever the thread
// count (and cpu::sgemm is thread-count independent), so results are bitwise reproducible.
// rnn_cpu_internal.h has the reserve and workspace layouts.
#include <algorithm>
#include <cstring>

#include "kernels/gemm/gemm.h"
#include "kernels/rnn/rnn.h"
#include "kernels/rnn/rnn_cpu_internal.h"

namespace crema::kernels::cpu {
namespace {

using rnn_detail::Layout;

// The buffers of one pass's forward.
struct PassForward {
  const float *bias_ih, *bias_hh;  // [G*H], zeros when the layer has no bias
  float* gates;                    // [T, N, G*H] in the reserve: xp, then the activations
  float* state;                    // [T, N, H] in the reserve: LSTM c_t, GRU hp_n (or null)
  float* out;                      // [T, N, D*H]: this direction writes columns d*H .. d*H+H-1
  float *hp, *h, *c;               // workspace: [N, G*H], [N, H], [N, H]
};

// Sequence n's step at time t: the cell's gate loop, then h_t into the layer output.
void gate_row(const Layout& s, RnnCell cell, const PassForward& f, int64_t d, int64_t t,
              int64_t n) {
  const int64_t H = s.H, tn = t * s.N + n;
  float* a = f.gates + tn * s.GH;
  const float* hp = f.hp + n * s.GH;
  float* h = f.h + n * H;
  switch (cell) {
    case RnnCell::rnn_tanh:
    case RnnCell::rnn_relu:
      rnn_detail::rnn_forward_row(H, cell == RnnCell::rnn_relu, a, hp, f.bias_ih, f.bias_hh, h);
      break;
    case RnnCell::lstm:
      rnn_detail::lstm_forward_row(H, a, hp, f.bias_ih, f.bias_hh, f.c + n * H, f.state + tn * H,
                                   h);
      break;
    case RnnCell::gru:
      rnn_detail::gru_forward_row(H, a, hp, f.bias_ih, f.bias_hh, f.state + tn * H, h);
      break;
  }
  std::memcpy(f.out + (tn * s.D + d) * H, h, size_t(H) * sizeof(float));
}

void copy_or_zero(float* dst, const float* src, size_t count) {
  if (src) {
    std::memcpy(dst, src, count * sizeof(float));
  } else {
    std::fill(dst, dst + count, 0.0f);
  }
}

}  // namespace

size_t rnn_reserve_floats(const RnnGeometry& g) {
  return Layout(g).reserve_floats();
}

size_t rnn_workspace_floats(const RnnGeometry& g) {
  return Layout(g).workspace_floats();
}

void rnn_forward(const RnnGeometry& g, const float* x, const float* lengths, const float* h0,
                 const float* c0, const RnnWeights<float>& w, float* y, float* hT, float* cT,
                 float* reserve, float* workspace, int num_threads) {
  const Layout s(g);
  const int64_t N = s.N, H = s.H, GH = s.GH;
  const size_t NH = size_t(N * H);
  const int threads = rnn_detail::gate_threads(N * GH, num_threads);
  float* hp = workspace;          // [N, G*H]
  float* h = hp + N * GH;         // [N, H]
  float* c = h + NH;              // [N, H]
  float* bias_ih = c + NH;        // [G*H]
  float* bias_hh = bias_ih + GH;  // [G*H]
  for (int64_t l = 0; l < s.L; ++l) {
    const int64_t Cl = g.input_size(l);
    const float* in = l == 0 ? x : reserve + s.out(l - 1);  // [T, N, C_l]
    float* out = l == s.L - 1 ? y : reserve + s.out(l);     // [T, N, D*H]
    for (int64_t d = 0; d < s.D; ++d) {
      const int64_t p = l * s.D + d;
      const size_t pp = size_t(p);
      copy_or_zero(bias_ih, w.b_ih.empty() ? nullptr : w.b_ih[pp], size_t(GH));
      copy_or_zero(bias_hh, w.b_hh.empty() ? nullptr : w.b_hh[pp], size_t(GH));
      const PassForward f{bias_ih,
                          bias_hh,
                          reserve + s.gates(p),
                          s.state_floats() ? reserve + s.state(p) : nullptr,
                          out,
                          hp,
                          h,
                          c};
      sgemm(false, true, s.T * N, GH, Cl, 1.0f, in, Cl, w.w_ih[pp], Cl, 0.0f, f.gates, GH,
            num_threads);
      copy_or_zero(h, h0 ? h0 + p * NH : nullptr, NH);
      copy_or_zero(c, c0 && s.lstm ? c0 + p * NH : nullptr, NH);
      for (int64_t step = 0; step < s.T; ++step) {
        const int64_t t = rnn_detail::step_time(d, s.T, step);
        sgemm(false, true, N, GH, H, 1.0f, h, H, w.w_hh[pp], H, 0.0f, hp, GH, num_threads);
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t n = 0; n < N; ++n) {
          if (t < rnn_detail::sequence_length(lengths, n, s.T)) {
            gate_row(s, g.cell, f, d, t, n);
          } else {
            std::fill_n(out + ((t * N + n) * s.D + d) * H, H, 0.0f);
          }
        }
      }
      if (hT) std::memcpy(hT + p * NH, h, NH * sizeof(float));
      if (cT && s.lstm) std::memcpy(cT + p * NH, c, NH * sizeof(float));
    }
  }
}

}  // namespace crema::kernels::cpu
