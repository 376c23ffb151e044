// A Convert layer (layers/convert.cpp) with its two blobs, built as the Net builds it (no YAML:
// users never write Convert): x stored as (from, from_layout), y as (to, to_layout), on ctx's
// device, set up and reshaped.
#pragma once

#include <memory>

#include "core/registry.h"
#include "layers/register_layers.h"

namespace crema::testing {

struct ConvertRig {
  ConvertRig(Context& ctx, const Shape& shape, DType from, Layout from_layout, DType to,
             Layout to_layout) {
    LayerSpec spec;
    spec.name = "c";
    spec.type = "Convert";
    spec.bottoms = {"x"};
    spec.tops = {"y"};
    layer = builtin_layers().create(spec);
    x.value = ctx.empty(shape, from);
    x.value.set_layout(from_layout);
    x.grad = ctx.empty(shape, from);
    x.grad.set_layout(from_layout);
    y.value = ctx.empty({0}, to);
    y.value.set_layout(to_layout);
    layer->setup({&x}, {&y}, ctx);
    layer->reshape({&x}, {&y}, ctx);
    y.grad = ctx.empty(shape, to);
    y.grad.set_layout(to_layout);
  }
  std::unique_ptr<Layer> layer;
  Blob x, y;
};

}  // namespace crema::testing
