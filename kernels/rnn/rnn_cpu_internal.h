// The fast CPU path's internals, shared by rnn_cpu.cpp (forward), rnn_cpu_backward.cpp and
// rnn_cpu_gates.cpp: where each saved quantity sits in the reserve, how the workspace is cut, the
// step order of a pass, and the fused gate loops of one row. Internal to kernels/rnn/.
//
// Reserve (what the training forward saves for the backward), floats:
//   per pass p = l*D + d, in pass order:
//     gates [T, N, G*H]   the activated gates of every step (RNN: h itself; LSTM: i f g o;
//                         GRU: r z n); rows of steps past a sequence's length are unspecified
//     state [T, N, H]     LSTM: the cell state c_t; GRU: hp_n = w_hh_n h_{t-1} + b_hh_n; absent
//                         for RNN
//   per layer l < L-1:
//     out   [T, N, D*H]   the layer's output, the next layer's input (the last layer's is y)
//
// Workspace, floats (forward and backward use it in turn; its size is the larger need):
//   forward:  hp [N, G*H] (this step's w_hh h_{t-1}), h [N, H], c [N, H] (the running state),
//             bias_ih [G*H], bias_hh [G*H] (the biases, zeros when absent)
//   backward: dxp [T, N, G*H] (dL/dxp of every step), dhp [T, N, G*H] (GRU: dL/dhp, which
//             differs from dL/dxp in the n block; other cells use dxp), h_prev [T, N, H] (the
//             state each step started from), dh [N, H], dc [N, H] (the running state
//             gradients), zeros [H] (stands for an absent dy or c0), and for L > 1 two
//             [T, N, D*H] buffers that alternate as dL/d(layer output) and dL/d(layer input)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/rnn/rnn.h"

namespace crema::kernels::cpu::rnn_detail {

struct Layout {
  explicit Layout(const RnnGeometry& g)
      : T(g.T),
        N(g.N),
        H(g.H),
        D(g.directions()),
        GH(g.gates() * g.H),
        L(g.layers),
        P(g.passes()),
        lstm(g.cell == RnnCell::lstm),
        gru(g.cell == RnnCell::gru) {}

  int64_t T, N, H, D, GH, L, P;
  bool lstm, gru;

  // Reserve offsets.
  size_t state_floats() const { return lstm || gru ? size_t(T * N * H) : 0; }
  size_t pass_floats() const { return size_t(T * N * GH) + state_floats(); }
  size_t gates(int64_t p) const { return size_t(p) * pass_floats(); }
  size_t state(int64_t p) const { return gates(p) + size_t(T * N * GH); }
  size_t layer_out_floats() const { return size_t(T * N * D * H); }
  size_t out(int64_t l) const { return size_t(P) * pass_floats() + size_t(l) * layer_out_floats(); }
  size_t reserve_floats() const { return out(L - 1); }

  // Workspace sizes.
  size_t forward_workspace() const { return size_t(N * GH + 2 * N * H + 2 * GH); }
  size_t backward_workspace() const {
    const size_t steps = size_t(T * N);
    return steps * size_t(GH) * (gru ? 2 : 1) + steps * size_t(H) + size_t(2 * N * H + H) +
           size_t(std::min<int64_t>(L - 1, 2)) * layer_out_floats();
  }
  size_t workspace_floats() const { return std::max(forward_workspace(), backward_workspace()); }
};

// Steps of sequence n: lengths[n] (validated to be in [1, T] by the dispatch), or T.
inline int64_t sequence_length(const float* lengths, int64_t n, int64_t T) {
  return lengths ? int64_t(lengths[n]) : T;
}

// The time step direction d takes s-th, over all T steps: t = s forward, T-1-s reverse. A
// sequence n is active at t when t < len[n]; the forward direction then starts at t = 0, the
// reverse one at t = len-1.
inline int64_t step_time(int64_t d, int64_t T, int64_t s) {
  return d == 0 ? s : T - 1 - s;
}
inline bool first_step(int64_t d, int64_t t, int64_t len) {
  return d == 0 ? t == 0 : t == len - 1;
}
// The step taken just before t (valid when t is not the first step).
inline int64_t previous_time(int64_t d, int64_t t) {
  return d == 0 ? t - 1 : t + 1;
}

// Rows of N*H elements per step at which the gate loops go parallel: below, the parallel region
// costs more than the transcendental functions it shares out.
constexpr int64_t kParallelGateElements = 1 << 13;
inline int gate_threads(int64_t elements, int num_threads) {
  return elements >= kParallelGateElements ? std::max(1, num_threads) : 1;
}

// The fused gate loops of one sequence at one step (rnn_cpu_gates.cpp), over j < H. Forward: a
// [G*H] holds xp = w_ih x_t on entry and the activated gates on exit; hp [G*H] = w_hh h_{t-1};
// b_ih, b_hh [G*H]; h [H] (and c [H]) the running state, updated; c_saved / hn_saved [H] the
// reserve's state row. Backward: a the saved gates; dout [H] dL/dh_t from above; dh [H] the
// running gradient, on exit the part of dL/dh_{t-1} that does not go through w_hh (0, or dh z for
// GRU); dc [H] likewise (LSTM); gx [G*H] dL/dxp; gh [G*H] dL/dhp (GRU).
void rnn_forward_row(int64_t H, bool relu, float* a, const float* hp, const float* b_ih,
                     const float* b_hh, float* h);
void lstm_forward_row(int64_t H, float* a, const float* hp, const float* b_ih, const float* b_hh,
                      float* c, float* c_saved, float* h);
void gru_forward_row(int64_t H, float* a, const float* hp, const float* b_ih, const float* b_hh,
                     float* hn_saved, float* h);
void rnn_backward_row(int64_t H, bool relu, const float* a, const float* dout, float* dh,
                      float* gx);
void lstm_backward_row(int64_t H, const float* a, const float* c, const float* c_prev,
                       const float* dout, float* dh, float* dc, float* gx);
void gru_backward_row(int64_t H, const float* a, const float* hn, const float* h_prev,
                      const float* dout, float* dh, float* gx, float* gh);

}  // namespace crema::kernels::cpu::rnn_detail
