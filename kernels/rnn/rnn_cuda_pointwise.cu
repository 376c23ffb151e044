// The CUDA RNN's pointwise kernels (v1): one fused gate kernel per forward step (biases,
// nonlinearities, cell update, outputs, saved activations, lengths: rnn_cuda_cells.cuh), one
// fused gate-gradient kernel per backward step, and the bias gradients as deterministic column
// sums (every version). One thread per (sample n, hidden unit j); consecutive threads take
// consecutive j, so every access to a [.., N, G*H] or [.., N, H] row is coalesced.
#include "kernels/common/launch.h"
#include "kernels/rnn/rnn_cuda_cells.cuh"
#include "kernels/rnn/rnn_cuda_internal.h"

namespace crema::kernels::cuda::rnn_detail {
namespace {

__global__ void gates_forward_kernel(GatesForward a) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= a.N * a.H) return;
  const int n = idx / a.H, j = idx % a.H;
  const float* hp = a.hp + int64_t(n) * gate_count(a.cell) * a.H + j;
  forward_cell(a, n, j, [&](int k) { return hp[k * a.H]; });
}

__global__ void gates_backward_kernel(GatesBackward a) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= a.N * a.H) return;
  backward_cell(a, idx / a.H, idx % a.H, 0.0f);
}

// Block b sums columns [32 b, 32 b + 32): thread (ty, tx) adds rows ty, ty + 8, ... of column
// 32 b + tx in order, then the 8 partials are added in ty order.
constexpr int kSumRows = kThreads / 32;

__global__ void column_sums_kernel(const float* __restrict__ a, int64_t rows, int cols,
                                   float* __restrict__ db) {
  __shared__ float partial[kSumRows][32];
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const int col = blockIdx.x * 32 + tx;
  float sum = 0.0f;
  if (col < cols) {
    for (int64_t r = ty; r < rows; r += kSumRows) sum += a[r * cols + col];
  }
  partial[ty][tx] = sum;
  __syncthreads();
  if (ty == 0 && col < cols) {
    float total = 0.0f;
    for (int k = 0; k < kSumRows; ++k) total += partial[k][tx];
    db[col] += total;
  }
}

// One thread per (n, j), no grid-stride loop: every block is needed.
int cell_blocks(int64_t count) {
  return int(ceil_div(count, kThreads));
}

}  // namespace

void gates_forward(const GatesForward& a, gpu::Stream stream) {
  gates_forward_kernel<<<cell_blocks(int64_t(a.N) * a.H), kThreads, 0, stream>>>(a);
  gpu::check_launch("rnn gates_forward");
}

void gates_backward(const GatesBackward& a, gpu::Stream stream) {
  gates_backward_kernel<<<cell_blocks(int64_t(a.N) * a.H), kThreads, 0, stream>>>(a);
  gpu::check_launch("rnn gates_backward");
}

void column_sums_accumulate(const float* a, int64_t rows, int64_t cols, float* db,
                            gpu::Stream stream) {
  column_sums_kernel<<<int(ceil_div(cols, 32)), kThreads, 0, stream>>>(a, rows, int(cols), db);
  gpu::check_launch("rnn column_sums");
}

}  // namespace crema::kernels::cuda::rnn_detail
