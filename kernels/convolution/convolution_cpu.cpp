// 2-D convolution, fast CPU path: im2col + one GEMM per chunk of images.
//
// A chunk of m images is unfolded side by side into one matrix, so each GEMM is long in its
// m*P*Q direction (a per-image GEMM is short: 64 columns for LeNet's conv2) while the matrices
// of one chunk stay in cache between im2col and the GEMM (README.md has the measurements behind
// the chunk size). Per group (Cg = C/G input and Kg = K/G output channels, CRS = Cg*R*S) and
// per chunk of images n0 .. n0+m-1:
//
//   forward   col[CRS, m*PQ]   = im2col(x[n, group's channels])
//             out[Kg, m*PQ]    = w_g[Kg, CRS] * col
//             y[n, k, PQ]      = out[k, (n-n0)*PQ ..] + bias[k]              (reorder + bias)
//   data      dyk[Kg, m*PQ]    = dy[n, group's k, PQ]                         (reorder)
//             dcol[CRS, m*PQ]  = w_g^T * dyk
//             dx[n, group's c] = col2im(dcol)
//   filter    col, dyk as above;  dw_g[Kg, CRS] += dyk * col^T               (inner dim m*PQ)
//
// y and dy may be windows of wider tensors (core/VIEWS.md): their images `y_stride` floats apart
// instead of K*PQ (0 means K*PQ); only the base of each image moves, so the sums are the same.
//
// A chunk of one image needs no reorder: y[n]'s and dy[n]'s group slices are [Kg, PQ] matrices
// already, so the GEMMs write and read them in place.
//
// Pointwise geometries (1x1 filter, stride 1, no padding) in chunks of one image go further:
// col would be a copy of x[n]'s group slice, [Cg, HW] with HW = PQ, so there is no im2col (the
// GEMMs read x in place) and no col2im (backward data's GEMM writes dx in place): the same GEMMs
// as before, minus a copy. When P*Q is small enough for chunks of several images (7x7 maps), the
// copy that lays them side by side buys a wider GEMM, and im2col stays.
//
// Threads: with at least two images per thread, each thread takes an even share of the batch
// and walks it in its own chunks with one-thread GEMMs (no synchronization until the end; the
// filter gradient goes to a private partial sum per thread, added up at the end). With fewer
// images, the chunks are walked in order and all threads share each one: im2col, col2im and the
// reorders over (image, channel) pairs, the GEMM split by sgemm itself.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/convolution/convolution.h"
#include "kernels/gemm/gemm.h"

namespace crema::kernels::cpu {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A chunk holds enough images for about kChunkColumns GEMM columns per thread working on it (a
// GEMM pays per call for packing the filter and per column panel for loading and storing its C
// tile: narrow GEMMs pay that often), but no more than fit kChunkColFloatsPerThread floats of
// col (512 KiB, half the L2 of the Zen cores this was measured on), so that col is still in
// cache when the GEMM packs it.
constexpr int64_t kChunkColumns = 256;
constexpr int64_t kChunkColFloatsPerThread = 128 * 1024;

// Sizes derived from the geometry and the thread count, shared by the three passes.
struct Plan {
  int64_t Cg, Kg;          // channels per group
  int64_t HW, PQ, RS;      // image, output and filter areas
  int64_t CRS;             // rows of col: Cg*R*S
  int64_t y_stride;        // elements between images of y and dy: K*PQ, or more in a window
  int teams;               // threads that take their own images (1: all threads share chunks)
  int threads_per_chunk;   // threads working on one chunk
  int64_t chunk;           // images per chunk, at most
  int64_t chunk_floats;    // scratch of one chunk (see make_plan)
  bool pointwise;          // col is x itself: a pointwise geometry in chunks of one image
  Im2colGeometry channel;  // the patches of one channel of one image
};

Plan make_plan(const Conv2dGeometry& g, int num_threads, int64_t y_stride = 0) {
  Plan plan;
  plan.Cg = g.C / g.groups;
  plan.Kg = g.K / g.groups;
  plan.HW = g.H * g.W;
  plan.PQ = g.P() * g.Q();
  plan.RS = g.R * g.S;
  plan.CRS = plan.Cg * plan.RS;
  plan.y_stride = y_stride > 0 ? y_stride : g.K * plan.PQ;
  const int threads = std::max(1, num_threads);
  const bool own_images = g.N >= 2 * threads && threads > 1;
  plan.teams = own_images ? threads : 1;
  plan.threads_per_chunk = own_images ? 1 : threads;
  const int64_t images_per_team = ceil_div(g.N, plan.teams);
  const int64_t long_enough = ceil_div(kChunkColumns * plan.threads_per_chunk, plan.PQ);
  const int64_t fit = kChunkColFloatsPerThread * plan.threads_per_chunk / (plan.CRS * plan.PQ);
  plan.chunk = std::clamp<int64_t>(std::min(long_enough, fit), 1, images_per_team);
  plan.pointwise = g.pointwise() && plan.chunk == 1;
  // col [CRS, chunk*PQ], and out or dyk [Kg, chunk*PQ] when a chunk needs a reorder; nothing when
  // the GEMMs work in place.
  plan.chunk_floats =
      plan.pointwise ? 0 : (plan.CRS + (plan.chunk > 1 ? plan.Kg : 0)) * plan.chunk * plan.PQ;
  plan.channel = g.group_patches();
  plan.channel.C = 1;
  return plan;
}

// Calls body(team, n0, m, scratch, threads) for every chunk of images [n0, n0 + m), where
// scratch holds `scratch_floats` floats private to the team and `threads` is how many threads
// body may use. Teams get contiguous, even shares of the batch.
template <class Body>
void for_each_chunk(const Conv2dGeometry& g, const Plan& plan, float* workspace,
                    int64_t scratch_floats, Body body) {
  if (plan.teams == 1) {
    for (int64_t n0 = 0; n0 < g.N; n0 += plan.chunk) {
      body(0, n0, std::min(plan.chunk, g.N - n0), workspace, plan.threads_per_chunk);
    }
    return;
  }
#pragma omp parallel num_threads(plan.teams)
  {
    const int team = omp_get_thread_num(), teams = omp_get_num_threads();
    const int64_t begin = g.N * team / teams, end = g.N * (team + 1) / teams;
    for (int64_t n0 = begin; n0 < end; n0 += plan.chunk) {
      body(team, n0, std::min(plan.chunk, end - n0), workspace + team * scratch_floats, 1);
    }
  }
}

// Calls f(i, j) for i < rows, j < cols on `threads` OpenMP threads. One thread runs plain
// loops: even an inactive `omp parallel` costs about a microsecond, which adds up over the
// per-image calls of a team.
template <class F>
void parallel_for_2d(int threads, int64_t rows, int64_t cols, F f) {
  if (threads <= 1) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) f(i, j);
    }
    return;
  }
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) f(i, j);
  }
}

// col[CRS, m*PQ] of images n0..n0+m-1, channels of `group` of x [N,C,H,W]: im2col into
// `scratch`, or, for a pointwise geometry (m = 1), x[n0]'s group slice itself.
const float* im2col_chunk(const Conv2dGeometry& g, const Plan& plan, const float* x, int64_t n0,
                          int64_t m, int64_t group, float* scratch, int threads) {
  if (plan.pointwise) return x + (n0 * g.C + group * plan.Cg) * plan.HW;
  const int64_t ld = m * plan.PQ;
  parallel_for_2d(threads, m, plan.Cg, [&](int64_t i, int64_t c) {
    const float* image = x + ((n0 + i) * g.C + group * plan.Cg + c) * plan.HW;
    im2col(plan.channel, image, scratch + c * plan.RS * ld + i * plan.PQ, ld);
  });
  return scratch;
}

// dx[n0..n0+m-1, channels of `group`] = col2im(dcol[CRS, m*PQ]) (written).
void col2im_chunk(const Conv2dGeometry& g, const Plan& plan, const float* dcol, int64_t n0,
                  int64_t m, int64_t group, float* dx, int threads) {
  const int64_t ld = m * plan.PQ;
  parallel_for_2d(threads, m, plan.Cg, [&](int64_t i, int64_t c) {
    float* image = dx + ((n0 + i) * g.C + group * plan.Cg + c) * plan.HW;
    std::fill(image, image + plan.HW, 0.0f);
    col2im(plan.channel, dcol + c * plan.RS * ld + i * plan.PQ, ld, image);
  });
}

// dy[n0..n0+m-1, channels of `group`, PQ] as one matrix dyk[Kg, m*PQ]: for one image that is
// dy itself; for several, a copy into the chunk's scratch, after its col [CRS, m*PQ].
const float* gathered_dy(const Conv2dGeometry& g, const Plan& plan, const float* dy, int64_t n0,
                         int64_t m, int64_t group, float* chunk_scratch, int threads) {
  if (m == 1) return dy + n0 * plan.y_stride + group * plan.Kg * plan.PQ;
  const int64_t ld = m * plan.PQ;
  float* scratch = chunk_scratch + plan.CRS * ld;
  parallel_for_2d(threads, m, plan.Kg, [&](int64_t i, int64_t k) {
    const float* src = dy + (n0 + i) * plan.y_stride + (group * plan.Kg + k) * plan.PQ;
    std::memcpy(scratch + k * ld + i * plan.PQ, src, size_t(plan.PQ) * sizeof(float));
  });
  return scratch;
}

// y[n0..n0+m-1, channels of `group`, PQ] <- out[Kg, m*PQ] + bias.
void scatter_y(const Conv2dGeometry& g, const Plan& plan, const float* out, const float* bias,
               int64_t n0, int64_t m, int64_t group, float* y, int threads) {
  const int64_t ld = m * plan.PQ;
  parallel_for_2d(threads, m, plan.Kg, [&](int64_t i, int64_t k) {
    const float b = bias ? bias[group * plan.Kg + k] : 0.0f;
    const float* src = out + k * ld + i * plan.PQ;
    float* dst = y + (n0 + i) * plan.y_stride + (group * plan.Kg + k) * plan.PQ;
    for (int64_t j = 0; j < plan.PQ; ++j) dst[j] = src[j] + b;
  });
}

// y_n[k, PQ] = bias[k] for k < Kg (one image's outputs of one group, before the GEMM adds to it).
void fill_bias(const Plan& plan, const float* bias, float* y_n, int threads) {
  parallel_for_2d(threads, plan.Kg, 1, [&](int64_t k, int64_t) {
    std::fill(y_n + k * plan.PQ, y_n + (k + 1) * plan.PQ, bias[k]);
  });
}

// Per team: the chunk buffers, plus a private partial dw_g [Kg, CRS] when teams work apart.
int64_t filter_scratch_floats(const Plan& plan) {
  return plan.chunk_floats + (plan.teams > 1 ? plan.Kg * plan.CRS : 0);
}

}  // namespace

size_t conv2d_forward_workspace(const Conv2dGeometry& g, int num_threads) {
  const Plan plan = make_plan(g, num_threads);
  return size_t(plan.teams * plan.chunk_floats);
}

size_t conv2d_backward_data_workspace(const Conv2dGeometry& g, int num_threads) {
  const Plan plan = make_plan(g, num_threads);
  return size_t(plan.teams * plan.chunk_floats);
}

size_t conv2d_backward_filter_workspace(const Conv2dGeometry& g, int num_threads) {
  const Plan plan = make_plan(g, num_threads);
  return size_t(plan.teams * filter_scratch_floats(plan));
}

void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, float* workspace, int num_threads, int64_t y_stride) {
  const Plan plan = make_plan(g, num_threads, y_stride);
  for (int64_t group = 0; group < g.groups; ++group) {
    const float* w_g = w + group * plan.Kg * plan.CRS;  // [Kg, CRS]
    auto body = [&](int, int64_t n0, int64_t m, float* scratch, int threads) {
      const int64_t cols = m * plan.PQ;
      const float* col = im2col_chunk(g, plan, x, n0, m, group, scratch, threads);  // [CRS, m*PQ]
      if (m == 1) {  // y[n0, group's k, PQ] is the GEMM's output as it stands
        float* y_n = y + n0 * plan.y_stride + group * plan.Kg * plan.PQ;  // [Kg, PQ]
        if (bias) fill_bias(plan, bias + group * plan.Kg, y_n, threads);
        sgemm(false, false, plan.Kg, cols, plan.CRS, 1.0f, w_g, plan.CRS, col, cols,
              bias ? 1.0f : 0.0f, y_n, cols, threads);
      } else {
        float* out = scratch + plan.CRS * cols;  // [Kg, m*PQ]
        sgemm(false, false, plan.Kg, cols, plan.CRS, 1.0f, w_g, plan.CRS, col, cols, 0.0f, out,
              cols, threads);
        scatter_y(g, plan, out, bias, n0, m, group, y, threads);
      }
    };
    for_each_chunk(g, plan, workspace, plan.chunk_floats, body);
  }
}

void conv2d_backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx,
                          float* workspace, int num_threads, int64_t dy_stride) {
  const Plan plan = make_plan(g, num_threads, dy_stride);
  for (int64_t group = 0; group < g.groups; ++group) {
    const float* w_g = w + group * plan.Kg * plan.CRS;  // [Kg, CRS]
    auto body = [&](int, int64_t n0, int64_t m, float* scratch, int threads) {
      const int64_t cols = m * plan.PQ;
      const float* dyk = gathered_dy(g, plan, dy, n0, m, group, scratch, threads);
      // Pointwise: dcol is dx[n0]'s group slice, written by the GEMM; else scratch, then col2im.
      float* dcol = plan.pointwise ? dx + (n0 * g.C + group * plan.Cg) * plan.HW : scratch;
      sgemm(true, false, plan.CRS, cols, plan.Kg, 1.0f, w_g, plan.CRS, dyk, cols, 0.0f, dcol, cols,
            threads);
      if (!plan.pointwise) col2im_chunk(g, plan, dcol, n0, m, group, dx, threads);
    };
    for_each_chunk(g, plan, workspace, plan.chunk_floats, body);
  }
}

void conv2d_backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                            float* workspace, int num_threads, int64_t dy_stride) {
  const Plan plan = make_plan(g, num_threads, dy_stride);
  const int64_t scratch_floats = filter_scratch_floats(plan), KCRS = plan.Kg * plan.CRS;
  // A team's partial dw_g [Kg, CRS] sits after its chunk buffers.
  auto partial = [&](int team) { return workspace + team * scratch_floats + plan.chunk_floats; };
  for (int64_t group = 0; group < g.groups; ++group) {
    float* dw_g = dw + group * KCRS;  // [Kg, CRS]
    if (plan.teams > 1) {
      for (int team = 0; team < plan.teams; ++team) {
        std::fill(partial(team), partial(team) + KCRS, 0.0f);
      }
    }
    auto body = [&](int team, int64_t n0, int64_t m, float* scratch, int threads) {
      const int64_t cols = m * plan.PQ;
      const float* col = im2col_chunk(g, plan, x, n0, m, group, scratch, threads);  // [CRS, m*PQ]
      const float* dyk = gathered_dy(g, plan, dy, n0, m, group, scratch, threads);
      float* sum = plan.teams > 1 ? partial(team) : dw_g;
      sgemm(false, true, plan.Kg, plan.CRS, cols, 1.0f, dyk, cols, col, cols, 1.0f, sum, plan.CRS,
            threads);
    };
    for_each_chunk(g, plan, workspace, scratch_floats, body);
    if (plan.teams > 1) {
#pragma omp parallel for schedule(static) num_threads(plan.teams)
      for (int64_t i = 0; i < KCRS; ++i) {
        float sum = 0.0f;
        for (int team = 0; team < plan.teams; ++team) sum += partial(team)[i];
        dw_g[i] += sum;
      }
    }
  }
}

void conv2d_backward_bias(const Conv2dGeometry& g, const float* dy, float* db, int num_threads,
                          int64_t dy_stride) {
  channel_bias_gradient(g.N, g.K, g.P() * g.Q(), dy, db, num_threads, dy_stride);
}

void add_channel_bias(int64_t N, int64_t C, int64_t HW, const float* bias, float* y,
                      int num_threads) {
  parallel_for_2d(std::max(1, num_threads), N, C, [&](int64_t n, int64_t c) {
    float* row = y + (n * C + c) * HW;
    const float b = bias[c];
#pragma omp simd
    for (int64_t i = 0; i < HW; ++i) row[i] += b;
  });
}

void channel_bias_gradient(int64_t N, int64_t C, int64_t HW, const float* dy, float* db,
                           int num_threads, int64_t dy_stride) {
  const int threads = std::max(1, num_threads);
  const int64_t stride = dy_stride > 0 ? dy_stride : C * HW;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t c = 0; c < C; ++c) {
    float sum = 0.0f;
    for (int64_t n = 0; n < N; ++n) {
      const float* row = dy + n * stride + c * HW;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < HW; ++j) sum += row[j];
    }
    db[c] += sum;
  }
}

}  // namespace crema::kernels::cpu
