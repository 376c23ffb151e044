// Net's divergence diagnosis (net.h): which layer's top or which parameter first holds a NaN or
// an infinity. Detection happens elsewhere, cheaply, on sums the training loop keeps on the
// device; these functions run once afterwards to name the culprit, so they may read every tensor
// back to the host.
#include <algorithm>
#include <cmath>

#include "core/net.h"

namespace crema {
namespace {

bool all_finite(const Tensor& t) {
  if (!t.defined()) return true;
  const std::vector<float> values = t.to_vector();
  return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

}  // namespace

std::string Net::first_nonfinite_layer(Context& ctx) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    forward_layer(i, ctx);
    for (const Blob* top : wiring_[i].tops) {
      if (windows_[blob_index_of(top)].parent) continue;  // checked with its Concat's top
      if (!all_finite(top->value)) return layers_[i]->name();
    }
  }
  return "";
}

std::string Net::first_nonfinite_grad() const {
  for (const Param* p : learnable_) {
    if (!all_finite(p->grad)) return p->name;
  }
  return "";
}

std::string Net::first_nonfinite_param() const {
  for (const Param* p : learnable_) {
    if (!all_finite(p->value)) return p->name;
  }
  for (const Buffer* b : buffers_) {
    if (!all_finite(b->value)) return b->name;
  }
  return "";
}

}  // namespace crema
