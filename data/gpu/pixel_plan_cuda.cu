#include "data/gpu/pixel_plan_cuda.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace crema::data::cuda {
namespace {

// Colour steps as run_pixel_plan computes them, each operation rounded on its own.
__device__ inline float gray3(float r, float g, float b) {
  return __fadd_rn(__fadd_rn(__fmul_rn(0.2989f, r), __fmul_rn(0.587f, g)), __fmul_rn(0.114f, b));
}

template <int C>
__device__ inline float gray_of(const float (&v)[C]) {
  if constexpr (C == 3) {
    return gray3(v[0], v[1], v[2]);
  } else {
    return v[0];
  }
}

__device__ inline float blend(float x, float y, float ratio, float complement) {
  return fminf(fmaxf(__fadd_rn(__fmul_rn(ratio, x), __fmul_rn(complement, y)), 0.0f), 1.0f);
}

// torchvision's hue turn of one RGB pixel by `factor` (color_ops.cpp adjust_hue, the same
// operations in the same order).
__device__ void turn_hue(float& r, float& g, float& b, float factor) {
  const float maxc = fmaxf(fmaxf(r, g), b), minc = fminf(fminf(r, g), b);
  const bool flat = maxc == minc;
  const float chroma = __fsub_rn(maxc, minc);
  const float s = __fdiv_rn(chroma, flat ? 1.0f : maxc);
  const float divisor = flat ? 1.0f : chroma;
  const float rc = __fdiv_rn(__fsub_rn(maxc, r), divisor);
  const float gc = __fdiv_rn(__fsub_rn(maxc, g), divisor);
  const float bc = __fdiv_rn(__fsub_rn(maxc, b), divisor);
  float h = maxc == r   ? __fsub_rn(bc, gc)
            : maxc == g ? __fsub_rn(__fadd_rn(2.0f, rc), bc)
                        : __fsub_rn(__fadd_rn(4.0f, gc), rc);
  h = __fadd_rn(__fdiv_rn(h, 6.0f), 1.0f);
  h = h >= 1.0f ? __fsub_rn(h, 1.0f) : h;
  h = __fadd_rn(h, factor);
  h = h >= 1.0f ? __fsub_rn(h, 1.0f) : h < 0.0f ? __fadd_rn(h, 1.0f) : h;
  const float h6 = __fmul_rn(h, 6.0f);
  const float sector = floorf(h6);
  const float f = __fsub_rn(h6, sector);
  const int k = int(sector) % 6;
  auto unit = [](float x) { return fminf(fmaxf(x, 0.0f), 1.0f); };
  const float p = unit(__fmul_rn(maxc, __fsub_rn(1.0f, s)));
  const float q = unit(__fmul_rn(maxc, __fsub_rn(1.0f, __fmul_rn(s, f))));
  const float t = unit(__fmul_rn(maxc, __fsub_rn(1.0f, __fmul_rn(s, __fsub_rn(1.0f, f)))));
  const float v = maxc;
  switch (k) {
    case 0:
      r = v, g = t, b = p;
      break;
    case 1:
      r = q, g = v, b = p;
      break;
    case 2:
      r = p, g = v, b = t;
      break;
    case 3:
      r = p, g = q, b = v;
      break;
    case 4:
      r = t, g = p, b = v;
      break;
    default:
      r = v, g = p, b = q;
      break;
  }
}

// Runs the steps of `phase` (0: those before the first contrast; p: the p-th contrast and the
// steps after it up to the next) on one pixel's channels; `mean` is the image's mean gray at
// that contrast.
template <int C>
__device__ void run_phase(float (&v)[C], const ColorStep* steps, int count, int phase, float mean) {
  int at = 0;
  for (int k = 0; k < count; ++k) {
    const ColorStep& step = steps[k];
    if (step.kind == ColorStep::contrast) ++at;
    if (at != phase) continue;
    const float f = step.factor;
    const float complement = float(1.0 - double(f));
    switch (step.kind) {
      case ColorStep::affine:
        for (int c = 0; c < C; ++c) {
          v[c] = __fdiv_rn(__fsub_rn(__fmul_rn(v[c], step.mul[c]), step.sub[c]), step.div[c]);
        }
        break;
      case ColorStep::brightness:
        for (int c = 0; c < C; ++c) v[c] = blend(v[c], 0.0f, f, complement);
        break;
      case ColorStep::contrast:
        for (int c = 0; c < C; ++c) v[c] = blend(v[c], mean, f, complement);
        break;
      case ColorStep::saturation:
        if (C == 3) {
          const float gray = gray_of<C>(v);
          for (int c = 0; c < C; ++c) v[c] = blend(v[c], gray, f, complement);
        }
        break;
      case ColorStep::hue:
        if constexpr (C == 3) turn_hue(v[0], v[1], v[2], f);
        break;
    }
  }
}

// out[b, c, y, x]: the rows-then-columns weighted sum of sample b's source, then phase 0.
template <int C>
__global__ void geometry_kernel(const PlanDesc* descs, const int32_t* firsts, const float* weights,
                                const ColorStep* steps, const uint8_t* sources, float* out, int H,
                                int W) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  const int b = blockIdx.z;
  if (x >= W || y >= H) return;
  const PlanDesc d = descs[b];
  const int row0 = firsts[d.rows_first + y], col0 = firsts[d.cols_first + x];
  const float* wy = weights + d.rows_weight + int64_t(y) * d.rows_taps;
  const float* wx = weights + d.cols_weight + int64_t(x) * d.cols_taps;
  const int64_t plane = int64_t(d.height) * d.width;
  float v[C];
  for (int c = 0; c < C; ++c) {
    float sum = 0.0f;
    if (row0 >= 0 && col0 >= 0) {
      const uint8_t* src = sources + d.source + c * plane;  // [height, width]
      for (int i = 0; i < d.rows_taps; ++i) {
        const uint8_t* row = src + int64_t(row0 + i) * d.width + col0;
        float across = 0.0f;
        for (int j = 0; j < d.cols_taps; ++j) {
          across = __fadd_rn(across, __fmul_rn(wx[j], float(row[j])));
        }
        sum = __fadd_rn(sum, __fmul_rn(wy[i], across));
      }
    }
    v[c] = sum;
  }
  run_phase<C>(v, steps + d.step_begin, d.step_count, 0, 0.0f);
  for (int c = 0; c < C; ++c) out[((int64_t(b) * C + c) * H + y) * W + x] = v[c];
}

__device__ bool has_phase(const PlanDesc& d, const ColorStep* steps, int phase) {
  int contrasts = 0;
  for (int k = 0; k < d.step_count; ++k)
    contrasts += steps[d.step_begin + k].kind == ColorStep::contrast;
  return contrasts >= phase;
}

constexpr int kMeanThreads = 256;

// means[b] = the mean gray of out[b], for the samples that have `phase`; one block per sample.
template <int C>
__global__ void mean_kernel(const PlanDesc* descs, const ColorStep* steps, const float* out,
                            int64_t plane, int phase, float* means) {
  const int b = blockIdx.x;
  if (!has_phase(descs[b], steps, phase)) return;
  const float* image = out + int64_t(b) * C * plane;  // [C, plane]
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < plane; i += kMeanThreads) {
    sum +=
        C == 3 ? double(gray3(image[i], image[plane + i], image[2 * plane + i])) : double(image[i]);
  }
  __shared__ double partial[kMeanThreads];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kMeanThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) means[b] = float(partial[0] / double(plane));
}

// Phase `phase`'s steps on every pixel of the samples that have it.
template <int C>
__global__ void phase_kernel(const PlanDesc* descs, const ColorStep* steps, float* out,
                             int64_t plane, int phase, const float* means) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int b = blockIdx.y;
  const PlanDesc d = descs[b];
  if (i >= plane || !has_phase(d, steps, phase)) return;
  float* image = out + int64_t(b) * C * plane;
  float v[C];
  for (int c = 0; c < C; ++c) v[c] = image[c * plane + i];
  run_phase<C>(v, steps + d.step_begin, d.step_count, phase, means[b]);
  for (int c = 0; c < C; ++c) image[c * plane + i] = v[c];
}

size_t aligned(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

template <int C>
void launch(const PlanDesc* descs, const int32_t* firsts, const float* weights,
            const ColorStep* steps, const uint8_t* sources, float* out, int B, int H, int W,
            int phases, float* means, cudaStream_t stream) {
  const dim3 block(32, 8);
  const dim3 grid((W + 31) / 32, (H + 7) / 8, B);
  geometry_kernel<C><<<grid, block, 0, stream>>>(descs, firsts, weights, steps, sources, out, H, W);
  gpu::check_launch("decode: gpu geometry");
  const int64_t plane = int64_t(H) * W;
  for (int phase = 1; phase < phases; ++phase) {
    mean_kernel<C><<<B, kMeanThreads, 0, stream>>>(descs, steps, out, plane, phase, means);
    gpu::check_launch("decode: gpu contrast mean");
    const dim3 pixels(unsigned((plane + 255) / 256), B);
    phase_kernel<C><<<pixels, 256, 0, stream>>>(descs, steps, out, plane, phase, means);
    gpu::check_launch("decode: gpu colour steps");
  }
}

}  // namespace

PlanRunner::~PlanRunner() {
  if (host_ != nullptr) gpu::pinned_free(host_);
  if (device_ != nullptr) gpu::device_free(device_);
}

void PlanRunner::run(const std::vector<const PixelPlan*>& plans,
                     const std::vector<int64_t>& source_offsets, const uint8_t* sources, float* out,
                     gpu::Stream stream) {
  const int B = int(plans.size());
  if (B == 0) return;
  const PixelPlan& first = *plans[0];
  const int C = int(first.channels), H = int(first.height()), W = int(first.width());
  CREMA_CHECK(C == 1 || C == 3, "PlanRunner: plans of 1 or 3 channels only");
  // The packed arrays: descriptors, firsts, weights, steps, then the means.
  std::vector<PlanDesc> descs(static_cast<size_t>(B));
  size_t n_first = 0, n_weight = 0, n_step = 0;
  int phases = 1;
  for (int b = 0; b < B; ++b) {
    const PixelPlan& p = *plans[size_t(b)];
    CREMA_CHECK(p.channels == C && p.height() == H && p.width() == W,
                "PlanRunner: the plans of a batch must give one shape");
    PlanDesc& d = descs[size_t(b)];
    d.source = source_offsets[size_t(b)];
    d.height = int32_t(p.source.height);
    d.width = int32_t(p.source.width);
    d.rows_taps = int32_t(p.rows.taps);
    d.cols_taps = int32_t(p.cols.taps);
    d.rows_first = int32_t(n_first);
    d.cols_first = int32_t(n_first + p.rows.first.size());
    n_first += p.rows.first.size() + p.cols.first.size();
    d.rows_weight = int32_t(n_weight);
    d.cols_weight = int32_t(n_weight + p.rows.weights.size());
    n_weight += p.rows.weights.size() + p.cols.weights.size();
    d.step_begin = int32_t(n_step);
    d.step_count = int32_t(p.steps.size());
    n_step += p.steps.size();
    int contrasts = 0;
    for (const ColorStep& step : p.steps) contrasts += step.kind == ColorStep::contrast;
    phases = std::max(phases, 1 + contrasts);
  }
  const size_t at_first = aligned(descs.size() * sizeof(PlanDesc));
  const size_t at_weight = at_first + aligned(n_first * sizeof(int32_t));
  const size_t at_step = at_weight + aligned(n_weight * sizeof(float));
  const size_t at_means = at_step + aligned(n_step * sizeof(ColorStep));
  const size_t total = at_means + aligned(size_t(B) * sizeof(float));
  if (total > capacity_) {
    if (host_ != nullptr) gpu::pinned_free(host_);
    if (device_ != nullptr) gpu::device_free(device_);
    host_ = device_ = nullptr;
    capacity_ = 0;
    host_ = gpu::pinned_allocate(total * 2);
    device_ = gpu::device_allocate(total * 2);
    capacity_ = total * 2;
  }
  auto* bytes = static_cast<uint8_t*>(host_);
  std::memcpy(bytes, descs.data(), descs.size() * sizeof(PlanDesc));
  auto* firsts = reinterpret_cast<int32_t*>(bytes + at_first);
  auto* weights = reinterpret_cast<float*>(bytes + at_weight);
  auto* steps = reinterpret_cast<ColorStep*>(bytes + at_step);
  for (const PixelPlan* p : plans) {
    for (const PlanAxis* axis : {&p->rows, &p->cols}) {
      firsts = std::copy(axis->first.begin(), axis->first.end(), firsts);
      weights = std::copy(axis->weights.begin(), axis->weights.end(), weights);
    }
    steps = std::copy(p->steps.begin(), p->steps.end(), steps);
  }
  gpu::copy(device_, host_, at_means, stream);
  auto* device = static_cast<uint8_t*>(device_);
  const auto* d_descs = reinterpret_cast<const PlanDesc*>(device);
  const auto* d_firsts = reinterpret_cast<const int32_t*>(device + at_first);
  const auto* d_weights = reinterpret_cast<const float*>(device + at_weight);
  const auto* d_steps = reinterpret_cast<const ColorStep*>(device + at_step);
  auto* d_means = reinterpret_cast<float*>(device + at_means);
  if (C == 3) {
    launch<3>(d_descs, d_firsts, d_weights, d_steps, sources, out, B, H, W, phases, d_means,
              stream);
  } else {
    launch<1>(d_descs, d_firsts, d_weights, d_steps, sources, out, B, H, W, phases, d_means,
              stream);
  }
}

}  // namespace crema::data::cuda
