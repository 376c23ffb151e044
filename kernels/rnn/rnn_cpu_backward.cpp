// Recurrent networks, fast CPU path, backward through time: the forward's structure in reverse.
//
// From the top layer down, per pass (layer l, direction d):
//   1. h_prev [T, N, H]: the state every step started from (h0 or the previous step's output),
//      gathered from the saved layer output, for the gate loop and for dW_hh;
//   2. per step, in the reverse of the forward's order, one fused gate loop (row n: dh = the
//      running state gradient + dL/dh_t from above -> dL/dxp and dL/dhp of every gate, the new
//      running dc) and one sgemm, dh += dhp [N, G*H] x w_hh [G*H, H], for dL/dh_{t-1}. Rows of
//      inactive sequences (t >= len[n]) get zero gate gradients and keep their running dh, dc:
//      the sgemm adds exactly zero to them;
//   3. dW_ih += dxp^T [G*H, T*N] x input [T*N, C_l] and dW_hh += dhp^T x h_prev, ONE sgemm each
//      over all steps (beta = 1), db_ih and db_hh as column sums (in double, rows in order);
//   4. dL/d(layer input) [T*N, C_l] = dxp x w_ih, one sgemm; the reverse direction's adds to the
//      forward one's (beta = 1), which is how the layer below gets both directions' share.
// In the gate formulas a is the saved activation; for the pre-activations:
//   tanh: 1 - a^2   relu: [a > 0]   sigmoid: a (1 - a)
//   LSTM: dc_t = dc + dh o (1 - tanh^2 c_t); di = dc_t g; df = dc_t c_{t-1}; dg = dc_t i;
//         do = dh tanh c_t; dc_{t-1} = dc_t f
//   GRU:  dn = dh (1 - z); dz = dh (h_{t-1} - n); dr = dn (1 - n^2) hp_n; the n block of dhp is
//         dn (1 - n^2) r; dh_{t-1} gets dh z besides dhp x w_hh
#include <algorithm>
#include <cstring>

#include "kernels/gemm/gemm.h"
#include "kernels/rnn/rnn.h"
#include "kernels/rnn/rnn_cpu_internal.h"

namespace crema::kernels::cpu {
namespace {

using rnn_detail::Layout;

// The buffers of one pass's backward.
struct PassBackward {
  const float* lengths;
  const float* gates;   // [T, N, G*H] saved activations
  const float* state;   // [T, N, H] saved LSTM c_t or GRU hp_n (null for RNN)
  const float* c0;      // [N, H] this pass's c0 (LSTM; null: zeros)
  const float* dout;    // [T, N, D*H] dL/d(layer output), null: zero
  const float* h_prev;  // [T, N, H]
  const float* zeros;   // [H]
  float *dxp, *dhp;     // [T, N, G*H]; dhp == dxp except for GRU
  float *dh, *dc;       // [N, H] each
};

// h_prev[t, n] = the state step t of sequence n started from: h0 at its first step, else the
// output of the step before; zeros where the sequence is inactive (those rows' gradients are 0).
void gather_h_prev(const Layout& s, int64_t d, const float* lengths, const float* h0,
                   const float* out, float* h_prev, int threads) {
  const int64_t N = s.N, H = s.H;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t tn = 0; tn < s.T * N; ++tn) {
    const int64_t t = tn / N, n = tn % N, len = rnn_detail::sequence_length(lengths, n, s.T);
    float* dst = h_prev + tn * H;
    if (t >= len) {
      std::fill_n(dst, H, 0.0f);
    } else if (rnn_detail::first_step(d, t, len)) {
      if (h0) {
        std::memcpy(dst, h0 + n * H, size_t(H) * sizeof(float));
      } else {
        std::fill_n(dst, H, 0.0f);
      }
    } else {
      const int64_t tp = rnn_detail::previous_time(d, t);
      std::memcpy(dst, out + ((tp * N + n) * s.D + d) * H, size_t(H) * sizeof(float));
    }
  }
}

// Sequence n's step at time t: its gate gradients, and the running dh (reset to the part that
// does not go through w_hh) and dc.
void gate_grad_row(const Layout& s, RnnCell cell, const PassBackward& b, int64_t d, int64_t t,
                   int64_t n) {
  const int64_t H = s.H, N = s.N, tn = t * N + n;
  const float* a = b.gates + tn * s.GH;
  const float* dout = b.dout ? b.dout + (tn * s.D + d) * H : b.zeros;
  float* gx = b.dxp + tn * s.GH;
  float* dh = b.dh + n * H;
  switch (cell) {
    case RnnCell::rnn_tanh:
    case RnnCell::rnn_relu:
      rnn_detail::rnn_backward_row(H, cell == RnnCell::rnn_relu, a, dout, dh, gx);
      break;
    case RnnCell::lstm: {
      const int64_t len = rnn_detail::sequence_length(b.lengths, n, s.T);
      const float* c_prev = b.zeros;
      if (!rnn_detail::first_step(d, t, len)) {
        c_prev = b.state + (rnn_detail::previous_time(d, t) * N + n) * H;
      } else if (b.c0) {
        c_prev = b.c0 + n * H;
      }
      rnn_detail::lstm_backward_row(H, a, b.state + tn * H, c_prev, dout, dh, b.dc + n * H, gx);
      break;
    }
    case RnnCell::gru:
      rnn_detail::gru_backward_row(H, a, b.state + tn * H, b.h_prev + tn * H, dout, dh, gx,
                                   b.dhp + tn * s.GH);
      break;
  }
}

void zero_row(const Layout& s, const PassBackward& b, int64_t tn) {
  std::fill_n(b.dxp + tn * s.GH, s.GH, 0.0f);
  if (b.dhp != b.dxp) std::fill_n(b.dhp + tn * s.GH, s.GH, 0.0f);
}

// db[col] += sum over rows of m[row, col], m [rows, cols]; each column summed in double, rows in
// order, columns split over threads in blocks (the same sums whatever the thread count).
void add_column_sums(const float* m, int64_t rows, int64_t cols, float* db, int num_threads) {
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) \
    num_threads(std::max(1, num_threads)) if (rows * cols >= (1 << 16))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kBlock, width = std::min(kBlock, cols - c0);
    double sum[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = m + r * cols + c0;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) sum[c] += double(row[c]);
    }
    for (int64_t c = 0; c < width; ++c) db[c0 + c] = float(double(db[c0 + c]) + sum[c]);
  }
}

template <class V>
auto entry(const V& v, int64_t p) {
  return v.empty() ? nullptr : v[size_t(p)];
}

}  // namespace

void rnn_backward(const RnnGeometry& g, const float* x, const float* lengths, const float* h0,
                  const float* c0, const RnnWeights<float>& w, const float* y, const float* reserve,
                  const float* dy, const float* dhT, const float* dcT, float* dx, float* dh0,
                  float* dc0, const RnnWeightGrads<float>& dw, float* workspace, int num_threads) {
  const Layout s(g);
  const int64_t N = s.N, H = s.H, GH = s.GH, TN = s.T * s.N;
  const size_t NH = size_t(N * H);
  const int threads = rnn_detail::gate_threads(N * GH, num_threads);
  float* dxp = workspace;                    // [T, N, G*H]
  float* dhp = s.gru ? dxp + TN * GH : dxp;  // [T, N, G*H]
  float* h_prev = dhp + TN * GH;             // [T, N, H]
  float* dh = h_prev + TN * H;               // [N, H]
  float* dc = dh + NH;                       // [N, H]
  float* zeros = dc + NH;                    // [H]
  float* layer_grads = zeros + H;            // 2 x [T, N, D*H] when L > 1
  std::fill_n(zeros, H, 0.0f);
  const float* dout = dy;
  for (int64_t l = s.L - 1; l >= 0; --l) {
    const int64_t Cl = g.input_size(l);
    const float* in = l == 0 ? x : reserve + s.out(l - 1);     // [T, N, C_l]
    const float* out = l == s.L - 1 ? y : reserve + s.out(l);  // [T, N, D*H]
    // [T, N, C_l]; layer l+1 wrote dout into the other buffer.
    float* din = l == 0 ? dx : layer_grads + size_t((l - 1) % 2) * s.layer_out_floats();
    for (int64_t d = 0; d < s.D; ++d) {
      const int64_t p = l * s.D + d;
      const PassBackward b{lengths,
                           reserve + s.gates(p),
                           s.state_floats() ? reserve + s.state(p) : nullptr,
                           c0 && s.lstm ? c0 + p * NH : nullptr,
                           dout,
                           h_prev,
                           zeros,
                           dxp,
                           dhp,
                           dh,
                           dc};
      gather_h_prev(s, d, lengths, h0 ? h0 + p * NH : nullptr, out, h_prev, threads);
      if (dhT) {
        std::memcpy(dh, dhT + p * NH, NH * sizeof(float));
      } else {
        std::fill_n(dh, NH, 0.0f);
      }
      if (dcT && s.lstm) {
        std::memcpy(dc, dcT + p * NH, NH * sizeof(float));
      } else {
        std::fill_n(dc, NH, 0.0f);
      }
      for (int64_t step = s.T - 1; step >= 0; --step) {
        const int64_t t = rnn_detail::step_time(d, s.T, step);
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t n = 0; n < N; ++n) {
          if (t < rnn_detail::sequence_length(lengths, n, s.T)) {
            gate_grad_row(s, g.cell, b, d, t, n);
          } else {
            zero_row(s, b, t * N + n);
          }
        }
        sgemm(false, false, N, H, GH, 1.0f, dhp + t * N * GH, GH, w.w_hh[size_t(p)], H, 1.0f, dh, H,
              num_threads);
      }
      if (dh0) std::memcpy(dh0 + p * NH, dh, NH * sizeof(float));
      if (dc0 && s.lstm) std::memcpy(dc0 + p * NH, dc, NH * sizeof(float));
      if (float* dw_ih = entry(dw.w_ih, p)) {
        sgemm(true, false, GH, Cl, TN, 1.0f, dxp, GH, in, Cl, 1.0f, dw_ih, Cl, num_threads);
      }
      if (float* dw_hh = entry(dw.w_hh, p)) {
        sgemm(true, false, GH, H, TN, 1.0f, dhp, GH, h_prev, H, 1.0f, dw_hh, H, num_threads);
      }
      if (float* db_ih = entry(dw.b_ih, p)) add_column_sums(dxp, TN, GH, db_ih, num_threads);
      if (float* db_hh = entry(dw.b_hh, p)) add_column_sums(dhp, TN, GH, db_hh, num_threads);
      if (din) {
        sgemm(false, false, TN, Cl, GH, 1.0f, dxp, GH, w.w_ih[size_t(p)], Cl, d == 0 ? 0.0f : 1.0f,
              din, Cl, num_threads);
      }
    }
    dout = din;
  }
}

}  // namespace crema::kernels::cpu
