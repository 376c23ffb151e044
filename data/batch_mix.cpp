#include "data/batch_mix.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace crema::data {
namespace {

// log G for G ~ Gamma(a, 1). Marsaglia and Tsang for a >= 1: with d = a - 1/3, c = 1 / sqrt(9 d),
// x ~ N(0, 1) and v = (1 + c x)^3 > 0, accept d v when log u < x^2 / 2 + d - d v + d log v.
// For a < 1, Gamma(a) = Gamma(a + 1) U^(1/a), whose logarithm cannot underflow.
double log_gamma_variate(Random& random, double a) {
  if (a < 1.0) {
    const double u = 1.0 - random.uniform01();  // in (0, 1]
    return log_gamma_variate(random, a + 1.0) + std::log(u) / a;
  }
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    const double x = random.gaussian(0.0, 1.0);
    const double t = 1.0 + c * x;
    if (t <= 0.0) continue;
    const double v = t * t * t;
    const double u = random.uniform01();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return std::log(d) + std::log(v);
  }
}

void check_key(bool ok, const std::string& key, double value, const std::string& rule) {
  if (ok) return;
  std::ostringstream message;
  message << "batch_mix." << key << " is " << value << ", " << rule;
  throw Error(message.str());
}

}  // namespace

void check_batch_mix(const BatchMixOptions& o) {
  check_key(std::isfinite(o.mixup_alpha) && o.mixup_alpha >= 0, "mixup_alpha", o.mixup_alpha,
            "must be 0 (off) or positive");
  check_key(std::isfinite(o.cutmix_alpha) && o.cutmix_alpha >= 0, "cutmix_alpha", o.cutmix_alpha,
            "must be 0 (off) or positive");
  if (o.mixup_alpha == 0 && o.cutmix_alpha == 0) {
    throw Error(
        "batch_mix mixes nothing: give mixup_alpha (e.g. 0.2) or cutmix_alpha (e.g. 1.0), or both");
  }
  check_key(o.switch_prob >= 0 && o.switch_prob <= 1, "switch_prob", o.switch_prob,
            "must be in [0, 1]");
  check_key(o.prob >= 0 && o.prob <= 1, "prob", o.prob, "must be in [0, 1]");
  check_key(o.label_smoothing >= 0 && o.label_smoothing < 1, "label_smoothing", o.label_smoothing,
            "must be in [0, 1)");
}

double beta_symmetric(Random& random, double alpha) {
  // G1 / (G1 + G2) = 1 / (1 + exp(log G2 - log G1)).
  const double log_g1 = log_gamma_variate(random, alpha);
  const double log_g2 = log_gamma_variate(random, alpha);
  return 1.0 / (1.0 + std::exp(log_g2 - log_g1));
}

MixDraw cutmix_box(double lambda, int64_t H, int64_t W, int64_t r_y, int64_t r_x) {
  const double r = 0.5 * std::sqrt(1.0 - lambda);
  const int64_t half_h = int64_t(r * double(H)), half_w = int64_t(r * double(W));
  MixDraw box;
  box.kind = MixDraw::Kind::cutmix;
  box.y0 = std::max<int64_t>(r_y - half_h, 0);
  box.y1 = std::min(r_y + half_h, H);
  box.x0 = std::max<int64_t>(r_x - half_w, 0);
  box.x1 = std::min(r_x + half_w, W);
  box.lambda = 1.0 - double((box.y1 - box.y0) * (box.x1 - box.x0)) / double(H * W);
  return box;
}

MixDraw draw_batch_mix(const BatchMixOptions& options, int64_t H, int64_t W, Random& random) {
  if (options.prob < 1.0 && !(random.uniform01() < options.prob)) return {};
  const bool cut = options.cutmix_alpha > 0 &&
                   (options.mixup_alpha <= 0 || random.uniform01() < options.switch_prob);
  const double lambda = beta_symmetric(random, cut ? options.cutmix_alpha : options.mixup_alpha);
  if (!cut) return {MixDraw::Kind::mixup, lambda};
  const int64_t r_y = int64_t(random.below(uint64_t(H)));
  const int64_t r_x = int64_t(random.below(uint64_t(W)));
  return cutmix_box(lambda, H, W, r_y, r_x);
}

void one_hot_targets(const float* labels, int64_t N, int64_t K, double eps, float* targets) {
  const float off = float(eps / double(K)), on = float(1.0 - eps + eps / double(K));
  for (int64_t i = 0; i < N; ++i) {
    const float label = labels[i];
    if (!(label >= 0 && label < float(K) && label == std::floor(label))) {
      std::ostringstream message;
      message << "label " << label << " of sample " << i << " is not a class index in [0, " << K
              << ") (the width of the soft targets, model.inputs.label)";
      throw Error(message.str());
    }
    std::fill(targets + i * K, targets + (i + 1) * K, off);
    targets[i * K + int64_t(label)] = on;
  }
}

// Written as torchvision's x.roll(1, 0).mul_(1 - lambda).add_(x.mul(lambda)), in float32; from
// the last sample down, so that each partner is read before it is overwritten (the last sample,
// sample 0's partner, is kept aside).
void mixup_rows(float* rows, int64_t N, int64_t sample_numel, double lambda) {
  if (N == 0) return;
  const float own = float(lambda), other = float(1.0 - lambda);
  const std::vector<float> last(rows + (N - 1) * sample_numel, rows + N * sample_numel);
  for (int64_t i = N - 1; i >= 0; --i) {
    float* x = rows + i * sample_numel;
    const float* partner = i > 0 ? x - sample_numel : last.data();
    for (int64_t k = 0; k < sample_numel; ++k) x[k] = partner[k] * other + x[k] * own;
  }
}

void cutmix_paste(float* images, int64_t N, int64_t planes, int64_t H, int64_t W,
                  const MixDraw& box) {
  if (N == 0 || box.y1 <= box.y0 || box.x1 <= box.x0) return;
  const int64_t sample_numel = planes * H * W;
  const std::vector<float> last(images + (N - 1) * sample_numel, images + N * sample_numel);
  for (int64_t i = N - 1; i >= 0; --i) {
    float* x = images + i * sample_numel;
    const float* partner = i > 0 ? x - sample_numel : last.data();
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t y = box.y0; y < box.y1; ++y) {
        const int64_t row = (p * H + y) * W;
        std::copy(partner + row + box.x0, partner + row + box.x1, x + row + box.x0);
      }
    }
  }
}

void apply_batch_mix(const MixDraw& draw, const Shape& sample_shape, int64_t N, float* images,
                     int64_t K, float* targets) {
  const int64_t sample_numel = shape_numel(sample_shape);
  switch (draw.kind) {
    case MixDraw::Kind::none:
      return;
    case MixDraw::Kind::mixup:
      mixup_rows(images, N, sample_numel, draw.lambda);
      break;
    case MixDraw::Kind::cutmix: {
      const int64_t H = sample_shape[sample_shape.size() - 2], W = sample_shape.back();
      cutmix_paste(images, N, sample_numel / (H * W), H, W, draw);
      break;
    }
  }
  mixup_rows(targets, N, K, draw.lambda);
}

}  // namespace crema::data
