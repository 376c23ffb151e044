// Net's windows (core/VIEWS.md): which Concat bottoms live inside their Concat's top, so that
// their producers write them there and the Concat copies nothing, and which Slice tops live inside
// their Slice's bottom, so that the Slice copies nothing. Decided at each memory plan
// (net_memory.cpp), which then gives those blobs no storage of their own; kept only where they do
// not make the arena larger.
#include <algorithm>

#include "core/net.h"
#include "core/shape.h"

namespace crema {

namespace {

// How often each blob is read and written, its last writer and its last reader.
struct Uses {
  std::vector<int> reads, writers;
  std::vector<std::pair<size_t, size_t>> producer;  // (layer, top index); layer n: none
  std::vector<size_t> reader;                       // the last layer that reads it
};

}  // namespace

std::vector<std::vector<std::pair<size_t, BlobWindow>>> Net::window_candidates() const {
  const size_t nb = blobs_.size(), n = layers_.size();
  Uses u{std::vector<int>(nb, 0), std::vector<int>(nb, 0),
         std::vector<std::pair<size_t, size_t>>(nb, {n, 0}), std::vector<size_t>(nb, n)};
  for (size_t i = 0; i < n; ++i) {
    for (const Blob* b : wiring_[i].bottoms) {
      const size_t index = blob_index_of(b);
      ++u.reads[index];
      u.reader[index] = i;
    }
    for (size_t k = 0; k < wiring_[i].tops.size(); ++k) {
      const size_t t = blob_index_of(wiring_[i].tops[k]);
      ++u.writers[t];
      u.producer[t] = {i, k};
    }
  }
  std::vector<bool> fixed(nb, false);  // read outside the step, or its gradient set by the Net
  for (const auto& input : inputs_) fixed[blob_index_.at(input.first)] = true;
  for (const auto& [top, weight] : loss_tops_) fixed[blob_index_of(top)] = true;
  for (const std::string& name : kept_names_) fixed[blob_index_.at(name)] = true;
  std::vector<bool> zeroed(nb, false);  // its gradient zeroed by the Net before backward
  for (size_t b : grads_to_zero_) zeroed[b] = true;
  // Whether blob b's value shares its storage with another blob's (a Split's or Flatten's top).
  auto shared = [&](size_t b) {
    for (size_t j = 0; j < nb; ++j) {
      if (j != b && blobs_[j]->value.shares_storage(blobs_[b]->value)) return true;
    }
    return false;
  };

  std::vector<std::vector<std::pair<size_t, BlobWindow>>> candidates;
  for (size_t i = 0; i < n; ++i) {
    const Wiring& w = wiring_[i];
    std::vector<std::pair<size_t, BlobWindow>> windows;
    const int joins = layers_[i]->joins_bottoms_along();
    if (joins >= 0 && joins <= 1 && w.tops.size() == 1) {
      // A Concat: bottom b is a window of the top when it is read by this Concat alone, written
      // by one layer that can write a window, and of the top's dtype and layout (a Convert in
      // between is a producer that cannot).
      Blob* parent = w.tops[0];
      const Shape& whole = parent->value.shape();
      const int64_t inner = shape_count(whole, joins + 1, int(whole.size()));
      const int64_t outer = shape_count(whole, 0, joins);
      int64_t start = 0;  // along the axis
      for (const Blob* bottom : w.bottoms) {
        const size_t b = blob_index_of(bottom);
        const int64_t extent = bottom->value.dim(joins);
        const auto [layer, k] = u.producer[b];
        const bool window = !fixed[b] && !zeroed[b] && u.reads[b] == 1 && u.writers[b] == 1 &&
                            layer < i && bottom != parent &&
                            bottom->value.dtype() == parent->value.dtype() &&
                            bottom->value.layout() == parent->value.layout() &&
                            layers_[layer]->writes_top_window(runs_on_, k);
        if (window) {
          windows.emplace_back(
              b, BlobWindow{parent, outer, start * inner, whole[size_t(joins)] * inner, false});
        }
        start += extent;
      }
    }
    const int splits = layers_[i]->splits_bottom_along();
    if (splits >= 0 && w.bottoms.size() == 1) {
      // A Slice: top t is a view of the bottom when the pieces are contiguous (nothing outside
      // the axis, or axis 0) and start where a block may (the kernels' vector loads), the bottom
      // is the step's alone (not an input, a loss, kept, nor a view of one, nor a gradient the
      // Net zeroes) and not itself a piece of another Slice, and t is read by one layer, which
      // neither writes it in place nor views it (Split, Flatten: their own sharing), and written by
      // this Slice alone.
      Blob* parent = w.bottoms[0];
      const size_t x = blob_index_of(parent);
      const Shape& whole = parent->value.shape();
      const int64_t inner = shape_count(whole, splits + 1, int(whole.size()));
      const bool contiguous = shape_count(whole, 0, splits) == 1 &&
                              (splits == 0 || parent->value.layout() == Layout::nchw);
      const size_t from = u.producer[x].first;
      bool bottom_fixed = fixed[x];  // or a view of a fixed blob (a Split's top of an input)
      for (size_t j = 0; j < nb; ++j) {
        bottom_fixed = bottom_fixed || (fixed[j] && blobs_[j]->value.shares_storage(parent->value));
      }
      const bool bottom_ok = contiguous && !bottom_fixed && !zeroed[x] &&
                             (from == n || layers_[from]->splits_bottom_along() < 0);
      int64_t start = 0;
      for (const Blob* top : w.tops) {
        const size_t t = blob_index_of(top);
        const int64_t extent = top->value.dim(splits);
        const size_t bytes = size_t(start * inner) * dtype_size(parent->value.dtype());
        const bool window = bottom_ok && bytes % kBlockAlignment == 0 && !fixed[t] &&
                            u.reads[t] == 1 && u.writers[t] == 1 && top != parent &&
                            !layers_[u.reader[t]]->gradient_is_view() && !shared(t) &&
                            top->value.dtype() == parent->value.dtype() &&
                            top->grad.dtype() == parent->grad.dtype();
        if (window) windows.emplace_back(t, BlobWindow{parent, 1, start * inner, 0, true});
        start += extent;
      }
    }
    if (!windows.empty()) candidates.push_back(std::move(windows));
  }
  return candidates;
}

void Net::plan_windows() {
  const size_t nb = blobs_.size(), n = layers_.size();
  windows_.assign(nb, BlobWindow());
  window_candidates_.clear();
  if (memory_plan_ && concat_views_) {
    // Windows save copies but may make the arena larger (a window keeps its parent alive over
    // its own life too: DenseNet's running gradient). Keep every layer's windows if that costs
    // no bytes; otherwise add them layer by layer, each kept if the arena does not grow
    // (model.concat_views: always keeps them all).
    const auto candidates = window_candidates();
    for (const auto& layer : candidates) {
      for (const auto& window : layer) window_candidates_.push_back(window.first);
    }
    std::vector<bool> on(candidates.size(), true);
    const auto choose = [&]() {  // windows_ from `on`
      windows_.assign(nb, BlobWindow());
      for (size_t c = 0; c < candidates.size(); ++c) {
        if (!on[c]) continue;
        for (const auto& window : candidates[c]) windows_[window.first] = window.second;
      }
    };
    const auto arena_with = [&]() {  // the arena of a plan with them
      choose();
      std::vector<MemoryBlock> blocks = memory_blocks().blocks;
      return pack_blocks(blocks);
    };
    if (!candidates.empty() && !views_always_) {
      const size_t all = arena_with();
      std::fill(on.begin(), on.end(), false);
      size_t best = arena_with();
      if (all <= best) {
        std::fill(on.begin(), on.end(), true);
      } else {
        for (size_t c = 0; c < candidates.size(); ++c) {
          on[c] = true;
          const size_t arena = arena_with();
          if (arena <= best) {
            best = arena;
          } else {
            on[c] = false;
          }
        }
      }
    }
    choose();
  }
  // Tell the layers: the producers (and the Slices) their top windows, the Concats which bottoms
  // are windows.
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

std::vector<std::string> Net::view_blobs() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < windows_.size(); ++i) {
    if (windows_[i].parent) names.push_back(blobs_[i]->name);
  }
  return names;
}

std::vector<std::string> Net::view_candidate_blobs() const {
  std::vector<std::string> names;
  for (size_t i : window_candidates_) names.push_back(blobs_[i]->name);
  return names;
}

}  // namespace crema
