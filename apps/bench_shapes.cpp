// crema bench: the shapes --shape accepts, and the default lists.
#include <cctype>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "apps/bench.h"
#include "core/error.h"

namespace crema::bench {
namespace {

constexpr const char* kGemmFormat = "M,N,K[,NN|NT|TN|TT]";
constexpr const char* kConvFormat = "N,C,H,W,K,R[xS][,s2][,p1][,d2][,g2]";
constexpr const char* kBatchNormFormat = "N,C,H,W";

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

// A non-negative decimal integer (at least `minimum`), or nullopt.
std::optional<int64_t> number(const std::string& text, int64_t minimum) {
  if (text.empty() || text.size() > 12) return std::nullopt;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  const int64_t value = std::stoll(text);
  if (value < minimum) return std::nullopt;
  return value;
}

// "n" or "HxW" as {h, w}.
std::optional<std::pair<int64_t, int64_t>> pair_of(const std::string& text, int64_t minimum) {
  const std::vector<std::string> parts = split(text, 'x');
  if (parts.size() == 1) {
    const auto v = number(parts[0], minimum);
    if (!v) return std::nullopt;
    return std::pair{*v, *v};
  }
  if (parts.size() != 2) return std::nullopt;
  const auto h = number(parts[0], minimum), w = number(parts[1], minimum);
  if (!h || !w) return std::nullopt;
  return std::pair{*h, *w};
}

// (name, N, C, H, W, K, R, stride, pad) as in peer_cudnn.py.
struct PeerConv {
  const char* name;
  int64_t N, C, H, W, K, R, stride, pad;
};
constexpr PeerConv kPeerConvs[] = {
    {"resnet 3x3 64->64 56x56 n64", 64, 64, 56, 56, 64, 3, 1, 1},
    {"resnet 3x3 128->128 28x28 n64", 64, 128, 28, 28, 128, 3, 1, 1},
    {"resnet 3x3 256->256 14x14 n64", 64, 256, 14, 14, 256, 3, 1, 1},
    {"resnet 1x1 256->64 56x56 n64", 64, 256, 56, 56, 64, 1, 1, 0},
    {"resnet 7x7s2 3->64 224x224 n64", 64, 3, 224, 224, 64, 7, 2, 3},
    {"lenet 5x5 20->50 12x12 n256", 256, 20, 12, 12, 50, 5, 1, 0},
};

// The distinct depthwise convolutions (C == groups == K) of MobileNetV2, EfficientNet-B0 and
// ConvNeXt-T (configs/zoo/) at 224x224, batch 64, in the order of
// scripts/bench/peer_conv_depthwise.py: (name, C, H, R, stride) with pad R / 2.
struct DepthwiseConv {
  const char* name;
  int64_t C, H, R, stride;
};
constexpr DepthwiseConv kDepthwiseConvs[] = {
    {"dw 3x3 c32 112x112 n64", 32, 112, 3, 1},    // MobileNetV2, EfficientNet-B0
    {"dw 3x3s2 c96 112x112 n64", 96, 112, 3, 2},  // MobileNetV2, EfficientNet-B0
    {"dw 3x3 c144 56x56 n64", 144, 56, 3, 1},     // MobileNetV2, EfficientNet-B0
    {"dw 3x3s2 c144 56x56 n64", 144, 56, 3, 2},   // MobileNetV2
    {"dw 3x3 c192 28x28 n64", 192, 28, 3, 1},     // MobileNetV2
    {"dw 3x3s2 c192 28x28 n64", 192, 28, 3, 2},   // MobileNetV2
    {"dw 3x3 c384 14x14 n64", 384, 14, 3, 1},     // MobileNetV2
    {"dw 3x3 c576 14x14 n64", 576, 14, 3, 1},     // MobileNetV2
    {"dw 3x3s2 c576 14x14 n64", 576, 14, 3, 2},   // MobileNetV2
    {"dw 3x3 c960 7x7 n64", 960, 7, 3, 1},        // MobileNetV2
    {"dw 5x5s2 c144 56x56 n64", 144, 56, 5, 2},   // EfficientNet-B0
    {"dw 5x5 c240 28x28 n64", 240, 28, 5, 1},     // EfficientNet-B0
    {"dw 3x3s2 c240 28x28 n64", 240, 28, 3, 2},   // EfficientNet-B0
    {"dw 3x3 c480 14x14 n64", 480, 14, 3, 1},     // EfficientNet-B0
    {"dw 5x5 c480 14x14 n64", 480, 14, 5, 1},     // EfficientNet-B0
    {"dw 5x5 c672 14x14 n64", 672, 14, 5, 1},     // EfficientNet-B0
    {"dw 5x5s2 c672 14x14 n64", 672, 14, 5, 2},   // EfficientNet-B0
    {"dw 5x5 c1152 7x7 n64", 1152, 7, 5, 1},      // EfficientNet-B0
    {"dw 3x3 c1152 7x7 n64", 1152, 7, 3, 1},      // EfficientNet-B0
    {"dw 7x7 c96 56x56 n64", 96, 56, 7, 1},       // ConvNeXt-T
    {"dw 7x7 c192 28x28 n64", 192, 28, 7, 1},     // ConvNeXt-T
    {"dw 7x7 c384 14x14 n64", 384, 14, 7, 1},     // ConvNeXt-T
    {"dw 7x7 c768 7x7 n64", 768, 7, 7, 1},        // ConvNeXt-T
};

}  // namespace

std::string GemmShape::str() const {
  return std::to_string(M) + "," + std::to_string(N) + "," + std::to_string(K) + "," +
         (trans_a ? "T" : "N") + (trans_b ? "T" : "N");
}

GemmShape parse_gemm_shape(const std::string& text) {
  const std::vector<std::string> parts = split(text, ',');
  auto fail = [&](const std::string& why) -> GemmShape {
    throw Error("--shape '" + text + "': " + why + "; a GEMM shape is " + kGemmFormat +
                " (e.g. 8192,8192,8192 or 256,500,800,NT) or the list convnext-t");
  };
  if (parts.size() != 3 && parts.size() != 4) return fail("expected 3 or 4 fields");
  GemmShape shape;
  int64_t* sizes[] = {&shape.M, &shape.N, &shape.K};
  for (int i = 0; i < 3; ++i) {
    const auto v = number(parts[size_t(i)], 1);
    if (!v) return fail("'" + parts[size_t(i)] + "' is not a positive integer");
    *sizes[i] = *v;
  }
  if (parts.size() == 4) {
    const std::string& t = parts[3];
    if (t.size() != 2 || (t[0] != 'N' && t[0] != 'T') || (t[1] != 'N' && t[1] != 'T')) {
      return fail("'" + t + "' is not one of NN, NT, TN, TT");
    }
    shape.trans_a = t[0] == 'T';
    shape.trans_b = t[1] == 'T';
  }
  return shape;
}

std::vector<GemmShape> parse_gemm_shapes(const std::string& text) {
  if (text != "convnext-t") return {parse_gemm_shape(text)};
  // ConvNeXt-T at batch 64: stage s has C = 96 << s channels on (56 >> s)^2 positions, P rows of
  // the channels-last map; its MLP is x [P, C] -> [P, 4C] -> [P, C] (nn.Linear, W [out, in]).
  std::vector<GemmShape> shapes;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t C = int64_t(96) << stage, side = 56 >> stage, P = 64 * side * side;
    for (const auto& [in, out] : {std::pair{C, 4 * C}, std::pair{4 * C, C}}) {
      shapes.push_back({P, out, in, false, true});   // y = x W^T
      shapes.push_back({out, in, P, true, false});   // dW = dy^T x
      shapes.push_back({P, in, out, false, false});  // dx = dy W
    }
  }
  return shapes;
}

std::vector<GemmShape> default_gemm_shapes() {
  std::vector<GemmShape> shapes{{8192, 8192, 8192}};
  // Each default convolution's forward pass as one GEMM: [K, C*R*S] x [C*R*S, N*P*Q].
  for (const ConvShape& conv : default_conv_shapes()) {
    const kernels::Conv2dGeometry& g = conv.g;
    shapes.push_back({g.K, g.N * g.P() * g.Q(), g.C / g.groups * g.R * g.S});
  }
  // LeNet's inner products at batch 256: x [256, 800] times w [500, 800]^T, then [256, 500] x
  // [10, 500]^T.
  shapes.push_back({256, 500, 800, false, true});
  shapes.push_back({256, 10, 500, false, true});
  return shapes;
}

ConvShape parse_conv_shape(const std::string& text) {
  for (const ConvShape& shape : default_conv_shapes()) {
    if (shape.name == text) return shape;
  }
  for (const ConvShape& shape : depthwise_conv_shapes()) {
    if (shape.name == text) return shape;
  }
  auto fail = [&](const std::string& why) -> ConvShape {
    std::string names;
    for (const ConvShape& shape : default_conv_shapes()) names += "\n  " + shape.name;
    throw Error("--shape '" + text + "': " + why + "; a convolution is " + kConvFormat +
                " (e.g. 64,64,56,56,64,3,p1), one of:" + names + "\nor '" + kDepthwiseList +
                "' (the depthwise layers of MobileNetV2, EfficientNet-B0 and ConvNeXt-T at batch "
                "64) or one of its names (e.g. 'dw 3x3 c144 56x56 n64')");
  };
  const std::vector<std::string> parts = split(text, ',');
  if (parts.size() < 6) return fail("expected at least 6 fields");
  ConvShape shape;
  shape.name = text;
  kernels::Conv2dGeometry& g = shape.g;
  int64_t* sizes[] = {&g.N, &g.C, &g.H, &g.W, &g.K};
  for (int i = 0; i < 5; ++i) {
    const auto v = number(parts[size_t(i)], 1);
    if (!v) return fail("'" + parts[size_t(i)] + "' is not a positive integer");
    *sizes[i] = *v;
  }
  const auto filter = pair_of(parts[5], 1);
  if (!filter) return fail("filter '" + parts[5] + "' is not R or RxS");
  std::tie(g.R, g.S) = *filter;
  for (size_t i = 6; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const char key = part.empty() ? '?' : part[0];
    const auto value = pair_of(part.empty() ? "" : part.substr(1), key == 'p' ? 0 : 1);
    if (!value || (key == 'g' && value->first != value->second)) {
      return fail("'" + part + "' is not s<n>, p<n>, d<n> (each n or HxW) or g<n>");
    }
    switch (key) {
      case 's':
        std::tie(g.stride_h, g.stride_w) = *value;
        break;
      case 'p':
        std::tie(g.pad_h, g.pad_w) = *value;
        break;
      case 'd':
        std::tie(g.dilation_h, g.dilation_w) = *value;
        break;
      case 'g':
        g.groups = value->first;
        break;
      default:
        return fail("'" + part + "' is not s<n>, p<n>, d<n> (each n or HxW) or g<n>");
    }
  }
  g.validate("--shape '" + text + "'");
  return shape;
}

std::vector<ConvShape> default_conv_shapes() {
  std::vector<ConvShape> shapes;
  for (const PeerConv& p : kPeerConvs) {
    kernels::Conv2dGeometry g;
    g.N = p.N, g.C = p.C, g.H = p.H, g.W = p.W, g.K = p.K, g.R = p.R, g.S = p.R;
    g.stride_h = g.stride_w = p.stride;
    g.pad_h = g.pad_w = p.pad;
    shapes.push_back({p.name, g});
  }
  return shapes;
}

std::vector<ConvShape> depthwise_conv_shapes() {
  std::vector<ConvShape> shapes;
  for (const DepthwiseConv& d : kDepthwiseConvs) {
    kernels::Conv2dGeometry g;
    g.N = 64, g.C = g.K = g.groups = d.C, g.H = g.W = d.H, g.R = g.S = d.R;
    g.stride_h = g.stride_w = d.stride;
    g.pad_h = g.pad_w = d.R / 2;
    shapes.push_back({d.name, g});
  }
  return shapes;
}

std::vector<kernels::cuda::depthwise_nhwc::Version> depthwise_versions(
    kernels::cuda::depthwise_nhwc::Pass pass, const kernels::Conv2dGeometry& g,
    kernels::cuda::depthwise_nhwc::Element type) {
  namespace dw = kernels::cuda::depthwise_nhwc;
  const dw::Version production = dw::runs(pass, g, type, dw::Version::best);
  std::vector<dw::Version> versions;
  for (dw::Version v : {dw::Version::v1, dw::Version::v2, dw::Version::v3, dw::Version::v4}) {
    if (v != production && dw::runs(pass, g, type, v) == v) versions.push_back(v);
  }
  versions.push_back(production);
  return versions;
}

std::string depthwise_row_name(const std::string& prefix,
                               kernels::cuda::depthwise_nhwc::Version version, bool production) {
  return prefix + "_" + kernels::cuda::depthwise_nhwc::version_name(version) +
         (production ? "*" : "");
}

std::vector<ConvShape> parse_conv_shapes(const std::vector<std::string>& texts) {
  std::vector<ConvShape> shapes;
  for (const std::string& text : texts) {
    if (text == kDepthwiseList) {
      for (const ConvShape& s : depthwise_conv_shapes()) shapes.push_back(s);
    } else {
      shapes.push_back(parse_conv_shape(text));
    }
  }
  return shapes;
}

std::string BatchNormShape4::str() const {
  return std::to_string(N) + "," + std::to_string(C) + "," + std::to_string(H) + "," +
         std::to_string(W);
}

BatchNormShape4 parse_batch_norm_shape(const std::string& text) {
  const std::vector<std::string> parts = split(text, ',');
  if (parts.size() != 4) {
    throw Error("--shape '" + text + "': expected 4 fields; a batch norm shape is " +
                kBatchNormFormat + " (e.g. 128,256,56,56)");
  }
  int64_t sizes[4];
  for (size_t i = 0; i < 4; ++i) {
    const auto v = number(parts[i], 1);
    if (!v) {
      throw Error("--shape '" + text + "': '" + parts[i] + "' is not a positive integer; a " +
                  "batch norm shape is " + kBatchNormFormat + " (e.g. 128,256,56,56)");
    }
    sizes[i] = *v;
  }
  return {sizes[0], sizes[1], sizes[2], sizes[3]};
}

std::vector<BatchNormShape4> default_batch_norm_shapes() {
  return {{128, 64, 56, 56},  {128, 256, 56, 56},  {128, 128, 28, 28}, {128, 512, 28, 28},
          {128, 256, 14, 14}, {128, 1024, 14, 14}, {128, 512, 7, 7},   {128, 2048, 7, 7}};
}

// N,C for softmax (in this file, which a build without CUDA links: the command parses shapes
// before it looks for a GPU).
std::vector<int64_t> parse_softmax_shape(const std::string& text) {
  std::vector<int64_t> fields;
  std::istringstream in(text);
  std::string field;
  bool valid = true;
  while (std::getline(in, field, ',')) {
    const bool digits = !field.empty() && field.size() < 12 &&
                        field.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(field) == 0) valid = false;
    if (valid) fields.push_back(std::stoll(field));
  }
  if (!valid || fields.size() != 2 || text.back() == ',') {
    throw Error("crema bench softmax: --shape '" + text +
                "' is not N,C (two positive extents, e.g. 4096,1000)");
  }
  return fields;
}

}  // namespace crema::bench
