#include "core/precision.h"

namespace crema {

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
  }
  return "?";
}

std::optional<Precision> parse_precision(const std::string& text) {
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16, Precision::fp16}) {
    if (text == precision_name(p)) return p;
  }
  return std::nullopt;
}

DType activation_dtype(Precision precision) {
  switch (precision) {
    case Precision::bf16:
      return DType::bf16;
    case Precision::fp16:
      return DType::f16;
    default:
      return DType::f32;
  }
}

}  // namespace crema
