// classify: a trained crema net run as a library on image files, as cuDNN's mnistCUDNN runs
// LeNet. Loads the net of a YAML config (model:), builds it for inference with one image per batch
// row, loads its weights by name (safetensors or a PyTorch checkpoint), feeds each image's pixels
// scaled to [0, 1] into the input `data` (the first input without one), and prints, per image,
// the class of the highest score and its softmax probability, computed here in double:
//
//   p_k = exp(z_k - max z) / sum_j exp(z_j - max z),   z = the scores of the net's last layer
//
// Images must already have the input's size (no resizing here: `crema predict` applies a
// config's transforms). Any other input (a label) is fed zeros.
//
//   classify CONFIG WEIGHTS IMAGE... [--device cuda:0]
//
// Built in the tree as crema_example_classify and, against an installed crema, by tests/package.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/context.h"
#include "core/error.h"
#include "core/net.h"
#include "data/image.h"
#include "layers/register_layers.h"

namespace {

using namespace crema;

std::string input_name(const Net& net) {
  for (const auto& [name, shape] : net.inputs()) {
    if (name == "data") return name;
  }
  return net.inputs().at(0).first;
}

int run(const std::string& config, const std::string& weights,
        const std::vector<std::string>& images, const Device& device) {
  const ConfigNode root = load_config(config);
  const LayerRegistry registry = builtin_layers();
  Context ctx(device);
  const int64_t batch = int64_t(images.size());
  Net net(root.at("model"), Phase::test, batch, registry, ctx);
  net.load_weights(weights, /*strict=*/true);
  // The scores are read after forward: keep them whole (the memory plan reuses other blobs).
  const std::string scores_name = net.layer(net.num_layers() - 1).spec().tops.at(0);
  net.keep(scores_name);

  // Every input blob on the host first: the images into `data`, zeros elsewhere.
  const std::string data = input_name(net);
  for (const auto& [name, shape] : net.inputs()) {
    Blob& blob = net.blob(name);
    Tensor host(blob.value.shape());
    std::vector<float> values(size_t(host.numel()), 0.0f);
    if (name == data) {
      const int channels = int(shape.at(0));
      data::Image image;
      for (int64_t i = 0; i < batch; ++i) {
        data::read_image_file(images[size_t(i)], channels, image);
        if (image.shape != shape) {
          throw Error(images[size_t(i)] + " is " + shape_str(image.shape) + " but input '" + name +
                      "' takes " + shape_str(shape));
        }
        const size_t n = image.pixels.size();
        for (size_t j = 0; j < n; ++j) values[size_t(i) * n + j] = image.pixels[j] / 255.0f;
      }
    }
    host = Tensor::from_vector(blob.value.shape(), values);
    ctx.copy(blob.value, host);
  }
  net.forward(ctx);
  ctx.synchronize();

  const std::vector<float> scores = net.blob(scores_name).value.to_vector();
  const int64_t classes = int64_t(scores.size()) / batch;
  for (int64_t i = 0; i < batch; ++i) {
    const float* z = scores.data() + i * classes;
    const double top = *std::max_element(z, z + classes);
    double sum = 0.0;
    for (int64_t k = 0; k < classes; ++k) sum += std::exp(z[k] - top);
    const int64_t best = std::max_element(z, z + classes) - z;
    std::printf("%s: class %lld, probability %.6f\n", images[size_t(i)].c_str(), (long long)best,
                1.0 / sum);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  crema::Device device = crema::Device::cpu();
  try {
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--device" && i + 1 < args.size()) {
        device = crema::Device::parse(args[i + 1]);
        args.erase(args.begin() + long(i), args.begin() + long(i) + 2);
        break;
      }
    }
    if (args.size() < 3) {
      std::fprintf(stderr, "usage: classify CONFIG WEIGHTS IMAGE... [--device cuda:0]\n");
      return 2;
    }
    return run(args[0], args[1], {args.begin() + 2, args.end()}, device);
  } catch (const crema::Error& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 2;
  }
}
