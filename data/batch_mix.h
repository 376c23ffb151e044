// Batch mixing: mixup and cutmix, applied by the loader to a whole assembled batch, with the soft
// targets they need (torchvision.transforms.v2.MixUp / CutMix; timm's Mixup for choosing between
// them and for label smoothing).
//
// Targets. A batch of labels y[N] becomes one-hot rows t[N, K] (K classes), smoothed as timm's
// Mixup and torch's cross_entropy(label_smoothing=eps) smooth:  t = (1 - eps) onehot(y) + eps / K.
// Each sample is mixed with its predecessor in the batch, roll(1, 0): partner(i) = (i - 1) mod N
// (sample 0 takes the last one), as torchvision v2 does:
//
//   mixup   lambda ~ Beta(alpha, alpha)
//           x[i] = lambda x[i] + (1 - lambda) x[partner(i)]
//           t[i] = lambda t[i] + (1 - lambda) t[partner(i)]
//   cutmix  lambda ~ Beta(alpha, alpha); the last two axes are H x W. A box of about (1 - lambda)
//           of the area around a uniform centre (r_y, r_x) in [0, H) x [0, W), clipped:
//             r = sqrt(1 - lambda) / 2,  half_h = int(r H),  half_w = int(r W)
//             y0 = max(r_y - half_h, 0),  y1 = min(r_y + half_h, H)    (x0, x1 alike with W)
//           x[i][.., y0:y1, x0:x1] = x[partner(i)][.., y0:y1, x0:x1]; lambda is then corrected to
//           the pixels that stayed: lambda' = 1 - (y1 - y0)(x1 - x0) / (H W), and
//           t[i] = lambda' t[i] + (1 - lambda') t[partner(i)]
//
// Which one (timm's Mixup._params_per_batch): with probability `prob` the batch is mixed at all
// (else its targets are the smoothed one-hot rows); with both alphas > 0, cutmix with probability
// `switch_prob`, else mixup; with one alpha > 0, that one. torchvision's RandomChoice([MixUp,
// CutMix]) is switch_prob 0.5, prob 1.
//
// Randomness: one Random per batch, seeded from (seed, epoch, batch index) alone (the loader's
// batch_seed), so a batch mixes the same way whatever the worker count. Draw order: the `prob`
// test (only when prob < 1), the switch (only with both alphas), lambda, then for cutmix r_y, r_x.
//
// Beta(a, a) is drawn as G1 / (G1 + G2) with G1, G2 ~ Gamma(a, 1) (Marsaglia and Tsang's method,
// "A simple method for generating gamma variables", 2000), in logarithms so that a small alpha
// (0.1, where both gammas may underflow a double) still gives a lambda in [0, 1].
#pragma once

#include <cstdint>
#include "core/random.h"
#include "core/shape.h"

namespace crema::data {

// The `batch_mix` keys of a data split (apps/training/data_config.h), with timm's meaning.
struct BatchMixOptions {
  double mixup_alpha = 0.0;   // > 0 enables mixup
  double cutmix_alpha = 0.0;  // > 0 enables cutmix
  double switch_prob = 0.5;   // with both enabled: the probability of cutmix
  double prob = 1.0;          // the probability that a batch is mixed at all
  double label_smoothing = 0.0;
};

// Throws crema::Error naming the key ("batch_mix.mixup_alpha ...") for a negative or non-finite
// alpha, both alphas 0 (nothing to mix), a probability outside [0, 1], or a label_smoothing
// outside [0, 1).
void check_batch_mix(const BatchMixOptions& options);

// What one batch's draws decided.
struct MixDraw {
  enum class Kind { none, mixup, cutmix };
  Kind kind = Kind::none;
  double lambda = 1.0;  // the weight of a sample's own pixels and target (cutmix: corrected)
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;  // cutmix: the box, rows [y0, y1), columns [x0, x1)
};

// A Beta(alpha, alpha) variate, alpha > 0.
double beta_symmetric(Random& random, double alpha);

// torchvision v2 CutMix's box for `lambda` around the centre (r_y, r_x) of an H x W image, and
// the corrected lambda (the formulas above).
MixDraw cutmix_box(double lambda, int64_t H, int64_t W, int64_t r_y, int64_t r_x);

// The draws of one batch of H x W images (H, W unused without cutmix).
MixDraw draw_batch_mix(const BatchMixOptions& options, int64_t H, int64_t W, Random& random);

// t[N, K] = (1 - eps) onehot(labels) + eps / K; each label must be an integer in [0, K).
void one_hot_targets(const float* labels, int64_t N, int64_t K, double eps, float* targets);

// In place, over N samples of `sample_numel` floats: mixup's x[i] = lambda x[i] +
// (1 - lambda) x[partner(i)]. Used for images and, with sample_numel = K, for targets.
void mixup_rows(float* rows, int64_t N, int64_t sample_numel, double lambda);

// In place, over N samples of `planes` H x W planes: cutmix's paste of the partner's box.
void cutmix_paste(float* images, int64_t N, int64_t planes, int64_t H, int64_t W,
                  const MixDraw& box);

// The whole step on a batch: images [N, .., H, W] (sample_shape without N) and the targets [N, K],
// already one-hot, mixed as `draw` says.
void apply_batch_mix(const MixDraw& draw, const Shape& sample_shape, int64_t N, float* images,
                     int64_t K, float* targets);

}  // namespace crema::data
