// Recurrent networks, fast CPU path: the fused gate loops of one sequence at one step (a row of
// H elements), forward and backward. See rnn_cpu_internal.h for the arguments.
//
// These loops are most of the CPU path's time after the GEMMs: each element evaluates up to five
// sigmoids and tanhs. glibc's expf and tanhf are scalar calls, which keep a loop from being
// vectorized, so exp is Cephes' expf (a degree-6 polynomial on [-ln2/2, ln2/2] and an exponent
// put together by hand: within 2 ulp) and tanh is Cephes' tanhf (an odd polynomial below |x| =
// 0.625, 1 - 2 / (exp(2|x|) + 1) above: within a few ulp), written without calls or branches so
// that GCC vectorizes the loops. The library is compiled for baseline x86-64 (4-wide SSE2), so
// each row function is also cloned for AVX2 and AVX-512 (target_clones: the loader picks the
// clone for the CPU it runs on); the result of an element does not depend on the clone.
#include <cstdint>
#include <cstring>

#include "kernels/rnn/rnn_cpu_internal.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CREMA_RNN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CREMA_RNN_CLONES
#endif
#define CREMA_RNN_INLINE inline __attribute__((always_inline))

namespace crema::kernels::cpu::rnn_detail {
namespace {

// e^v for v in [-87, 87] (clamped): e^v = 2^k e^r, k = round(v / ln2), |r| <= ln2 / 2.
CREMA_RNN_INLINE float exp_poly(float v) {
  v = v < -87.0f ? -87.0f : (v > 87.0f ? 87.0f : v);
  // Round to nearest by adding and subtracting 1.5 * 2^23 (no call, vectorizes everywhere).
  const float k = (v * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (v - k * 0.693359375f) - k * -2.12194440e-4f;  // ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t bits = (int32_t(k) + 127) << 23;  // 2^k, k in [-126, 126]
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

CREMA_RNN_INLINE float sigmoid(float v) {
  return 1.0f / (1.0f + exp_poly(-v));
}

CREMA_RNN_INLINE float tanh_poly(float v) {
  const float a = v < 0.0f ? -v : v;
  const float z = v * v;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * v + v;
  const float large = 1.0f - 2.0f / (exp_poly(2.0f * a) + 1.0f);
  return a < 0.625f ? small : (v < 0.0f ? -large : large);
}

}  // namespace

CREMA_RNN_CLONES
void rnn_forward_row(int64_t H, bool relu, float* __restrict a, const float* __restrict hp,
                     const float* __restrict b_ih, const float* __restrict b_hh,
                     float* __restrict h) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float v = a[j] + b_ih[j] + hp[j] + b_hh[j];
    const float out = relu ? (v > 0.0f ? v : 0.0f) : tanh_poly(v);
    a[j] = out;
    h[j] = out;
  }
}

CREMA_RNN_CLONES
void lstm_forward_row(int64_t H, float* __restrict a, const float* __restrict hp,
                      const float* __restrict b_ih, const float* __restrict b_hh,
                      float* __restrict c, float* __restrict c_saved, float* __restrict h) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float i = sigmoid(a[j] + b_ih[j] + hp[j] + b_hh[j]);
    const float f = sigmoid(a[H + j] + b_ih[H + j] + hp[H + j] + b_hh[H + j]);
    const float g = tanh_poly(a[2 * H + j] + b_ih[2 * H + j] + hp[2 * H + j] + b_hh[2 * H + j]);
    const float o = sigmoid(a[3 * H + j] + b_ih[3 * H + j] + hp[3 * H + j] + b_hh[3 * H + j]);
    const float cj = f * c[j] + i * g;
    a[j] = i, a[H + j] = f, a[2 * H + j] = g, a[3 * H + j] = o;
    c[j] = cj;
    c_saved[j] = cj;
    h[j] = o * tanh_poly(cj);
  }
}

CREMA_RNN_CLONES
void gru_forward_row(int64_t H, float* __restrict a, const float* __restrict hp,
                     const float* __restrict b_ih, const float* __restrict b_hh,
                     float* __restrict hn_saved, float* __restrict h) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float r = sigmoid(a[j] + b_ih[j] + hp[j] + b_hh[j]);
    const float z = sigmoid(a[H + j] + b_ih[H + j] + hp[H + j] + b_hh[H + j]);
    const float hn = hp[2 * H + j] + b_hh[2 * H + j];
    const float n = tanh_poly(a[2 * H + j] + b_ih[2 * H + j] + r * hn);
    a[j] = r, a[H + j] = z, a[2 * H + j] = n;
    hn_saved[j] = hn;
    h[j] = (1.0f - z) * n + z * h[j];
  }
}

CREMA_RNN_CLONES
void rnn_backward_row(int64_t H, bool relu, const float* __restrict a, const float* __restrict dout,
                      float* __restrict dh, float* __restrict gx) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float d = dh[j] + dout[j];
    gx[j] = relu ? (a[j] > 0.0f ? d : 0.0f) : d * (1.0f - a[j] * a[j]);
    dh[j] = 0.0f;
  }
}

CREMA_RNN_CLONES
void lstm_backward_row(int64_t H, const float* __restrict a, const float* __restrict c,
                       const float* __restrict c_prev, const float* __restrict dout,
                       float* __restrict dh, float* __restrict dc, float* __restrict gx) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
    const float d = dh[j] + dout[j];
    const float tc = tanh_poly(c[j]);
    const float dct = dc[j] + d * o * (1.0f - tc * tc);
    gx[j] = dct * g * i * (1.0f - i);
    gx[H + j] = dct * c_prev[j] * f * (1.0f - f);
    gx[2 * H + j] = dct * i * (1.0f - g * g);
    gx[3 * H + j] = d * tc * o * (1.0f - o);
    dc[j] = dct * f;
    dh[j] = 0.0f;
  }
}

CREMA_RNN_CLONES
void gru_backward_row(int64_t H, const float* __restrict a, const float* __restrict hn,
                      const float* __restrict h_prev, const float* __restrict dout,
                      float* __restrict dh, float* __restrict gx, float* __restrict gh) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float r = a[j], z = a[H + j], n = a[2 * H + j];
    const float d = dh[j] + dout[j];
    const float dan = d * (1.0f - z) * (1.0f - n * n);
    const float dr = dan * hn[j] * r * (1.0f - r);
    const float dz = d * (h_prev[j] - n) * z * (1.0f - z);
    gx[j] = dr, gx[H + j] = dz, gx[2 * H + j] = dan;
    gh[j] = dr, gh[H + j] = dz, gh[2 * H + j] = dan * r;
    dh[j] = d * z;
  }
}

}  // namespace crema::kernels::cpu::rnn_detail
