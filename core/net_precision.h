// The net's precision pass: which dtype and layout each layer runs under model.precision and
// model.layout, as torch.autocast decides per op which ops run in the low precision.
//
//   model:
//     precision: bf16    # fp32 (default) | tf32 | bf16 | fp16 (core/precision.h)
//     layout: nhwc       # nchw | nhwc; default nhwc for tf32, bf16 and fp16 on a GPU, and for fp32
//                        # there for a net of mostly 1x1 convolutions (mostly_pointwise); else nchw
//     layers:
//       - {name: fc, type: InnerProduct, precision: fp32, ...}   # a layer's own precision wins
//
// Each layer is offered the net's activation dtype (bf16 or f16 under those precisions, else f32)
// in the net's layout. A layer runs what its Layer::runs says; where it does not run the pair it
// is offered, the Net falls back, in this order, to (dtype, nchw), (f32, layout), (f32, nchw):
// a layer keeps the low precision where it can and leaves channels-last before it leaves bf16.
// The Net then gives the layer its bottoms in that format -- inserting a Convert layer
// (layers/convert.cpp) in front of each bottom stored otherwise -- and creates its tops in it.
// So a bf16 channels-last ResNet converts its input once after the data, runs every convolution,
// batch norm, ReLU, sum and pooling in bf16 nhwc, and converts once more before the f32 classifier
// and loss. A layer's own `precision:` is a demand, not an offer: a layer that does not run it
// fails, naming what it runs. Master weights, their gradients and the solver state are f32 in every
// precision (the layers keep their own low-precision copies).
#pragma once

#include <string>

#include "core/config.h"
#include "core/device.h"
#include "core/layer.h"
#include "core/precision.h"
#include "core/tensor.h"

namespace crema {

// How a blob is stored: its dtype and, for 4-D blobs, its layout.
struct BlobFormat {
  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  bool operator==(const BlobFormat& o) const { return dtype == o.dtype && layout == o.layout; }
  bool operator!=(const BlobFormat& o) const { return !(*this == o); }
};
// "f32", "bf16 nhwc"
std::string format_name(const BlobFormat& format);
// Whether tensor t is stored as `format` (the layout counts for 4-D tensors only).
bool stored_as(const Tensor& t, const BlobFormat& format);

struct NetPrecision {
  Precision precision = Precision::fp32;
  Layout layout = Layout::nchw;
};
// Whether model.layers' Convolution layers are all of one group and at least two thirds of them
// 1x1 (ResNet-50: 36 of 53; not ResNet-18: 3 of 20, DenseNet-121: 61 of 120, MobileNetV2:
// grouped): fp32's default layout on a GPU is nhwc for such a net, nchw otherwise (measured:
// net_precision.cpp).
bool mostly_pointwise(const ConfigNode& model);

// model.precision and model.layout, validated (an unknown value fails at its key, naming the
// choices); the layout's default depends on the device and, in fp32, the net, as above.
NetPrecision read_net_precision(const ConfigNode& model, const Device& device);

// The format `layer` runs on `device` under `net` (the rules above). A layer whose own
// `precision:` key asks for what it does not run: crema::Error naming what it runs there.
BlobFormat layer_format(const Layer& layer, const NetPrecision& net, const Device& device);

// The GEMM arithmetic a precision implies for layers that still compute in f32 storage
// (model.math's default): fp32 -> fp32, tf32 -> tf32, bf16 -> bf16, fp16 -> tf32 (crema's f32
// GEMMs round operands to bf16 or tf32, not to fp16).
std::string default_math(Precision precision);

}  // namespace crema
