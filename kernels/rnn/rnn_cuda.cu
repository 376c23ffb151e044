// RNN / LSTM / GRU on CUDA, in cuDNN's structure. Index conventions: rnn_cuda_internal.h.
//
// v1 per_step_gemm, for each pass p = l*D + d:
//   forward   xp[T*N, G*H] = X_l[T*N, C_l] w_ih^T              one GEMM for all steps
//             for s = 0 .. T-1:
//               hp[N, G*H] = h_{s-1} w_hh^T                     one GEMM
//               gates_forward: biases, gates, c_s, h_s, y_t     one pointwise kernel
//   backward  for s = T-1 .. 0:
//               gates_backward: dxp_t, dhp_s, dc_{s-1}, the direct part of dh_{s-1}
//               dh_{s-1} += dhp_s w_hh                          one GEMM (skipped at s = 0 when
//                                                               dh0 is not wanted)
//             dW_ih += dxp^T X_l, dW_hh += dhp^T [h_{-1} .. h_{T-2}]   one GEMM each
//             db_ih += column sums of dxp, db_hh += column sums of dhp
//             dX_l (+)= dxp w_ih                                one GEMM (direction 1 adds)
// GEMMs are kernels::cuda::sgemm (best version); the gradient of layer l's input is the output
// gradient of layer l-1.
//
// v2 fused_step: v1 with each step's recurrent GEMM and pointwise kernel as one kernel
// (rnn_cuda_fused.cu): forward hp never leaves the chip; backward step s adds dhp_{s+1} w_hh to
// the carried dh in the GEMM that precedes its gate gradients, so only dh0 needs a plain sgemm.
//
// Reserve (training forward -> backward), per pass: h slots [T+1, N, H] (slot s+1 = h_s, slot 0
// = h0), c slots [T+1, N, H] (LSTM cell; GRU: slot s+1 = w_hh_n h_{s-1} + b_hn), gates [T, N, G*H]
// (activations), all by step (the Elman RNN keeps the h slots only); then the outputs of layers 0
// .. L-2, [T, N, D*H] each, by time. Without a reserve (inference) the states ping-pong between two
// slots of the workspace.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/gemm/gemm.h"
#include "kernels/rnn/rnn.h"
#include "kernels/rnn/rnn_cuda_internal.h"

namespace crema::kernels::cuda {
namespace {

using rnn_detail::GatesBackward;
using rnn_detail::GatesForward;

// Offsets (in floats) of every buffer in the reserve and the workspace.
struct Layout {
  int64_t T, N, H, G, D, L, TN, NH, GH;
  bool saves_gates;  // LSTM and GRU; the Elman RNN's backward needs h only

  explicit Layout(const RnnGeometry& g)
      : T(g.T),
        N(g.N),
        H(g.H),
        G(g.gates()),
        D(g.directions()),
        L(g.layers),
        TN(g.T * g.N),
        NH(g.N * g.H),
        GH(g.gates() * g.H),
        saves_gates(g.cell == RnnCell::lstm || g.cell == RnnCell::gru) {}

  // Reserve.
  int64_t pass_floats() const { return (T + 1) * NH + (saves_gates ? (T + 1) * NH + TN * GH : 0); }
  int64_t h_slots(int64_t p) const { return p * pass_floats(); }
  int64_t c_slots(int64_t p) const { return h_slots(p) + (T + 1) * NH; }
  int64_t gates(int64_t p) const { return c_slots(p) + (T + 1) * NH; }
  int64_t layer_output(int64_t l) const { return L * D * pass_floats() + l * TN * D * H; }
  int64_t reserve_floats() const { return layer_output(L - 1); }

  // Forward workspace: xp, hp; without a reserve also two h and two c slots and two layer
  // outputs.
  int64_t xp() const { return 0; }
  int64_t hp() const { return TN * GH; }
  int64_t inference_states() const { return hp() + N * GH; }
  int64_t inference_outputs() const { return inference_states() + 4 * NH; }
  int64_t forward_floats() const { return inference_outputs() + (L > 1 ? 2 * TN * D * H : 0); }
  // Backward workspace: dxp by time, dhp by step, dh, dc, two layer-output gradients.
  int64_t dxp() const { return 0; }
  int64_t dhp() const { return TN * GH; }
  int64_t dh() const { return 2 * TN * GH; }
  int64_t dc() const { return dh() + NH; }
  int64_t layer_grads() const { return dc() + NH; }
  int64_t backward_floats() const { return layer_grads() + (L > 1 ? 2 * TN * D * H : 0); }
};

void check_sizes(const RnnGeometry& g) {
  g.validate("cuda::rnn");
  const int64_t widest = std::max({g.gates() * g.H, g.C, g.directions() * g.H});
  if (g.T * g.N * widest >= INT32_MAX || g.N * g.gates() * g.H >= INT32_MAX) {
    throw Error("rnn (CUDA): T*N*max(G*H, C, D*H) = " + std::to_string(g.T * g.N * widest) +
                " elements exceed the kernels' 32-bit limit (2^31 - 1); use a smaller batch or "
                "split the sequence");
  }
}

void check_version(RnnVersion version) {
  if (version != RnnVersion::per_step_gemm && version != RnnVersion::fused_step) {
    throw Error("cuda::rnn: unknown version " + std::to_string(int(version)));
  }
}

// dst[N*H] = src, or 0 when src is null.
void init_state(float* dst, const float* src, int64_t count, gpu::Stream stream) {
  if (src) {
    gpu::copy(dst, src, size_t(count) * sizeof(float), stream);
  } else {
    gpu::fill(dst, size_t(count), 0.0f, stream);
  }
}

}  // namespace

size_t rnn_reserve_floats(const RnnGeometry& g, RnnVersion version) {
  check_version(version);
  return size_t(Layout(g).reserve_floats());
}

size_t rnn_workspace_floats(const RnnGeometry& g, RnnVersion version) {
  check_version(version);
  const Layout lay(g);
  return size_t(std::max(lay.forward_floats(), lay.backward_floats()));
}

void rnn_forward(const RnnGeometry& g, const float* x, const float* lengths, const float* h0,
                 const float* c0, const RnnWeights<float>& w, float* y, float* hT, float* cT,
                 float* reserve, float* workspace, gpu::Stream stream, RnnVersion version) {
  check_sizes(g);
  check_version(version);
  const Layout lay(g);
  const bool lstm = g.cell == RnnCell::lstm, training = reserve != nullptr;
  const bool fused = version == RnnVersion::fused_step;
  const int64_t DH = lay.D * lay.H;
  for (int64_t l = 0; l < lay.L; ++l) {
    const int64_t C_l = g.input_size(l);
    const float* X = l == 0     ? x
                     : training ? reserve + lay.layer_output(l - 1)
                                : workspace + lay.inference_outputs() + (l - 1) % 2 * lay.TN * DH;
    float* Y = l == lay.L - 1 ? y
               : training     ? reserve + lay.layer_output(l)
                              : workspace + lay.inference_outputs() + l % 2 * lay.TN * DH;
    for (int64_t d = 0; d < lay.D; ++d) {
      const int64_t p = l * lay.D + d;
      float* xp = workspace + lay.xp();
      float* hp = workspace + lay.hp();
      // States: T+1 slots in the reserve, or two slots of the workspace taken in turn.
      float* h_base = training ? reserve + lay.h_slots(p) : workspace + lay.inference_states();
      float* c_base = training ? reserve + lay.c_slots(p) : h_base + 2 * lay.NH;
      auto slot = [&](float* base, int64_t s) { return base + (training ? s : s % 2) * lay.NH; };
      sgemm(false, true, lay.TN, lay.GH, C_l, 1.0f, X, C_l, w.w_ih[p], C_l, 0.0f, xp, lay.GH,
            stream);
      init_state(h_base, h0 ? h0 + p * lay.NH : nullptr, lay.NH, stream);
      if (lstm) init_state(c_base, c0 ? c0 + p * lay.NH : nullptr, lay.NH, stream);
      for (int64_t s = 0; s < lay.T; ++s) {
        const bool last = s == lay.T - 1;
        if (!fused) {
          sgemm(false, true, lay.N, lay.GH, lay.H, 1.0f, slot(h_base, s), lay.H, w.w_hh[p], lay.H,
                0.0f, hp, lay.GH, stream);
        }
        GatesForward a{};
        a.cell = g.cell;
        a.N = int(lay.N), a.H = int(lay.H), a.T = int(lay.T), a.step = int(s);
        a.reverse = d == 1;
        a.lengths = lengths;
        a.xp = xp, a.hp = hp, a.b_ih = w.b_ih[p], a.b_hh = w.b_hh[p];
        a.h_prev = slot(h_base, s), a.h = slot(h_base, s + 1);
        if (lstm) a.c_prev = slot(c_base, s), a.c = slot(c_base, s + 1);
        if (training && lay.saves_gates) {
          a.gates = reserve + lay.gates(p) + s * lay.N * lay.GH;
          if (g.cell == RnnCell::gru) a.hp_n = slot(c_base, s + 1);
        }
        a.y = Y + d * lay.H, a.ldy = DH;
        if (last && hT) a.hT = hT + p * lay.NH;
        if (last && lstm && cT) a.cT = cT + p * lay.NH;
        if (fused) {
          rnn_detail::fused_forward_step(a, w.w_hh[p], stream);
        } else {
          rnn_detail::gates_forward(a, stream);
        }
      }
    }
  }
}

void rnn_backward(const RnnGeometry& g, const float* x, const float* lengths, const float* h0,
                  const float* c0, const RnnWeights<float>& w, const float* y, const float* reserve,
                  const float* dy, const float* dhT, const float* dcT, float* dx, float* dh0,
                  float* dc0, const RnnWeightGrads<float>& dw, float* workspace, gpu::Stream stream,
                  RnnVersion version) {
  // h0, c0 and y are in the reserve already (slot 0 of each pass, layer outputs).
  (void)h0, (void)c0, (void)y;
  check_sizes(g);
  check_version(version);
  CREMA_CHECK(reserve != nullptr, "cuda::rnn_backward needs the training forward's reserve");
  const Layout lay(g);
  const bool lstm = g.cell == RnnCell::lstm, fused = version == RnnVersion::fused_step;
  const int64_t DH = lay.D * lay.H;
  float* dxp = workspace + lay.dxp();
  float* dhp = workspace + lay.dhp();
  for (int64_t l = lay.L - 1; l >= 0; --l) {
    const int64_t C_l = g.input_size(l);
    const float* X = l == 0 ? x : reserve + lay.layer_output(l - 1);
    // The gradient of this layer's output, and where the gradient of its input goes.
    const float* dY = l == lay.L - 1 ? dy : workspace + lay.layer_grads() + l % 2 * lay.TN * DH;
    float* dX = l == 0 ? dx : workspace + lay.layer_grads() + (l - 1) % 2 * lay.TN * DH;
    for (int64_t d = 0; d < lay.D; ++d) {
      const int64_t p = l * lay.D + d;
      const float* h_base = reserve + lay.h_slots(p);
      const float* c_base = reserve + lay.c_slots(p);
      const float* dh_in = dhT ? dhT + p * lay.NH : nullptr;
      const float* dc_in = lstm && dcT ? dcT + p * lay.NH : nullptr;
      for (int64_t s = lay.T - 1; s >= 0; --s) {
        float* dh_out = s == 0 && dh0 ? dh0 + p * lay.NH : workspace + lay.dh();
        float* dc_out = s == 0 && lstm && dc0 ? dc0 + p * lay.NH : workspace + lay.dc();
        GatesBackward a{};
        a.cell = g.cell;
        a.N = int(lay.N), a.H = int(lay.H), a.T = int(lay.T), a.step = int(s);
        a.reverse = d == 1;
        a.lengths = lengths;
        a.h = h_base + (s + 1) * lay.NH, a.h_prev = h_base + s * lay.NH;
        if (lay.saves_gates) {
          a.gates = reserve + lay.gates(p) + s * lay.N * lay.GH;
          a.c = c_base + (s + 1) * lay.NH, a.c_prev = c_base + s * lay.NH;
          a.hp_n = a.c;
        }
        a.dy = dY ? dY + d * lay.H : nullptr, a.ldy = DH;
        a.dh_in = dh_in, a.dc_in = dc_in, a.dh_out = dh_out, a.dc_out = dc_out;
        a.dxp = dxp, a.dhp = dhp + s * lay.N * lay.GH;
        if (fused) {
          // Adds dhp_{s+1} w_hh, the part of dh_s that the previous launch left out.
          const float* dhp_next = s < lay.T - 1 ? dhp + (s + 1) * lay.N * lay.GH : nullptr;
          rnn_detail::fused_backward_step(a, dhp_next, w.w_hh[p], stream);
        } else {
          rnn_detail::gates_backward(a, stream);
        }
        if (s == 0 ? dh0 != nullptr : !fused) {
          sgemm(false, false, lay.N, lay.H, lay.GH, 1.0f, a.dhp, lay.GH, w.w_hh[p], lay.H, 1.0f,
                dh_out, lay.H, stream);
        }
        dh_in = dh_out, dc_in = dc_out;
      }
      if (dw.w_ih[p]) {
        sgemm(true, false, lay.GH, C_l, lay.TN, 1.0f, dxp, lay.GH, X, C_l, 1.0f, dw.w_ih[p], C_l,
              stream);
      }
      if (dw.w_hh[p]) {
        sgemm(true, false, lay.GH, lay.H, lay.TN, 1.0f, dhp, lay.GH, h_base, lay.H, 1.0f,
              dw.w_hh[p], lay.H, stream);
      }
      if (dw.b_ih[p]) rnn_detail::column_sums_accumulate(dxp, lay.TN, lay.GH, dw.b_ih[p], stream);
      if (dw.b_hh[p]) rnn_detail::column_sums_accumulate(dhp, lay.TN, lay.GH, dw.b_hh[p], stream);
      if (dX) {
        sgemm(false, false, lay.TN, C_l, lay.GH, 1.0f, dxp, lay.GH, w.w_ih[p], C_l,
              d == 0 ? 0.0f : 1.0f, dX, C_l, stream);
      }
    }
  }
}

}  // namespace crema::kernels::cuda
