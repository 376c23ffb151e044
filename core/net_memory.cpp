// Net's memory plan (net.h, `model.memory_plan`), and the packing it uses (net_memory.h).
//
// The moments of one training step, for a net of n layers:
//   t = i           layer i's forward (reads its bottoms, writes its tops)
//   t = n           backward begins: loss gradients set to their weights, unwritten ones zeroed
//   t = 2n - i      layer i's backward (reads its top gradients, writes its bottoms' gradients,
//                   reads the values Layer::backward_reads and backward_reads_bottom name, and
//                   uses its scratch, Layer::backward_scratch: alive at this moment alone)
// A value lives from its producer's forward to its last reader; a gradient from its first writer
// to its last reader. A test net runs forward only, and no layer of it runs backward, so each
// value there dies at its last forward reader and no gradient has storage (Net::backward refuses
// to run on it).
//
// A Concat's bottom that is a window of its top (net_windows.cpp, core/VIEWS.md) has no place:
// its moments count for its parent, whose life starts at the first producer's forward.
// Values that share storage (a Split's tops, a Flatten's top: views of their bottom) form one
// group with one place; so do the gradients of a view layer's bottom and top. A group is kept
// whole, outside the arena, when code outside the step reads it: the inputs (the loader writes
// them), the loss tops, values no layer reads (the net's outputs: scores, accuracy) and blobs
// named by Net::keep.
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/net.h"
#include "core/net_memory.h"

namespace crema {

void Lifetime::add(int moment) {
  first = std::min(first, moment);
  last = std::max(last, moment);
}

size_t pack_blocks(std::vector<MemoryBlock>& blocks) {
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return blocks[a].bytes > blocks[b].bytes; });
  std::vector<size_t> placed;  // indices of placed blocks
  size_t arena = 0;
  for (size_t k : order) {
    MemoryBlock& block = blocks[k];
    block.bytes = (block.bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
    if (block.life.empty()) continue;
    // The placed blocks alive at the same time, by offset: take the first gap that fits.
    std::vector<const MemoryBlock*> rivals;
    for (size_t p : placed) {
      if (blocks[p].life.overlaps(block.life)) rivals.push_back(&blocks[p]);
    }
    std::sort(rivals.begin(), rivals.end(),
              [](const MemoryBlock* a, const MemoryBlock* b) { return a->offset < b->offset; });
    size_t offset = 0;
    for (const MemoryBlock* r : rivals) {
      if (r->offset >= offset + block.bytes) break;
      offset = std::max(offset, r->offset + r->bytes);
    }
    block.offset = offset;
    arena = std::max(arena, offset + block.bytes);
    placed.push_back(k);
  }
  return arena;
}

size_t peak_of_lives(const std::vector<MemoryBlock>& blocks) {
  int end = 0;
  for (const MemoryBlock& b : blocks) end = std::max(end, b.life.last + 1);
  std::vector<size_t> alive(size_t(end) + 1, 0);
  for (const MemoryBlock& b : blocks) {
    for (int t = b.life.first; !b.life.empty() && t <= b.life.last; ++t)
      alive[size_t(t)] += b.bytes;
  }
  return alive.empty() ? 0 : *std::max_element(alive.begin(), alive.end());
}

void* PlacedAllocator::allocate(size_t bytes) {
  CREMA_CHECK(bytes <= bytes_, "the memory plan gave a tensor " + std::to_string(bytes_) +
                                   " bytes and it asks for " + std::to_string(bytes));
  return ptr_;
}

namespace {

// Union-find over blob indices, the smaller index the root.
size_t root_of(std::vector<size_t>& parent, size_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}
void join(std::vector<size_t>& parent, size_t a, size_t b) {
  a = root_of(parent, a), b = root_of(parent, b);
  parent[std::max(a, b)] = std::min(a, b);
}

}  // namespace

void Net::keep(const std::string& name) {
  blob(name);  // throws, listing the blobs there are
  kept_names_.insert(name);
  plan_memory();
}

void Net::unplace_memory() {
  for (auto& place : value_places_) place->unplace();
  for (auto& place : grad_places_) place->unplace();
  for (auto& place : scratch_places_) place->unplace();
}

void Net::plan_memory() {
  forget_windows();
  plan_windows();  // which blobs are windows: it weighs plans with and without them
  if (!memory_plan_) return;
  PlanBlocks plan = memory_blocks();
  std::vector<MemoryBlock>& blocks = plan.blocks;
  const size_t nb = blobs_.size(), n = layers_.size();
  std::vector<bool> is_input(nb, false);
  for (const auto& input : inputs_) is_input[blob_index_.at(input.first)] = true;

  // The last plan's places still serve when the lives are the same and every block fits (a
  // smaller last batch): the addresses a captured graph holds then stay the same.
  bool same = blocks.size() == plan_blocks_.size();
  for (size_t k = 0; same && k < blocks.size(); ++k) {
    same = blocks[k].life.first == plan_blocks_[k].life.first &&
           blocks[k].life.last == plan_blocks_[k].life.last &&
           blocks[k].bytes <= plan_blocks_[k].bytes;
  }
  if (!same) {
    const size_t arena = pack_blocks(blocks);
    plan_blocks_ = blocks;
    if (arena > arena_.nbytes() || !arena_.defined()) {
      arena_ = Tensor();  // give the old one back before taking the new one
      arena_ = Tensor({int64_t(arena / sizeof(float))}, DType::f32, device_, allocator_);
    }
  }

  // Place every tensor: kept groups in storage of their own, planned ones in the arena. A tensor
  // remade on its new storage keeps its shape, dtype and layout.
  char* base = static_cast<char*>(arena_.raw());
  for (size_t r = 0; r < nb; ++r) {
    if (plan.value_root[r] != r || is_input[r]) continue;
    Tensor& v = blobs_[r]->value;
    if (plan.kept[r] && !value_kept_[r]) v = remade(v, v.dtype(), allocator_);
    value_kept_[r] = plan.kept[r];
  }
  for (auto& place : scratch_places_) place->unplace();  // a layer that no longer runs backward
  for (size_t k = 0; k < blocks.size(); ++k) {
    const auto [r, kind] = plan.owner[k];
    PlacedAllocator& place = kind == PlanBlocks::Kind::scratch ? *scratch_places_[r]
                             : kind == PlanBlocks::Kind::grad  ? *grad_places_[r]
                                                               : *value_places_[r];
    place.place(base + plan_blocks_[k].offset, plan_blocks_[k].bytes);
    if (kind == PlanBlocks::Kind::scratch) {
      Tensor& scratch = *layers_[r]->backward_scratch();
      scratch = remade(scratch, scratch.dtype(), &place);
      continue;
    }
    Blob& b = *blobs_[r];
    if (kind == PlanBlocks::Kind::grad) {
      b.grad = remade(b.value, b.grad.dtype(), &place);
    } else {
      b.value = remade(b.value, b.value.dtype(), &place);
    }
  }
  for (size_t i = 0; i < n; ++i) {  // scratches the plan leaves out: a shape without storage
    Tensor* scratch = layers_[i]->backward_scratch();
    if (scratch != nullptr && !scratch_places_[i]->placed()) {
      *scratch = remade(*scratch, scratch->dtype(), scratch_places_[i].get());
    }
  }
  for (size_t i = 0; i < nb; ++i) {
    if (is_input[i] || windows_[i].parent) continue;  // windows: below, once parents are placed
    Blob& b = *blobs_[i];
    const size_t vr = plan.value_root[i], gr = plan.grad_root[i];
    // A view keeps its own layout: Permute's channels-last view is its root's bytes relabelled.
    if (vr != i) {
      const Layout layout = b.value.layout();
      b.value = blobs_[vr]->value.view(b.value.shape());
      b.value.set_layout(layout);
    }
    if (gr != i) {
      const Layout layout = b.grad.layout();
      b.grad = blobs_[gr]->grad.view(b.value.shape());
      b.grad.set_layout(layout);
    } else if (!plan.grad_alive[i]) {  // no pass touches it: a shape without storage
      grad_places_[i]->unplace();
      b.grad = remade(b.value, b.grad.dtype(), grad_places_[i].get());
    }
  }
  place_windows();
}

// A window's tensors: at its place in the parent's (BlobWindow::view), or shapes without storage
// (its producer writes the parent through Layer::top_window).
void Net::place_windows() {
  for (size_t i = 0; i < blobs_.size(); ++i) {
    const BlobWindow& window = windows_[i];
    if (window.parent == nullptr) continue;
    Blob& b = *blobs_[i];
    value_places_[i]->unplace();
    grad_places_[i]->unplace();
    if (window.view) {
      char* value = static_cast<char*>(window.parent->value.raw());
      char* grad = static_cast<char*>(window.parent->grad.raw());
      value_places_[i]->place(value + window.offset * int64_t(dtype_size(b.value.dtype())),
                              b.value.nbytes());
      if (grad != nullptr) {  // no gradient in a test net
        grad_places_[i]->place(grad + window.offset * int64_t(dtype_size(b.grad.dtype())),
                               size_t(b.value.numel()) * dtype_size(b.grad.dtype()));
      }
    }
    b.value = remade(b.value, b.value.dtype(), value_places_[i].get());
    b.grad = remade(b.value, b.grad.dtype(), grad_places_[i].get());
  }
}

// The last plan's windows lose their places before the next plan groups the blobs by storage.
void Net::forget_windows() {
  for (size_t i = 0; i < windows_.size() && i < blobs_.size(); ++i) {
    if (windows_[i].parent == nullptr) continue;
    Blob& b = *blobs_[i];
    value_places_[i]->unplace();
    grad_places_[i]->unplace();
    b.value = remade(b.value, b.value.dtype(), value_places_[i].get());
    b.grad = remade(b.value, b.grad.dtype(), grad_places_[i].get());
  }
}

Tensor Net::remade(const Tensor& like, DType dtype, Allocator* allocator) const {
  Tensor t(like.shape(), dtype, device_, allocator);
  t.set_layout(like.layout());
  return t;
}

// The blocks of a plan with the current windows_ (plan_windows weighs several).
PlanBlocks Net::memory_blocks() const {
  const size_t nb = blobs_.size(), n = layers_.size();
  std::map<const Blob*, size_t> index;
  for (size_t i = 0; i < nb; ++i) index[blobs_[i].get()] = i;
  std::vector<bool> is_input(nb, false);
  for (const auto& input : inputs_) is_input[blob_index_.at(input.first)] = true;

  // Groups: values that already share storage (set up by Split's and Flatten's reshape), and
  // the gradients a view layer aliases in backward.
  std::vector<size_t> value_group(nb), grad_group(nb);
  std::iota(value_group.begin(), value_group.end(), size_t(0));
  std::iota(grad_group.begin(), grad_group.end(), size_t(0));
  for (size_t i = 0; i < nb; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (blobs_[j]->value.shares_storage(blobs_[i]->value)) {
        join(value_group, j, i);
        break;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!layers_[i]->gradient_is_view()) continue;
    const Wiring& w = wiring_[i];
    for (size_t k = 0; k < w.bottoms.size() && k < w.tops.size(); ++k) {
      const size_t bottom = index.at(w.bottoms[k]);
      if (!is_input[bottom]) join(grad_group, bottom, index.at(w.tops[k]));
    }
  }

  // Which groups stay whole: inputs, loss tops, values no layer reads, kept names.
  std::vector<bool> read(nb, false), kept(nb, false);
  for (const Wiring& w : wiring_) {
    for (const Blob* b : w.bottoms) read[index.at(b)] = true;
  }
  for (const auto& [top, weight] : loss_tops_) kept[index.at(top)] = true;
  for (const std::string& name : kept_names_) kept[blob_index_.at(name)] = true;
  for (size_t i = 0; i < nb; ++i) {
    if (is_input[i] || !read[i]) kept[i] = true;
  }
  for (size_t i = 0; i < nb; ++i) {
    if (kept[i]) kept[root_of(value_group, i)] = true;
  }

  // Lives, by group root.
  std::vector<Lifetime> value_life(nb), grad_life(nb);
  // A window's moments are its parent's: it lives in the parent's storage (core/VIEWS.md).
  auto home = [&](const Blob* b) {
    const Blob* parent = windows_[index.at(b)].parent;
    return index.at(parent != nullptr ? parent : b);
  };
  auto value_at = [&](const Blob* b, int t) { value_life[root_of(value_group, home(b))].add(t); };
  auto grad_at = [&](const Blob* b, int t) { grad_life[root_of(grad_group, home(b))].add(t); };
  for (size_t i = 0; i < n; ++i) {
    const Wiring& w = wiring_[i];
    for (const Blob* b : w.bottoms) value_at(b, int(i));
    for (const Blob* t : w.tops) value_at(t, int(i));
    if (phase_ == Phase::test || !runs_backward_[i]) continue;
    const int moment = int(2 * n - i);
    const Layer::BackwardReads reads = layers_[i]->backward_reads();
    for (size_t k = 0; k < w.bottoms.size(); ++k) {
      if (layers_[i]->backward_reads_bottom(k)) value_at(w.bottoms[k], moment);
      if (w.propagate_down[k]) grad_at(w.bottoms[k], moment);
    }
    for (const Blob* t : w.tops) {
      if (reads.tops) value_at(t, moment);
      grad_at(t, moment);
    }
  }
  for (size_t i : grads_to_zero_) grad_at(blobs_[i].get(), int(n));
  for (const auto& [top, weight] : loss_tops_) grad_at(top, int(n));
  if (phase_ == Phase::test) std::fill(grad_life.begin(), grad_life.end(), Lifetime());

  // One block per planned group: values first, then gradients, in blob order; then the layers'
  // backward scratches, each alive at its layer's backward alone.
  PlanBlocks plan;
  for (size_t r = 0; r < nb; ++r) {
    if (root_of(value_group, r) != r || kept[r] || windows_[r].parent) continue;
    plan.blocks.push_back({blobs_[r]->value.nbytes(), value_life[r], 0});
    plan.owner.emplace_back(r, PlanBlocks::Kind::value);
  }
  for (size_t r = 0; r < nb; ++r) {
    if (root_of(grad_group, r) != r || is_input[r] || grad_life[r].empty() || windows_[r].parent)
      continue;
    size_t bytes = 0;
    for (size_t i = 0; i < nb; ++i) {
      if (root_of(grad_group, i) == r) {
        bytes =
            std::max(bytes, size_t(blobs_[i]->value.numel()) * dtype_size(blobs_[i]->grad.dtype()));
      }
    }
    plan.blocks.push_back({bytes, grad_life[r], 0});
    plan.owner.emplace_back(r, PlanBlocks::Kind::grad);
  }
  for (size_t i = 0; i < n; ++i) {
    const Tensor* scratch = layers_[i]->backward_scratch();
    if (scratch == nullptr || phase_ == Phase::test || !runs_backward_[i]) continue;
    Lifetime life;
    life.add(int(2 * n - i));
    plan.blocks.push_back({scratch->nbytes(), life, 0});
    plan.owner.emplace_back(i, PlanBlocks::Kind::scratch);
  }
  for (size_t i = 0; i < nb; ++i) {
    value_group[i] = root_of(value_group, i);
    grad_group[i] = root_of(grad_group, i);
  }
  plan.value_root = std::move(value_group);
  plan.grad_root = std::move(grad_group);
  plan.kept = std::move(kept);
  plan.grad_alive.resize(nb);
  for (size_t i = 0; i < nb; ++i) plan.grad_alive[i] = !grad_life[i].empty();
  return plan;
}

// What the plan takes, for `crema summary` and the tests (net.h).
int64_t Net::largest_workspace() const {
  int64_t most = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::vector<bool>& down = wiring_[i].propagate_down;
    const bool bottom_grad = std::find(down.begin(), down.end(), true) != down.end();
    const bool backward = phase_ == Phase::train && runs_backward_[i];
    most = std::max(most, layers_[i]->workspace_bytes(runs_on_, backward, bottom_grad));
  }
  return most;
}

Net::Memory Net::memory() const {
  Memory m;
  for (const Param* p : learnable_) m.params += int64_t(p->value.nbytes());
  for (const Buffer* b : buffers_) m.buffers += int64_t(b->value.nbytes());
  for (const auto& blob : blobs_) m.activations += int64_t(blob->value.nbytes());
  m.workspace = largest_workspace();
  m.planned = memory_plan_;
  if (!memory_plan_) return m;
  for (size_t i = 0; i < blobs_.size(); ++i) {
    const bool input = std::any_of(inputs_.begin(), inputs_.end(),
                                   [&](const auto& in) { return in.first == blobs_[i]->name; });
    const bool alias = std::any_of(blobs_.begin(), blobs_.begin() + long(i), [&](const auto& b) {
      return b->value.shares_storage(blobs_[i]->value);
    });
    if ((input || value_kept_[i]) && !alias) m.kept += int64_t(blobs_[i]->value.nbytes());
  }
  m.arena = int64_t(arena_.nbytes());
  for (const MemoryBlock& b : plan_blocks_) m.blocks += int64_t(b.bytes);
  m.peak = int64_t(peak_of_lives(plan_blocks_));
  m.view_candidates = int64_t(window_candidates_.size());
  for (size_t i = 0; i < windows_.size(); ++i) {
    const BlobWindow& window = windows_[i];
    if (window.parent == nullptr) continue;
    ++m.views;
    const Blob& b = *blobs_[i];
    m.view_copies_saved += int64_t(b.value.nbytes());  // forward
    if (window.parent->grad.raw() != nullptr) {        // backward
      m.view_copies_saved += b.value.numel() * int64_t(dtype_size(b.grad.dtype()));
    }
  }
  m.layer_state = layer_state_;
  return m;
}

}  // namespace crema
