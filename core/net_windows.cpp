// Net's windows (core/VIEWS.md): which Concat bottoms live inside their Concat's top, so that
// their producers write them there and the Concat copies nothing. Decided at each memory plan
// (net_memory.cpp), which then gives those bottoms no storage of their own.
#include <algorithm>

#include "core/net.h"
#include "core/shape.h"

namespace crema {

void Net::plan_windows() {
  const size_t nb = blobs_.size(), n = layers_.size();
  windows_.assign(nb, BlobWindow());
  if (memory_plan_ && concat_views_) {
    // How many times each blob is read, and by which layer it was last written.
    std::vector<int> reads(nb, 0);
    std::vector<int> writers(nb, 0);
    std::vector<std::pair<size_t, size_t>> producer(nb, {n, 0});  // (layer, top index)
    for (size_t i = 0; i < n; ++i) {
      for (const Blob* b : wiring_[i].bottoms) ++reads[blob_index_of(b)];
      for (size_t k = 0; k < wiring_[i].tops.size(); ++k) {
        const size_t t = blob_index_of(wiring_[i].tops[k]);
        ++writers[t];
        producer[t] = {i, k};
      }
    }
    std::vector<bool> fixed(nb, false);  // read outside the step, or its gradient set by the Net
    for (const auto& input : inputs_) fixed[blob_index_.at(input.first)] = true;
    for (const auto& [top, weight] : loss_tops_) fixed[blob_index_of(top)] = true;
    for (const std::string& name : kept_names_) fixed[blob_index_.at(name)] = true;
    for (size_t b : grads_to_zero_) fixed[b] = true;

    for (size_t i = 0; i < n; ++i) {
      const int axis = layers_[i]->joins_bottoms_along();
      const Wiring& w = wiring_[i];
      if (axis < 0 || axis > 1 || w.tops.size() != 1) continue;
      Blob* parent = w.tops[0];
      const Shape& whole = parent->value.shape();
      const int64_t inner = shape_count(whole, axis + 1, int(whole.size()));
      const int64_t outer = shape_count(whole, 0, axis);
      int64_t start = 0;  // along the axis
      for (const Blob* bottom : w.bottoms) {
        const size_t b = blob_index_of(bottom);
        const int64_t extent = bottom->value.dim(axis);
        const auto [layer, k] = producer[b];
        // Read by this Concat alone, written by one layer that can write a window, and of the
        // top's dtype and layout (a Convert in between is a producer that cannot).
        const bool window = !fixed[b] && reads[b] == 1 && writers[b] == 1 && layer < i &&
                            bottom != parent && bottom->value.dtype() == parent->value.dtype() &&
                            bottom->value.layout() == parent->value.layout() &&
                            layers_[layer]->writes_top_window(runs_on_, k);
        if (window) windows_[b] = {parent, outer, start * inner, whole[size_t(axis)] * inner};
        start += extent;
      }
    }
  }
  // Tell the layers: the producers their top windows, the Concats which bottoms are windows.
  for (size_t i = 0; i < n; ++i) {
    const Wiring& w = wiring_[i];
    for (size_t k = 0; k < w.tops.size(); ++k) {
      const BlobWindow& window = windows_[blob_index_of(w.tops[k])];
      layers_[i]->set_top_window(k, window.parent ? &window : nullptr);
    }
    if (layers_[i]->joins_bottoms_along() < 0) continue;
    for (size_t k = 0; k < w.bottoms.size(); ++k) {
      const BlobWindow& window = windows_[blob_index_of(w.bottoms[k])];
      layers_[i]->set_bottom_is_window(k, window.parent != nullptr && window.parent == w.tops[0]);
    }
  }
}

}  // namespace crema
