// Small learnable datasets written as IDX files, and configs that train on them, for tests that
// run whole commands without the real Fashion-MNIST.
#pragma once

#include <string>

namespace crema::testing {

// Writes `count` images of 1 x 8 x 8 and their labels (10 classes: class c lights up a 2 x 2 block
// at a position that depends on c, over uniform noise) as gzip IDX files into `dir`:
// dir/images.gz and dir/labels.gz.
void write_synthetic_idx(const std::string& dir, int count, unsigned seed);

// A complete config (model, data on dir's files, solver) for a small conv net on that data.
std::string synthetic_config(const std::string& dir);

// Writes `text` to `path`.
void write_text(const std::string& path, const std::string& text);

// A fresh empty directory under the test temp dir.
std::string fresh_dir(const std::string& name);

}  // namespace crema::testing
