// The Net's precision pass (core/net_precision.h): which format each layer is given, where the
// Convert layers go, in-place layers on converted blobs, a layer's own precision as a demand, and
// the bad keys -- on the CPU, with a test layer that runs bf16 and nhwc there (the real layers'
// 16-bit and channels-last paths are CUDA's and are checked on the GPU). Also kernels::convert
// against a plain index walk.
#include "core/net_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/net.h"
#include "kernels/layout/layout.h"
#include "layers/register_layers.h"
#include "tests/support/error_text.h"
#include "tests/support/layer_harness.h"

namespace crema::testing {
namespace {

// y = 2 x in any dtype and layout on the CPU (widened to double, rounded once), in place ok; it
// records the format it was given.
class TwiceLayer final : public Layer {
 public:
  explicit TwiceLayer(const LayerSpec& spec) : Layer(spec) {}
  bool runs(DType dtype, Layout, const Device& device) const override {
    return device.is_cpu() && dtype != DType::f64;
  }
  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, Context&) override {
    if (top[0] != bottom[0]) top[0]->value.reshape(bottom[0]->value.shape());
  }
  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    seen = BlobFormat{bottom[0]->value.dtype(), bottom[0]->value.layout()};
    scale(ctx, bottom[0]->value, top[0]->value);
  }
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    if (propagate_down[0]) scale(ctx, top[0]->grad, bottom[0]->grad);
  }
  BlobFormat seen;

 private:
  static void scale(Context& ctx, const Tensor& x, Tensor& y) {
    Tensor wide = ctx.empty(x.shape(), DType::f64);
    wide.set_layout(x.layout());
    kernels::convert(ctx, x, wide);
    for (int64_t i = 0; i < wide.numel(); ++i) wide.data<double>()[i] *= 2;
    if (y.shares_storage(x)) {
      Tensor tmp = ctx.empty(x.shape(), x.dtype());
      tmp.set_layout(x.layout());
      kernels::convert(ctx, wide, tmp);
      y.copy_from(tmp);
    } else {
      kernels::convert(ctx, wide, y);
    }
  }
};

// Twice that runs channels-last only (as a tensor-core convolution).
class TwiceNhwcLayer final : public Layer {
 public:
  explicit TwiceNhwcLayer(const LayerSpec& spec) : Layer(spec), twice_(spec) {}
  bool runs(DType dtype, Layout layout, const Device& device) const override {
    return layout == Layout::nhwc && twice_.runs(dtype, layout, device);
  }
  void reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    twice_.reshape(bottom, top, ctx);
  }
  void forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
               Context& ctx) override {
    twice_.forward(bottom, top, ctx);
  }
  void backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom, Context& ctx) override {
    twice_.backward(top, propagate_down, bottom, ctx);
  }

 private:
  TwiceLayer twice_;
};

LayerRegistry registry_with_twice() {
  LayerRegistry r = builtin_layers();
  r.add<TwiceLayer>("Twice");
  r.add<TwiceNhwcLayer>("TwiceNhwc");
  return r;
}

const char* kNet = R"(
inputs: {data: [3, 4, 5], label: []}
layers:
  - {name: a, type: Twice, bottom: data, top: a}
  - {name: b, type: Twice, bottom: a, top: a}
  - {name: fc, type: InnerProduct, bottom: a, top: fc, num_output: 3}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

std::vector<std::string> names(Net& net) {
  std::vector<std::string> out;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    out.push_back(net.layer(i).name() + ":" + net.layer(i).type());
  }
  return out;
}

ConfigNode model(const std::string& extra, const char* net = kNet) {
  return parse_config(extra + net, "net.yaml");
}

void fill(Net& net) {
  const auto x = random_values(size_t(net.blob("data").value.numel()), -1, 1, 3);
  std::copy(x.begin(), x.end(), net.blob("data").value.data<float>());
  for (int64_t i = 0; i < net.batch_size(); ++i)
    net.blob("label").value.data<float>()[i] = float(i % 3);
}

TEST(NetPrecision, Fp32NetHasNoConverts) {
  Context ctx;
  const LayerRegistry r = registry_with_twice();
  Net net(model(""), Phase::train, 2, r, ctx);
  EXPECT_EQ(names(net), (std::vector<std::string>{"a:Twice", "b:Twice", "fc:InnerProduct",
                                                  "loss:SoftmaxWithLoss"}));
}

const char* kNhwcFirstNet = R"(
inputs: {data: [3, 4, 5], label: []}
layers:
  - {name: a, type: TwiceNhwc, bottom: data, top: a}
  - {name: b, type: Twice, bottom: a, top: a}
  - {name: fc, type: InnerProduct, bottom: a, top: fc, num_output: 3}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";

TEST(NetPrecision, Bf16NhwcConvertsAtTheBoundariesOnly) {
  Context ctx;
  const LayerRegistry r = registry_with_twice();
  Net net(model("precision: bf16\nlayout: nhwc\n", kNhwcFirstNet), Phase::train, 2, r, ctx);
  // data (f32) -> bf16 nhwc once; a and b (in place) run it; back to f32 before the classifier.
  EXPECT_EQ(names(net),
            (std::vector<std::string>{"data@bf16_nhwc:Convert", "a:TwiceNhwc", "b:Twice",
                                      "a@f32:Convert", "fc:InnerProduct", "loss:SoftmaxWithLoss"}));
  EXPECT_EQ(net.blob("a").value.dtype(), DType::bf16);  // the name's latest version: b's top
  EXPECT_EQ(net.blob("a").value.layout(), Layout::nhwc);
  EXPECT_EQ(net.blob("data").value.dtype(), DType::f32);
  fill(net);
  net.forward(ctx);
  auto& b = dynamic_cast<TwiceLayer&>(net.layer(2));
  EXPECT_EQ(format_name(b.seen), "bf16 nhwc");
  // The same net in f32: the bf16 one differs by its roundings only (x and 2x, 4x: one rounding
  // of x to bf16's 8 bits, exact doublings), so the logits agree within the classifier's sum of
  // 60 terms each off by at most 2^-8 relative.
  Net ref(model(""), Phase::train, 2, r, ctx);
  ref.share_params_from(net);
  fill(ref);
  ref.forward(ctx);
  const auto got = net.blob("fc").value.to_vector(), want = ref.blob("fc").value.to_vector();
  ASSERT_EQ(got.size(), want.size());
  float bound = 0;
  for (const Param* p : net.learnable_params()) {
    for (float w : p->value.to_vector()) bound += std::fabs(w);
  }
  bound *= 4.0f * std::ldexp(1.0f, -8);  // |4 x| <= 4, each rounding <= 2^-8 relative
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], bound) << i;
  EXPECT_NE(got, want);  // the bf16 path did round
  // Backward reaches through both converts and the in-place pair: the input of `a` in f32.
  net.backward(ctx);
  EXPECT_EQ(net.blob("data@bf16_nhwc").grad.dtype(), DType::bf16);
}

TEST(NetPrecision, LayoutDefaultsToNchwOnTheCpu) {
  Context ctx;
  const LayerRegistry r = registry_with_twice();
  Net net(model("precision: fp16\n"), Phase::train, 2, r, ctx);
  EXPECT_EQ(names(net)[0], "data@f16:Convert");
  EXPECT_EQ(net.blob("a").value.layout(), Layout::nchw);
}

TEST(NetPrecision, NhwcAloneKeepsF32) {
  Context ctx;
  const LayerRegistry r = registry_with_twice();
  Net net(model("layout: nhwc\n"), Phase::train, 2, r, ctx);
  EXPECT_EQ(names(net)[0], "data@f32_nhwc:Convert");
  EXPECT_EQ(net.blob("a").value.dtype(), DType::f32);
  EXPECT_EQ(net.blob("a").value.layout(), Layout::nhwc);
}

// A layer given bf16 that runs it in both layouts keeps its first bottom's (keep_bottom_layout):
// the data's Convert changes its dtype alone and Twice runs nchw; Twice after an nhwc-only layer
// stays nhwc. (In f32 the net's layout wins, as NhwcAloneKeepsF32 shows.)
TEST(NetPrecision, HalfLayersKeepTheirBottomsLayout) {
  Context ctx;
  const LayerRegistry r = registry_with_twice();
  Net plain(model("precision: bf16\nlayout: nhwc\n"), Phase::train, 2, r, ctx);
  EXPECT_EQ(names(plain)[0], "data@bf16:Convert");
  EXPECT_EQ(names(plain)[1], "a:Twice");
  EXPECT_EQ(plain.blob("a").value.layout(), Layout::nchw);
  Net after_nhwc(model("precision: bf16\nlayout: nhwc\n", kNhwcFirstNet), Phase::train, 2, r, ctx);
  EXPECT_EQ(names(after_nhwc)[2], "b:Twice");
  EXPECT_EQ(after_nhwc.blob("a").value.layout(), Layout::nhwc);
}

TEST(NetPrecision, ALayersOwnPrecisionWins) {
  Context ctx;
  const LayerRegistry r = registry_with_twice();
  const char* net_yaml = R"(
inputs: {data: [3, 4, 5], label: []}
layers:
  - {name: a, type: Twice, bottom: data, top: a}
  - {name: b, type: Twice, bottom: a, top: b, precision: fp32}
  - {name: fc, type: InnerProduct, bottom: b, top: fc, num_output: 3}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";
  Net net(model("precision: bf16\n", net_yaml), Phase::train, 2, r, ctx);
  EXPECT_EQ(names(net),
            (std::vector<std::string>{"data@bf16:Convert", "a:Twice", "a@f32:Convert", "b:Twice",
                                      "fc:InnerProduct", "loss:SoftmaxWithLoss"}));
}

TEST(NetPrecision, BadKeysAndDemandsNameThePlace) {
  Context ctx;
  const LayerRegistry r = registry_with_twice();
  const std::string unknown =
      error_of([&] { Net(model("precision: bf8\n"), Phase::train, 2, r, ctx); });
  EXPECT_CONTAINS(unknown, "net.yaml:1:");
  EXPECT_CONTAINS(unknown, "unknown precision 'bf8'; choose from fp32, tf32, bf16, fp16");
  const std::string layout =
      error_of([&] { Net(model("layout: chwn\n"), Phase::train, 2, r, ctx); });
  EXPECT_CONTAINS(layout, "unknown layout 'chwn'; choose from nchw, nhwc");
  const char* demand = R"(
inputs: {data: [3, 4, 5], label: []}
layers:
  - {name: fc, type: InnerProduct, bottom: data, top: fc, num_output: 3, precision: bf16}
  - {name: loss, type: SoftmaxWithLoss, bottom: [fc, label], top: loss}
)";
  const std::string e = error_of([&] { Net(model("", demand), Phase::train, 2, r, ctx); });
  EXPECT_CONTAINS(e, "net.yaml:4:");
  EXPECT_CONTAINS(e,
                  "layer 'fc' (InnerProduct): precision bf16 asks for bf16 tensors, which it "
                  "does not run on cpu (it runs f32)");
  const char* layer_key = R"(
inputs: {data: [3, 4, 5], label: []}
layers:
  - {name: a, type: Twice, bottom: data, top: a, precision: half}
)";
  EXPECT_CONTAINS(error_of([&] { Net(model("", layer_key), Phase::train, 2, r, ctx); }),
                  "layer 'a': unknown precision 'half'; choose from fp32, tf32, bf16, fp16");
  const char* convert = R"(
inputs: {data: [3, 4, 5]}
layers:
  - {name: c, type: Convert, bottom: data, top: c}
)";
  EXPECT_CONTAINS(error_of([&] { Net(model("", convert), Phase::train, 2, r, ctx); }),
                  "the Net inserts Convert where model.precision or model.layout change");
}

// ---- kernels::convert ----

// The element of logical [N, C, H, W] index (n, c, h, w) in memory of `layout`.
int64_t offset(Layout layout, const Shape& s, int64_t n, int64_t c, int64_t h, int64_t w) {
  return layout == Layout::nchw ? ((n * s[1] + c) * s[2] + h) * s[3] + w
                                : ((n * s[2] + h) * s[3] + w) * s[1] + c;
}

TEST(Convert, TransposesAndRoundsLikeCast) {
  Context ctx;
  const Shape shape{2, 37, 3, 5};  // C and H*W not multiples of the 32 x 32 blocks
  const auto values = random_values(size_t(shape_numel(shape)), -3, 3, 11);
  for (Layout from : {Layout::nchw, Layout::nhwc}) {
    for (Layout to : {Layout::nchw, Layout::nhwc}) {
      for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
        Tensor x = Tensor::from_vector(shape, values);
        x.set_layout(from);
        Tensor y(shape, dtype);
        y.set_layout(to);
        kernels::convert(ctx, x, y);
        Tensor back(shape, DType::f64);
        back.set_layout(to);
        kernels::convert(ctx, y, back);  // same layout: widening is exact
        const auto got = back.to_vector();
        for (int64_t n = 0; n < 2; ++n)
          for (int64_t c = 0; c < 37; ++c)
            for (int64_t h = 0; h < 3; ++h)
              for (int64_t w = 0; w < 5; ++w) {
                const float v = values[size_t(offset(from, shape, n, c, h, w))];
                const float want = dtype == DType::bf16  ? to_f32(to_bf16(v))
                                   : dtype == DType::f16 ? to_f32(to_f16(v))
                                                         : v;
                ASSERT_EQ(got[size_t(offset(to, shape, n, c, h, w))], want)
                    << layout_name(from) << " -> " << layout_name(to) << " " << dtype_name(dtype);
              }
      }
    }
  }
}

TEST(Convert, AccumulatesIntoF32AndRejectsTheRest) {
  Context ctx;
  const Shape shape{3, 2, 2, 1};
  Tensor x(shape, DType::bf16);
  x.fill(1.5f);
  x.set_layout(Layout::nhwc);
  Tensor y = Tensor::from_vector(shape, std::vector<float>(12, 2.0f));
  kernels::convert(ctx, x, y, /*accumulate=*/true);
  for (float v : y.to_vector()) EXPECT_EQ(v, 3.5f);
  Tensor h(shape, DType::f16);
  EXPECT_CONTAINS(error_of([&] { kernels::convert(ctx, x, h, true); }),
                  "convert: accumulate needs an f32 y");
  Tensor other({3, 4}, DType::f32);
  EXPECT_CONTAINS(error_of([&] { kernels::convert(ctx, x, other); }), "convert");
  EXPECT_CONTAINS(error_of([&] { kernels::convert(ctx, y, y); }), "y shares storage with x");
}

// fp32's default layout on a GPU follows the net's convolutions: nhwc where most are 1x1 with one
// group (ResNet-50's bottlenecks), nchw otherwise (ResNet-18's 3x3s); tensor-core precisions are
// nhwc there whatever the net; the CPU always nchw; model.layout wins.
TEST(NetPrecision, Fp32LayoutFollowsThePointwiseShareOnAGpu) {
  const auto conv = [](const std::string& name, const std::string& keys) {
    return "    - {name: " + name + ", type: Convolution, bottom: data, top: " + name +
           ", num_output: 4, " + keys + "}\n";
  };
  const std::string pointwise_net =
      "layers:\n" + conv("a", "kernel_size: 1") + conv("b", "kernel_size: [1, 1]") +
      conv("c", "kernel_h: 1, kernel_w: 1") + conv("d", "kernel_size: 3, pad: 1");
  const std::string spatial_net = "layers:\n" + conv("a", "kernel_size: 1") +
                                  conv("b", "kernel_size: 3, pad: 1") +
                                  conv("c", "kernel_size: 1, group: 2") +  // grouped: not 1x1 GEMM
                                  conv("d", "kernel_size: [1, 3]");
  const ConfigNode pointwise = parse_config(pointwise_net, "net.yaml");
  const ConfigNode spatial = parse_config(spatial_net, "net.yaml");
  EXPECT_TRUE(mostly_pointwise(pointwise));
  EXPECT_FALSE(mostly_pointwise(spatial));
  EXPECT_FALSE(mostly_pointwise(parse_config("layers: []\n", "net.yaml")));
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  EXPECT_EQ(read_net_precision(pointwise, gpu).layout, Layout::nhwc);
  EXPECT_EQ(read_net_precision(spatial, gpu).layout, Layout::nchw);
  EXPECT_EQ(read_net_precision(pointwise, cpu).layout, Layout::nchw);
  const ConfigNode bf16_spatial = parse_config("precision: bf16\n" + spatial_net, "net.yaml");
  EXPECT_EQ(read_net_precision(bf16_spatial, gpu).layout, Layout::nhwc);
  const ConfigNode chosen = parse_config("layout: nchw\n" + pointwise_net, "net.yaml");
  EXPECT_EQ(read_net_precision(chosen, gpu).layout, Layout::nchw);
  // A bare majority of 1x1s is not enough (DenseNet-121), nor are 1x1s beside a grouped one.
  const std::string majority = "layers:\n" + conv("a", "kernel_size: 1") +
                               conv("b", "kernel_size: 1") + conv("c", "kernel_size: 1") +
                               conv("d", "kernel_size: 3") + conv("e", "kernel_size: 3");
  EXPECT_FALSE(mostly_pointwise(parse_config(majority, "net.yaml")));
  const std::string grouped = pointwise_net + conv("g", "kernel_size: 3, group: 2") +
                              conv("h", "kernel_size: 1") + conv("i", "kernel_size: 1");
  EXPECT_FALSE(mostly_pointwise(parse_config(grouped, "net.yaml")));
  // A depthwise one (group == num_output) counts on neither side: the 1x1s decide.
  const std::string depthwise = pointwise_net + conv("g", "kernel_size: 3, group: 4") +
                                conv("h", "kernel_size: 1") + conv("i", "kernel_size: 1");
  EXPECT_TRUE(mostly_pointwise(parse_config(depthwise, "net.yaml")));
}

// The zoo's nets as the rule sorts them, measured (core/net_precision.cpp): ResNet-50/101,
// MobileNetV2 and EfficientNet-B0 nhwc; the others nchw.
TEST(NetPrecision, ZooFp32LayoutsAsMeasured) {
  const std::string zoo = std::string(CREMA_SOURCE_DIR) + "/configs/zoo/";
  const auto pointwise = [&](const char* net) {
    return mostly_pointwise(load_config(zoo + net + ".yaml").at("model"));
  };
  // Depthwise convolutions count on neither side (MobileNetV2, EfficientNet-B0: their 1x1s
  // decide); ConvNeXt-T has no 1x1 convolution (its MLPs are InnerProducts).
  for (const char* net : {"resnet50", "resnet101", "mobilenet_v2", "efficientnet_b0"}) {
    EXPECT_TRUE(pointwise(net)) << net;
  }
  for (const char* net : {"resnet18", "resnet34", "densenet121", "vgg16_bn", "convnext_tiny"}) {
    EXPECT_FALSE(pointwise(net)) << net;
  }
}

}  // namespace
}  // namespace crema::testing
