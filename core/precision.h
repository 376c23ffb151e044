// Precision: a net's arithmetic and the dtype its activations are stored in (model.precision),
// as torch.autocast chooses them:
//
//   fp32  products and storage in fp32
//   tf32  products on tensor cores with TF32 operands (10-bit mantissa), storage fp32
//   bf16  products on tensor cores with bf16 operands, activations stored in bf16
//   fp16  products on tensor cores with fp16 operands, activations stored in fp16, and the loss
//         scaled dynamically so small gradients survive fp16's range (optim/loss_scale.h)
//
// In every precision the master weights, their gradients and the solver state stay fp32, and
// the layers that need range or accumulate (batch-norm statistics, softmax, losses) compute in
// fp32 (core/net_precision.h: which layer runs which dtype).
#pragma once

#include <optional>
#include <string>

#include "core/tensor.h"

namespace crema {

enum class Precision { fp32, tf32, bf16, fp16 };

const char* precision_name(Precision precision);  // "fp32", "tf32", "bf16", "fp16"
std::optional<Precision> parse_precision(const std::string& text);
// The dtype activations are stored in: f32 (fp32, tf32), bf16 or f16.
DType activation_dtype(Precision precision);

}  // namespace crema
