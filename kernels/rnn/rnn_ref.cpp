// Recurrent networks, reference: the equations of rnn.h one sequence and one step at a time,
// everything in double. The backward reruns this forward, keeping every step's gates, cell states
// and layer outputs in local vectors, then walks each pass back through time (BPTT).
//
// Pass p = l*D + d over sequence n visits t = 0 .. len-1 (d = 0) or t = len-1 .. 0 (d = 1); the
// step before t is t-1 (d = 0) or t+1 (d = 1), and the first step starts from h0 (c0).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/rnn/rnn.h"

namespace crema::kernels::ref {
namespace {

std::vector<double> zeros(int64_t n) {
  return std::vector<double>(size_t(n), 0.0);
}

double sigmoid(double v) {
  return 1.0 / (1.0 + std::exp(-v));
}

template <class T>
int64_t sequence_length(const RnnGeometry& g, const T* lengths, int64_t n) {
  return lengths ? int64_t(lengths[n]) : g.T;
}

// The step taken s-th by direction d over a sequence of len steps.
int64_t step_time(int64_t d, int64_t len, int64_t s) {
  return d == 0 ? s : len - 1 - s;
}

// Everything the backward needs from the forward, in double.
struct ForwardRecord {
  std::vector<std::vector<double>> input;  // per layer: [T, N, C_l], layer 0 = x
  std::vector<std::vector<double>> out;    // per layer: [T, N, D*H], 0 past each length
  std::vector<std::vector<double>> gates;  // per pass: [T, N, G*H], after the activations
  std::vector<std::vector<double>> cell;   // per pass: [T, N, H], LSTM c_t
  std::vector<std::vector<double>> hid_n;  // per pass: [T, N, H], GRU hp_n = w_hh_n h + b_hh_n
  std::vector<double> hT, cT;              // [L*D, N, H]
};

// One pass's weights, read as doubles.
template <class T>
struct PassWeights {
  const T *w_ih, *w_hh, *b_ih, *b_hh;
  int64_t Cl;  // input size of the layer
  double bias_ih(int64_t r) const { return b_ih ? double(b_ih[r]) : 0.0; }
  double bias_hh(int64_t r) const { return b_hh ? double(b_hh[r]) : 0.0; }
};

template <class T>
PassWeights<T> pass_weights(const RnnGeometry& g, const RnnWeights<T>& w, int64_t p) {
  auto entry = [p](const std::vector<const T*>& v) { return v.empty() ? nullptr : v[size_t(p)]; };
  return {w.w_ih[size_t(p)], w.w_hh[size_t(p)], entry(w.b_ih), entry(w.b_hh),
          g.input_size(p / g.directions())};
}

// One step: xp = w_ih x + b_ih, hp = w_hh h_prev + b_hh, then the cell's equations. Writes the
// activated gates [G*H], the new c (LSTM), hp_n (GRU) and h.
template <class T>
void step_forward(const RnnGeometry& g, const PassWeights<T>& w, const double* x,
                  const double* h_prev, const double* c_prev, double* gates, double* c,
                  double* hid_n, double* h) {
  const int64_t H = g.H, GH = g.gates() * g.H;
  std::vector<double> xp = zeros(GH), hp = zeros(GH);
  for (int64_t r = 0; r < GH; ++r) {
    double sx = w.bias_ih(r), sh = w.bias_hh(r);
    for (int64_t k = 0; k < w.Cl; ++k) sx += double(w.w_ih[r * w.Cl + k]) * x[k];
    for (int64_t k = 0; k < H; ++k) sh += double(w.w_hh[r * H + k]) * h_prev[k];
    xp[size_t(r)] = sx;
    hp[size_t(r)] = sh;
  }
  for (int64_t j = 0; j < H; ++j) {
    switch (g.cell) {
      case RnnCell::rnn_tanh:
        gates[j] = h[j] = std::tanh(xp[j] + hp[j]);
        break;
      case RnnCell::rnn_relu:
        gates[j] = h[j] = std::max(0.0, xp[j] + hp[j]);
        break;
      case RnnCell::lstm: {
        const double i = sigmoid(xp[j] + hp[j]), f = sigmoid(xp[H + j] + hp[H + j]);
        const double gg = std::tanh(xp[2 * H + j] + hp[2 * H + j]);
        const double o = sigmoid(xp[3 * H + j] + hp[3 * H + j]);
        c[j] = f * c_prev[j] + i * gg;
        h[j] = o * std::tanh(c[j]);
        gates[j] = i, gates[H + j] = f, gates[2 * H + j] = gg, gates[3 * H + j] = o;
        break;
      }
      case RnnCell::gru: {
        const double r = sigmoid(xp[j] + hp[j]), z = sigmoid(xp[H + j] + hp[H + j]);
        const double n = std::tanh(xp[2 * H + j] + r * hp[2 * H + j]);
        hid_n[j] = hp[2 * H + j];
        h[j] = (1.0 - z) * n + z * h_prev[j];
        gates[j] = r, gates[H + j] = z, gates[2 * H + j] = n;
        break;
      }
    }
  }
}

template <class T>
ForwardRecord run_forward(const RnnGeometry& g, const T* x, const T* lengths, const T* h0,
                          const T* c0, const RnnWeights<T>& w) {
  const int64_t N = g.N, H = g.H, D = g.directions(), GH = g.gates() * H;
  const bool lstm = g.cell == RnnCell::lstm, gru = g.cell == RnnCell::gru;
  ForwardRecord rec;
  rec.input.emplace_back(x, x + g.T * N * g.C);
  rec.hT.assign(size_t(g.passes() * N * H), 0.0);
  rec.cT.assign(size_t(g.passes() * N * H), 0.0);
  for (int64_t l = 0; l < g.layers; ++l) {
    const std::vector<double>& in = rec.input[size_t(l)];
    std::vector<double> out(size_t(g.T * N * D * H), 0.0);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t p = l * D + d;
      const PassWeights<T> pw = pass_weights(g, w, p);
      std::vector<double> gates(size_t(g.T * N * GH), 0.0), cell, hid_n;
      if (lstm) cell.assign(size_t(g.T * N * H), 0.0);
      if (gru) hid_n.assign(size_t(g.T * N * H), 0.0);
      for (int64_t n = 0; n < N; ++n) {
        std::vector<double> h = zeros(H), c = zeros(H), h_new = zeros(H), c_new = zeros(H);
        for (int64_t j = 0; j < H; ++j) {
          if (h0) h[size_t(j)] = double(h0[(p * N + n) * H + j]);
          if (c0 && lstm) c[size_t(j)] = double(c0[(p * N + n) * H + j]);
        }
        const int64_t len = sequence_length(g, lengths, n);
        for (int64_t s = 0; s < len; ++s) {
          const int64_t t = step_time(d, len, s), tn = t * N + n;
          step_forward(g, pw, &in[size_t(tn * pw.Cl)], h.data(), c.data(), &gates[size_t(tn * GH)],
                       lstm ? &cell[size_t(tn * H)] : c_new.data(),
                       gru ? &hid_n[size_t(tn * H)] : c_new.data(), h_new.data());
          if (lstm) c.assign(&cell[size_t(tn * H)], &cell[size_t(tn * H + H)]);
          h = h_new;
          for (int64_t j = 0; j < H; ++j) out[size_t((tn * D + d) * H + j)] = h[size_t(j)];
        }
        for (int64_t j = 0; j < H; ++j) {
          rec.hT[size_t((p * N + n) * H + j)] = h[size_t(j)];
          rec.cT[size_t((p * N + n) * H + j)] = c[size_t(j)];
        }
      }
      rec.gates.push_back(std::move(gates));
      rec.cell.push_back(std::move(cell));
      rec.hid_n.push_back(std::move(hid_n));
    }
    rec.out.push_back(out);
    if (l + 1 < g.layers) rec.input.push_back(std::move(out));
  }
  return rec;
}

// One pass's weight-gradient sums, in double, added to the caller's arrays at the end.
struct PassGradSums {
  std::vector<double> w_ih, w_hh, b_ih, b_hh;
};

template <class T>
void add_to(T* dst, const std::vector<double>& sums) {
  if (!dst) return;
  for (size_t i = 0; i < sums.size(); ++i) dst[i] = T(double(dst[i]) + sums[i]);
}

}  // namespace

template <class T>
void rnn_forward(const RnnGeometry& g, const T* x, const T* lengths, const T* h0, const T* c0,
                 const RnnWeights<T>& w, T* y, T* hT, T* cT) {
  const ForwardRecord rec = run_forward(g, x, lengths, h0, c0, w);
  const std::vector<double>& out = rec.out.back();
  for (size_t i = 0; i < out.size(); ++i) y[i] = T(out[i]);
  for (size_t i = 0; i < rec.hT.size(); ++i) {
    if (hT) hT[i] = T(rec.hT[i]);
    if (cT && g.cell == RnnCell::lstm) cT[i] = T(rec.cT[i]);
  }
}

template <class T>
void rnn_backward(const RnnGeometry& g, const T* x, const T* lengths, const T* h0, const T* c0,
                  const RnnWeights<T>& w, const T* dy, const T* dhT, const T* dcT, T* dx, T* dh0,
                  T* dc0, const RnnWeightGrads<T>& dw) {
  const int64_t N = g.N, H = g.H, D = g.directions(), G = g.gates(), GH = G * H;
  const bool lstm = g.cell == RnnCell::lstm, gru = g.cell == RnnCell::gru;
  const ForwardRecord rec = run_forward(g, x, lengths, h0, c0, w);
  // dL/d(output of the current layer) [T, N, D*H]; the top layer's is dy.
  std::vector<double> dout(size_t(g.T * N * D * H), 0.0);
  if (dy) dout.assign(dy, dy + dout.size());
  for (int64_t l = g.layers - 1; l >= 0; --l) {
    const std::vector<double>& in = rec.input[size_t(l)];
    const std::vector<double>& out = rec.out[size_t(l)];
    const int64_t Cl = g.input_size(l);
    std::vector<double> din(size_t(g.T * N * Cl), 0.0);  // dL/d(input of this layer)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t p = l * D + d;
      const PassWeights<T> pw = pass_weights(g, w, p);
      const std::vector<double>& gates = rec.gates[size_t(p)];
      PassGradSums sums{zeros(GH * Cl), zeros(GH * H), zeros(GH), zeros(GH)};
      std::vector<double> dxp = zeros(GH), dhp = zeros(GH), h_prev = zeros(H), c_prev = zeros(H);
      for (int64_t n = 0; n < N; ++n) {
        std::vector<double> dh = zeros(H), dc = zeros(H), dh_prev = zeros(H);
        for (int64_t j = 0; j < H; ++j) {
          if (dhT) dh[size_t(j)] = double(dhT[(p * N + n) * H + j]);
          if (dcT && lstm) dc[size_t(j)] = double(dcT[(p * N + n) * H + j]);
        }
        const int64_t len = sequence_length(g, lengths, n);
        for (int64_t s = len - 1; s >= 0; --s) {
          const int64_t t = step_time(d, len, s), tn = t * N + n;
          const int64_t prev = s == 0 ? -1 : step_time(d, len, s - 1) * N + n;
          for (int64_t j = 0; j < H; ++j) {
            const size_t sj = size_t(j);
            h_prev[sj] = prev >= 0 ? out[size_t((prev * D + d) * H + j)]
                                   : (h0 ? double(h0[(p * N + n) * H + j]) : 0.0);
            if (lstm) {
              c_prev[sj] = prev >= 0 ? rec.cell[size_t(p)][size_t(prev * H + j)]
                                     : (c0 ? double(c0[(p * N + n) * H + j]) : 0.0);
            }
            dh[sj] += dout[size_t((tn * D + d) * H + j)];
          }
          const double* a = &gates[size_t(tn * GH)];
          for (int64_t j = 0; j < H; ++j) {
            const size_t sj = size_t(j);
            switch (g.cell) {
              case RnnCell::rnn_tanh:
                dxp[sj] = dh[sj] * (1.0 - a[j] * a[j]);
                break;
              case RnnCell::rnn_relu:
                dxp[sj] = a[j] > 0.0 ? dh[sj] : 0.0;
                break;
              case RnnCell::lstm: {
                const double i = a[j], f = a[H + j], gg = a[2 * H + j], o = a[3 * H + j];
                const double tc = std::tanh(rec.cell[size_t(p)][size_t(tn * H + j)]);
                const double dct = dc[sj] + dh[sj] * o * (1.0 - tc * tc);
                dxp[sj] = dct * gg * i * (1.0 - i);
                dxp[size_t(H + j)] = dct * c_prev[sj] * f * (1.0 - f);
                dxp[size_t(2 * H + j)] = dct * i * (1.0 - gg * gg);
                dxp[size_t(3 * H + j)] = dh[sj] * tc * o * (1.0 - o);
                dc[sj] = dct * f;
                break;
              }
              case RnnCell::gru: {
                const double r = a[j], z = a[H + j], nn = a[2 * H + j];
                const double dan = dh[sj] * (1.0 - z) * (1.0 - nn * nn);
                dxp[sj] = dan * rec.hid_n[size_t(p)][size_t(tn * H + j)] * r * (1.0 - r);
                dxp[size_t(H + j)] = dh[sj] * (h_prev[sj] - nn) * z * (1.0 - z);
                dxp[size_t(2 * H + j)] = dan;
                dhp[size_t(2 * H + j)] = dan * r;
                break;
              }
            }
          }
          for (int64_t r = 0; r < GH; ++r) {
            if (!(gru && r >= 2 * H)) dhp[size_t(r)] = dxp[size_t(r)];
          }
          for (int64_t k = 0; k < H; ++k) {
            dh_prev[size_t(k)] = gru ? dh[size_t(k)] * a[H + k] : 0.0;
          }
          for (int64_t r = 0; r < GH; ++r) {
            const double gx = dxp[size_t(r)], gh = dhp[size_t(r)];
            sums.b_ih[size_t(r)] += gx;
            sums.b_hh[size_t(r)] += gh;
            for (int64_t k = 0; k < Cl; ++k) {
              sums.w_ih[size_t(r * Cl + k)] += gx * in[size_t(tn * Cl + k)];
              din[size_t(tn * Cl + k)] += gx * double(pw.w_ih[r * Cl + k]);
            }
            for (int64_t k = 0; k < H; ++k) {
              sums.w_hh[size_t(r * H + k)] += gh * h_prev[size_t(k)];
              dh_prev[size_t(k)] += gh * double(pw.w_hh[r * H + k]);
            }
          }
          dh = dh_prev;
        }
        for (int64_t j = 0; j < H; ++j) {
          if (dh0) dh0[(p * N + n) * H + j] = T(dh[size_t(j)]);
          if (dc0 && lstm) dc0[(p * N + n) * H + j] = T(dc[size_t(j)]);
        }
      }
      auto entry = [p](const std::vector<T*>& v) { return v.empty() ? nullptr : v[size_t(p)]; };
      add_to(entry(dw.w_ih), sums.w_ih);
      add_to(entry(dw.w_hh), sums.w_hh);
      add_to(entry(dw.b_ih), sums.b_ih);
      add_to(entry(dw.b_hh), sums.b_hh);
    }
    dout = std::move(din);
  }
  if (dx) {
    for (size_t i = 0; i < dout.size(); ++i) dx[i] = T(dout[i]);
  }
}

#define CREMA_RNN_REF_INSTANTIATE(T)                                                            \
  template void rnn_forward<T>(const RnnGeometry&, const T*, const T*, const T*, const T*,      \
                               const RnnWeights<T>&, T*, T*, T*);                               \
  template void rnn_backward<T>(const RnnGeometry&, const T*, const T*, const T*, const T*,     \
                                const RnnWeights<T>&, const T*, const T*, const T*, T*, T*, T*, \
                                const RnnWeightGrads<T>&);
CREMA_RNN_REF_INSTANTIATE(float)
CREMA_RNN_REF_INSTANTIATE(double)
#undef CREMA_RNN_REF_INSTANTIATE

}  // namespace crema::kernels::ref
