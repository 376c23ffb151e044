// The per-(sample n, hidden unit j) math of one RNN step, forward and backward, shared by the
// separate pointwise kernels of v1 (rnn_cuda_pointwise.cu) and the GEMM epilogues of v2
// (rnn_cuda_fused.cu). Index conventions: rnn_cuda_internal.h.
#pragma once

#include <cmath>

#include "kernels/rnn/rnn_cuda_internal.h"

namespace crema::kernels::cuda::rnn_detail {

__device__ inline float sigmoid(float v) {
  return 1.0f / (1.0f + expf(-v));
}

__host__ __device__ constexpr int gate_count(RnnCell cell) {
  return cell == RnnCell::lstm ? 4 : cell == RnnCell::gru ? 3 : 1;
}

// Sample n's length clamped into [0, T]; a NaN reads as 0.
__device__ inline int clamped_length(const float* lengths, int n, int T) {
  if (!lengths) return T;
  const float v = lengths[n];
  return v >= float(T) ? T : (v >= 1.0f ? int(v) : 0);
}

// Time of sample n at step s (active) or the time whose zero output it writes (inactive).
__device__ inline int step_time(int step, int len, bool reverse) {
  return step < len && reverse ? len - 1 - step : step;
}

__device__ inline float bias(const float* b, int i) {
  return b ? b[i] : 0.0f;
}

// Step a.step for (n, j); hp(k) is w_hh h_{s-1} of gate k (no bias). a.hp is not read.
template <class HiddenProjection>
__device__ void forward_cell(const GatesForward& a, int n, int j, HiddenProjection hp) {
  const int H = a.H, G = gate_count(a.cell);
  const int idx = n * H + j;
  const int len = clamped_length(a.lengths, n, a.T);
  const bool active = a.step < len;
  const int t = step_time(a.step, len, a.reverse);
  const int64_t gh = int64_t(G) * H;
  const float* xp = a.xp + (int64_t(t) * a.N + n) * gh + j;  // gate k at xp[k * H]
  float* gates = a.gates ? a.gates + int64_t(n) * gh + j : nullptr;
  const float h_prev = a.h_prev[idx];
  float h = h_prev, c = 0.0f;
  if (a.cell == RnnCell::lstm) c = a.c_prev[idx];
  if (active) {
    auto pre = [&](int k) {
      return xp[k * H] + hp(k) + bias(a.b_ih, k * H + j) + bias(a.b_hh, k * H + j);
    };
    if (a.cell == RnnCell::lstm) {
      const float i = sigmoid(pre(0)), f = sigmoid(pre(1)), g = tanhf(pre(2)), o = sigmoid(pre(3));
      c = f * c + i * g;
      h = o * tanhf(c);
      if (gates) gates[0] = i, gates[H] = f, gates[2 * H] = g, gates[3 * H] = o;
    } else if (a.cell == RnnCell::gru) {
      const float r = sigmoid(pre(0)), z = sigmoid(pre(1));
      const float hn = hp(2) + bias(a.b_hh, 2 * H + j);
      const float nn = tanhf(xp[2 * H] + bias(a.b_ih, 2 * H + j) + r * hn);
      h = (1.0f - z) * nn + z * h_prev;
      if (gates) gates[0] = r, gates[H] = z, gates[2 * H] = nn;
      if (a.hp_n) a.hp_n[idx] = hn;
    } else {
      const float v = pre(0);
      h = a.cell == RnnCell::rnn_tanh ? tanhf(v) : fmaxf(v, 0.0f);
    }
  } else {
    // Nothing is read from these for an inactive sample; written so no stale value survives.
    if (gates) {
      for (int k = 0; k < G; ++k) gates[k * H] = 0.0f;
    }
    if (a.hp_n) a.hp_n[idx] = 0.0f;
  }
  a.h[idx] = h;
  if (a.cell == RnnCell::lstm) a.c[idx] = c;
  a.y[(int64_t(t) * a.N + n) * a.ldy + j] = active ? h : 0.0f;
  if (a.hT) a.hT[idx] = h;
  if (a.cT) a.cT[idx] = c;
}

// Backward step a.step for (n, j); dh_rec is the part of dh_s that came through w_hh from step
// s+1 when the caller did not already add it into a.dh_in.
__device__ inline void backward_cell(const GatesBackward& a, int n, int j, float dh_rec) {
  const int H = a.H, G = gate_count(a.cell);
  const int idx = n * H + j;
  const int len = clamped_length(a.lengths, n, a.T);
  const bool active = a.step < len;
  const int t = step_time(a.step, len, a.reverse);
  const int64_t gh = int64_t(G) * H;
  float* dxp = a.dxp + (int64_t(t) * a.N + n) * gh + j;
  float* dhp = a.dhp + int64_t(n) * gh + j;
  float dh = (a.dh_in ? a.dh_in[idx] : 0.0f) + dh_rec;
  float dc = a.cell == RnnCell::lstm && a.dc_in ? a.dc_in[idx] : 0.0f;
  if (!active) {
    // h_s = h_{s-1}, c_s = c_{s-1}: the gradients pass through; the output at t >= len is the
    // constant 0, so its dy is dropped.
    for (int k = 0; k < G; ++k) dxp[k * H] = 0.0f, dhp[k * H] = 0.0f;
    a.dh_out[idx] = dh;
    if (a.cell == RnnCell::lstm) a.dc_out[idx] = dc;
    return;
  }
  if (a.dy) dh += a.dy[(int64_t(t) * a.N + n) * a.ldy + j];
  const float* gates = a.gates + int64_t(n) * gh + j;
  if (a.cell == RnnCell::lstm) {
    // h = o tanh(c), c = f c_prev + i g.
    const float i = gates[0], f = gates[H], g = gates[2 * H], o = gates[3 * H];
    const float tc = tanhf(a.c[idx]);
    dc += dh * o * (1.0f - tc * tc);
    const float di = dc * g * i * (1.0f - i), df = dc * a.c_prev[idx] * f * (1.0f - f);
    const float dg = dc * i * (1.0f - g * g), d_o = dh * tc * o * (1.0f - o);
    dxp[0] = dhp[0] = di, dxp[H] = dhp[H] = df, dxp[2 * H] = dhp[2 * H] = dg;
    dxp[3 * H] = dhp[3 * H] = d_o;
    a.dh_out[idx] = 0.0f;
    a.dc_out[idx] = dc * f;
  } else if (a.cell == RnnCell::gru) {
    // h = (1 - z) n + z h_prev, n = tanh(xp_n + b_in + r hp_n), hp_n = w_hn h_prev + b_hn.
    const float r = gates[0], z = gates[H], nn = gates[2 * H];
    const float dn = dh * (1.0f - z) * (1.0f - nn * nn);
    const float dz = dh * (a.h_prev[idx] - nn) * z * (1.0f - z);
    const float dr = dn * a.hp_n[idx] * r * (1.0f - r);
    dxp[0] = dhp[0] = dr, dxp[H] = dhp[H] = dz;
    dxp[2 * H] = dn, dhp[2 * H] = dn * r;
    a.dh_out[idx] = dh * z;
  } else {
    const float h = a.h[idx];
    const float da = a.cell == RnnCell::rnn_tanh ? dh * (1.0f - h * h) : (h > 0.0f ? dh : 0.0f);
    dxp[0] = dhp[0] = da;
    a.dh_out[idx] = 0.0f;
  }
}

}  // namespace crema::kernels::cuda::rnn_detail
