#!/usr/bin/python3
"""Writes configs/zoo/NAME.yaml and NAME_finetune.yaml: torchvision's ImageNet classifiers as crema
configs whose layer names are torchvision's state_dict names, so that a torchvision checkpoint
loads by name (`--weights`).

    scripts/zoo/make_zoo_configs.py            # (re)writes configs/zoo/
    scripts/zoo/make_zoo_configs.py --check    # exit 1 when a committed file differs from its output

Each architecture is a function below that follows torchvision 0.14's model code (its module
tree, in order) and names every layer after its module path: `layer1.0.conv1`,
`features.3.conv.1.0`. Parameterless modules that torchvision applies twice under one name (a
ResNet block's `relu`) get a numbered name; nothing loads into them. A block's output blob is named
after the block (`layer1.0`, `features.3`), BatchNorm and activations run in place.
No torch needed: the script only writes text. tests/zoo/zoo_logits_test.py checks every config
against torchvision (strict names, logits within 1e-4).
"""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "configs", "zoo")
WIDTH = 100  # wrap layer lines here

# torchvision's test transform for its ImageNet weights (transforms._presets.ImageClassification):
# resize the shorter side to 256 (bilinear, antialiased), center crop 224, 1/255, normalize.
IMAGENET_MEAN = "[0.485, 0.456, 0.406]"
IMAGENET_STD = "[0.229, 0.224, 0.225]"
TEST_TRANSFORM = (f"[{{resize: 256}}, {{center_crop: 224}}, {{scale: 0.00392157}},\n"
                  f"                {{normalize: {{mean: {IMAGENET_MEAN}, std: {IMAGENET_STD}}}}}]")
TRAIN_TRANSFORM = (f"[{{random_resized_crop: 224}}, {{horizontal_flip: 0.5}}, {{scale: 0.00392157}},\n"
                   f"                {{normalize: {{mean: {IMAGENET_MEAN}, std: {IMAGENET_STD}}}}}]")


def scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    return str(value)


class Net:
    """The layers of one config, in order, and the comments between them."""

    def __init__(self):
        self.lines = []
        self.layers = []  # (name, type, keys), for tests/zoo/zoo_logits_test.py

    def comment(self, text):
        self.lines.append("    # " + text)

    def add(self, name, type_, bottom, top=None, **keys):
        """Appends a layer; returns its top (its name unless given)."""
        top = name if top is None else top
        self.layers.append((name, type_, keys))
        fields = [f"name: {name}", f"type: {type_}", f"bottom: {scalar(bottom)}", f"top: {top}"]
        fields += [f"{key}: {scalar(value)}" for key, value in keys.items()]
        self.lines.append(wrap(fields))
        return top

    # Modules with parameters: torchvision's defaults written out where crema's differ.
    def conv(self, name, bottom, out, kernel, stride=1, pad=0, group=1, bias=False, top=None):
        keys = {"num_output": out, "kernel_size": kernel}
        if stride != 1:
            keys["stride"] = stride
        if pad:
            keys["pad"] = pad
        if group != 1:
            keys["group"] = group
        if not bias:
            keys["bias_term"] = False
        return self.add(name, "Convolution", bottom, top, **keys)

    def bn(self, name, blob, eps=None):
        return self.add(name, "BatchNorm", blob, blob, **({"eps": eps} if eps else {}))

    def act(self, name, blob, kind):
        kinds = {"relu": ("ReLU", {}), "relu6": ("Clip", {"min": 0, "max": 6}),
                 "silu": ("SiLU", {}), "sigmoid": ("Sigmoid", {}), "hardswish": ("Hardswish", {}),
                 "hardsigmoid": ("Hardsigmoid", {}), "gelu": ("GELU", {})}
        type_, keys = kinds[kind]
        return self.add(name, type_, blob, blob, **keys)

    def max_pool(self, name, bottom, kernel, stride, pad=0):
        keys = {"pool": "max", "kernel_size": kernel, "stride": stride}
        if pad:
            keys["pad"] = pad
        return self.add(name, "Pooling", bottom, **keys, round_mode="floor")

    def global_avg_pool(self, name, bottom):
        return self.add(name, "Pooling", bottom, pool="average", global_pooling=True)

    def fc(self, name, bottom, out):
        return self.add(name, "InnerProduct", bottom, num_output=out)

    def dropout(self, name, blob, p):
        return self.add(name, "Dropout", blob, blob, dropout_ratio=p)

    def conv_bn_act(self, prefix, bottom, out, kernel, stride=1, group=1, act="relu", eps=None):
        """torchvision's Conv2dNormActivation: prefix.0 conv (padding (k-1)/2), prefix.1 norm,
        prefix.2 activation (none when act is None)."""
        top = self.conv(f"{prefix}.0", bottom, out, kernel, stride, (kernel - 1) // 2, group,
                        top=prefix)
        self.bn(f"{prefix}.1", top, eps)
        if act:
            self.act(f"{prefix}.2", top, act)
        return top


def wrap(fields):
    """`- {a, b, ...}` on lines of at most WIDTH characters, continued 7 columns in."""
    lines, line = [], "    - {" + fields[0]
    for field in fields[1:]:
        if len(line) + len(field) + 3 > WIDTH:
            lines.append(line + ",")
            line = "       " + field
        else:
            line += ", " + field
    return "\n".join(lines + [line + "}"])


# ---- ResNet (torchvision.models.resnet: He et al. 2016, the v1.5 stride on the 3x3) ----------

def resnet(net, block, layers):
    x = net.conv("conv1", "data", 64, 7, stride=2, pad=3)
    net.bn("bn1", x)
    net.act("relu", x, "relu")
    x = net.max_pool("maxpool", x, 3, 2, 1)
    channels = 64
    for stage, count in enumerate(layers, start=1):
        planes = 64 * 2 ** (stage - 1)
        for i in range(count):
            stride = 2 if stage > 1 and i == 0 else 1
            prefix = f"layer{stage}.{i}"
            net.comment(f"{prefix}: {block}" + (f", stride {stride}" if stride > 1 else ""))
            x, channels = resnet_block(net, prefix, x, channels, planes, stride, block)
    net.comment("head")
    x = net.global_avg_pool("avgpool", x)
    return net.fc("fc", x, 1000)


def resnet_block(net, prefix, x, channels, planes, stride, block):
    out = planes * (4 if block == "Bottleneck" else 1)
    if block == "BasicBlock":
        convs = [(planes, 3, stride), (planes, 3, 1)]
    else:
        convs = [(planes, 1, 1), (planes, 3, stride), (out, 1, 1)]
    y = x
    for j, (width, kernel, s) in enumerate(convs, start=1):
        y = net.conv(f"{prefix}.conv{j}", y, width, kernel, s, kernel // 2)
        net.bn(f"{prefix}.bn{j}", y)
        if j < len(convs):
            net.act(f"{prefix}.relu{j}", y, "relu")
    shortcut = x
    if stride != 1 or channels != out:
        shortcut = net.conv(f"{prefix}.downsample.0", x, out, 1, stride)
        net.bn(f"{prefix}.downsample.1", shortcut)
    y = net.add(f"{prefix}.add", "Eltwise", [y, shortcut], prefix, operation="SUM")
    net.act(f"{prefix}.relu{len(convs)}", y, "relu")
    return y, out


# ---- VGG and AlexNet (torchvision.models.vgg, .alexnet) --------------------------------------

VGG_CFGS = {"A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
            "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512,
                  512, "M"]}


def vgg(net, cfg, batch_norm):
    x, index = "data", 0
    for v in VGG_CFGS[cfg]:
        if v == "M":
            x = net.max_pool(f"features.{index}", x, 2, 2)
            index += 1
            continue
        x = net.conv(f"features.{index}", x, v, 3, pad=1, bias=True)
        if batch_norm:
            net.bn(f"features.{index + 1}", x)
        net.act(f"features.{index + 1 + batch_norm}", x, "relu")
        index += 2 + batch_norm
    net.comment("avgpool, AdaptiveAvgPool2d(7): the identity at 224 x 224 input (the features are "
                "7 x 7), so it is left out")
    return classifier(net, x, [(0, 4096), (3, 4096), (6, 1000)], dropout_first=False)


def classifier(net, x, linears, dropout_first):
    """torchvision's VGG/AlexNet classifier: Linear, ReLU, Dropout(0.5) ... (AlexNet: Dropout,
    Linear, ReLU ...), the last Linear alone."""
    for k, (index, out) in enumerate(linears):
        if dropout_first and k < len(linears) - 1:
            net.dropout(f"classifier.{index - 1}", x, 0.5)
        x = net.fc(f"classifier.{index}", x, out)
        if k < len(linears) - 1:
            net.act(f"classifier.{index + 1}", x, "relu")
            if not dropout_first:
                net.dropout(f"classifier.{index + 2}", x, 0.5)
    return x


def alexnet(net):
    x = net.conv("features.0", "data", 64, 11, stride=4, pad=2, bias=True)
    net.act("features.1", x, "relu")
    x = net.max_pool("features.2", x, 3, 2)
    x = net.conv("features.3", x, 192, 5, pad=2, bias=True)
    net.act("features.4", x, "relu")
    x = net.max_pool("features.5", x, 3, 2)
    for index, out in [(6, 384), (8, 256), (10, 256)]:
        x = net.conv(f"features.{index}", x, out, 3, pad=1, bias=True)
        net.act(f"features.{index + 1}", x, "relu")
    x = net.max_pool("features.12", x, 3, 2)
    net.comment("avgpool, AdaptiveAvgPool2d(6): the identity at 224 x 224 input (the features are "
                "6 x 6), so it is left out")
    return classifier(net, x, [(1, 4096), (4, 4096), (6, 1000)], dropout_first=True)


# ---- MobileNetV2 (torchvision.models.mobilenetv2: Sandler et al. 2018) -----------------------

def mobilenet_v2(net):
    x = net.conv_bn_act("features.0", "data", 32, 3, stride=2, act="relu6")
    channels, index = 32, 1
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            prefix = f"features.{index}"
            net.comment(f"{prefix}: inverted residual, expansion {t}, stride {stride}")
            hidden = int(round(channels * t))
            y, j = x, 0
            if t != 1:
                y = net.conv_bn_act(f"{prefix}.conv.0", y, hidden, 1, act="relu6")
                j = 1
            y = net.conv_bn_act(f"{prefix}.conv.{j}", y, hidden, 3, stride, hidden, act="relu6")
            residual = stride == 1 and channels == c
            y = net.conv(f"{prefix}.conv.{j + 1}", y, c, 1, top=None if residual else prefix)
            net.bn(f"{prefix}.conv.{j + 2}", y)
            if residual:
                y = net.add(f"{prefix}.add", "Eltwise", [y, x], prefix, operation="SUM")
            x, channels, index = y, c, index + 1
    net.comment("head")
    x = net.conv_bn_act("features.18", x, 1280, 1, act="relu6")
    x = net.global_avg_pool("avgpool", x)
    net.dropout("classifier.0", x, 0.2)
    return net.fc("classifier.1", x, 1000)


# ---- DenseNet-121 (torchvision.models.densenet: Huang et al. 2017) ---------------------------

def densenet121(net, growth=32, bn_size=4, blocks=(6, 12, 24, 16)):
    x = net.conv("features.conv0", "data", 64, 7, stride=2, pad=3)
    net.bn("features.norm0", x)
    net.act("features.relu0", x, "relu")
    x = net.max_pool("features.pool0", x, 3, 2, 1)
    channels = 64
    for b, count in enumerate(blocks, start=1):
        net.comment(f"features.denseblock{b}: each layer's input is the concatenation of the "
                    "block's input and every earlier layer's output")
        for i in range(1, count + 1):
            prefix = f"features.denseblock{b}.denselayer{i}"
            y = net.add(f"{prefix}.norm1", "BatchNorm", x, f"{prefix}.norm1")
            net.act(f"{prefix}.relu1", y, "relu")
            y = net.conv(f"{prefix}.conv1", y, bn_size * growth, 1)
            net.bn(f"{prefix}.norm2", y)
            net.act(f"{prefix}.relu2", y, "relu")
            y = net.conv(f"{prefix}.conv2", y, growth, 3, pad=1)
            x = net.add(f"{prefix}.concat", "Concat", [x, y], f"{prefix}.concat")
            channels += growth
        if b < len(blocks):
            prefix = f"features.transition{b}"
            net.comment(f"{prefix}: halves the channels and the resolution")
            y = net.add(f"{prefix}.norm", "BatchNorm", x, f"{prefix}.norm")
            net.act(f"{prefix}.relu", y, "relu")
            channels //= 2
            y = net.conv(f"{prefix}.conv", y, channels, 1)
            x = net.add(f"{prefix}.pool", "Pooling", y, pool="average", kernel_size=2, stride=2)
    net.comment("head: norm5, then DenseNet.forward's ReLU and adaptive average pooling")
    x = net.add("features.norm5", "BatchNorm", x, "features.norm5")
    net.act("relu", x, "relu")
    x = net.global_avg_pool("avgpool", x)
    return net.fc("classifier", x, 1000)


# ---- EfficientNet-B0 (torchvision.models.efficientnet: Tan & Le 2019) ------------------------

def squeeze_excitation(net, prefix, x, channels, squeeze, act, gate):
    """torchvision.ops.SqueezeExcitation: x * gate(fc2(act(fc1(avgpool(x))))), fc1 and fc2 1x1
    convolutions with bias. The gate [N, C, 1, 1] is flattened to [N, C] and scales x's planes
    (Scale with a second bottom, axis 0: one factor per (n, c))."""
    s = net.global_avg_pool(f"{prefix}.avgpool", x)
    s = net.conv(f"{prefix}.fc1", s, squeeze, 1, bias=True)
    net.act(f"{prefix}.activation", s, act)
    s = net.conv(f"{prefix}.fc2", s, channels, 1, bias=True)
    net.act(f"{prefix}.scale_activation", s, gate)
    s = net.add(f"{prefix}.flatten", "Flatten", s, f"{prefix}.gate")
    return net.add(f"{prefix}.scale", "Scale", [x, s], prefix, axis=0)


def efficientnet_b0(net):
    x = net.conv_bn_act("features.0", "data", 32, 3, stride=2, act="silu")
    channels = 32
    stages = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
              (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]
    for stage, (expand, kernel, s, out, count) in enumerate(stages, start=1):
        for i in range(count):
            stride = s if i == 0 else 1
            prefix = f"features.{stage}.{i}"
            net.comment(f"{prefix}: MBConv, expansion {expand}, {kernel}x{kernel}, stride {stride}")
            hidden, y, j = channels * expand, x, 0
            if expand != 1:
                y = net.conv_bn_act(f"{prefix}.block.0", y, hidden, 1, act="silu")
                j = 1
            y = net.conv_bn_act(f"{prefix}.block.{j}", y, hidden, kernel, stride, hidden,
                                act="silu")
            y = squeeze_excitation(net, f"{prefix}.block.{j + 1}", y, hidden,
                                   max(1, channels // 4), "silu", "sigmoid")
            residual = stride == 1 and channels == out
            y = net.conv_bn_act(f"{prefix}.block.{j + 2}", y, out, 1, act=None)
            if residual:
                net.comment("stochastic depth: the identity in inference")
                y = net.add(f"{prefix}.add", "Eltwise", [y, x], prefix, operation="SUM")
            x, channels = y, out
    net.comment("head")
    x = net.conv_bn_act("features.8", x, 1280, 1, act="silu")
    x = net.global_avg_pool("avgpool", x)
    net.dropout("classifier.0", x, 0.2)
    return net.fc("classifier.1", x, 1000)


# ---- MobileNetV3-Large (torchvision.models.mobilenetv3: Howard et al. 2019) ------------------

def make_divisible(v, divisor=8):
    """torchvision's _make_divisible: v rounded to a multiple of 8, never 10% below v."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def mobilenet_v3_large(net):
    eps = 0.001
    x = net.conv_bn_act("features.0", "data", 16, 3, stride=2, act="hardswish", eps=eps)
    settings = [(3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2),
                (3, 72, 24, False, "relu", 1), (5, 72, 40, True, "relu", 2),
                (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
                (3, 240, 80, False, "hardswish", 2), (3, 200, 80, False, "hardswish", 1),
                (3, 184, 80, False, "hardswish", 1), (3, 184, 80, False, "hardswish", 1),
                (3, 480, 112, True, "hardswish", 1), (3, 672, 112, True, "hardswish", 1),
                (5, 672, 160, True, "hardswish", 2), (5, 960, 160, True, "hardswish", 1),
                (5, 960, 160, True, "hardswish", 1)]
    channels = 16
    for index, (kernel, hidden, out, se, act, stride) in enumerate(settings, start=1):
        prefix = f"features.{index}"
        net.comment(f"{prefix}: inverted residual, {kernel}x{kernel}, stride {stride}" +
                    (", squeeze-excitation" if se else ""))
        y, j = x, 0
        if hidden != channels:
            y = net.conv_bn_act(f"{prefix}.block.0", y, hidden, 1, act=act, eps=eps)
            j = 1
        y = net.conv_bn_act(f"{prefix}.block.{j}", y, hidden, kernel, stride, hidden, act=act,
                            eps=eps)
        if se:
            j += 1
            y = squeeze_excitation(net, f"{prefix}.block.{j}", y, hidden,
                                   make_divisible(hidden // 4), "relu", "hardsigmoid")
        y = net.conv_bn_act(f"{prefix}.block.{j + 1}", y, out, 1, act=None, eps=eps)
        if stride == 1 and channels == out:
            y = net.add(f"{prefix}.add", "Eltwise", [y, x], prefix, operation="SUM")
        x, channels = y, out
    net.comment("head")
    x = net.conv_bn_act("features.16", x, 960, 1, act="hardswish", eps=eps)
    x = net.global_avg_pool("avgpool", x)
    x = net.fc("classifier.0", x, 1280)
    net.act("classifier.1", x, "hardswish")
    net.dropout("classifier.2", x, 0.2)
    return net.fc("classifier.3", x, 1000)


# ---- ConvNeXt-Tiny (torchvision.models.convnext: Liu et al. 2022) ----------------------------

def layer_norm_2d(net, name, bottom):
    """torchvision's LayerNorm2d: LayerNorm over the channels at each (n, h, w), eps 1e-6."""
    return net.add(name, "LayerNorm", bottom, name, axis=1, eps=1e-6)


def convnext_tiny(net, depths=(3, 3, 9, 3), dims=(96, 192, 384, 768)):
    x = net.conv("features.0.0", "data", dims[0], 4, stride=4, bias=True, top="features.0")
    layer_norm_2d(net, "features.0.1", x)
    x = "features.0.1"
    index = 1
    for stage, (depth, dim) in enumerate(zip(depths, dims)):
        if stage > 0:
            net.comment(f"features.{index}: downsampling, LayerNorm2d then a 2x2 stride-2 conv")
            y = layer_norm_2d(net, f"features.{index}.0", x)
            x = net.conv(f"features.{index}.1", y, dim, 2, stride=2, bias=True,
                         top=f"features.{index}")
            index += 1
        for i in range(depth):
            prefix = f"features.{index}.{i}"
            net.comment(f"{prefix}: CNBlock, dw 7x7, LayerNorm, MLP x4 (channels last), layer "
                        "scale, stochastic depth")
            y = net.conv(f"{prefix}.block.0", x, dim, 7, pad=3, group=dim, bias=True)
            y = net.add(f"{prefix}.block.1", "Permute", y, order=[0, 2, 3, 1])
            y = net.add(f"{prefix}.block.2", "LayerNorm", y, axis=-1, eps=1e-6)
            y = net.add(f"{prefix}.block.3", "InnerProduct", y, num_output=4 * dim, axis=3)
            net.act(f"{prefix}.block.4", y, "gelu")
            y = net.add(f"{prefix}.block.5", "InnerProduct", y, num_output=dim, axis=3)
            y = net.add(f"{prefix}.block.6", "Permute", y, order=[0, 3, 1, 2])
            y = net.add(prefix, "LayerScale", y, f"{prefix}.scaled")
            y = net.add(f"{prefix}.stochastic_depth", "StochasticDepth", y, y,
                        p=round(0.1 * (sum(depths[:stage]) + i) / (sum(depths) - 1), 6))
            x = net.add(f"{prefix}.add", "Eltwise", [y, x], f"{prefix}.out", operation="SUM")
        index += 1
    net.comment("head: avgpool, classifier.0 LayerNorm2d, classifier.1 Flatten, classifier.2 Linear")
    x = net.global_avg_pool("avgpool", x)
    x = layer_norm_2d(net, "classifier.0", x)
    return net.fc("classifier.2", x, 1000)


# ---- the files ------------------------------------------------------------------------------

ARCHITECTURES = {
    "resnet18": (lambda n: resnet(n, "BasicBlock", [2, 2, 2, 2]), "fc",
                 "ResNet-18 (He et al. 2016)"),
    "resnet34": (lambda n: resnet(n, "BasicBlock", [3, 4, 6, 3]), "fc",
                 "ResNet-34 (He et al. 2016)"),
    "resnet50": (lambda n: resnet(n, "Bottleneck", [3, 4, 6, 3]), "fc",
                 "ResNet-50 (He et al. 2016; torchvision's v1.5: stride 2 on the 3x3 conv)"),
    "resnet101": (lambda n: resnet(n, "Bottleneck", [3, 4, 23, 3]), "fc",
                  "ResNet-101 (He et al. 2016; torchvision's v1.5: stride 2 on the 3x3 conv)"),
    "vgg11_bn": (lambda n: vgg(n, "A", True), "classifier.6",
                 "VGG-11 with batch norm (Simonyan & Zisserman 2014, configuration A)"),
    "vgg16": (lambda n: vgg(n, "D", False), "classifier.6",
              "VGG-16 (Simonyan & Zisserman 2014, configuration D)"),
    "vgg16_bn": (lambda n: vgg(n, "D", True), "classifier.6",
                 "VGG-16 with batch norm (Simonyan & Zisserman 2014, configuration D)"),
    "alexnet": (alexnet, "classifier.6",
                "AlexNet, torchvision's one-GPU variant (Krizhevsky 2014, 'One weird trick')"),
    "mobilenet_v2": (mobilenet_v2, "classifier.1", "MobileNetV2 (Sandler et al. 2018)"),
    "densenet121": (densenet121, "classifier", "DenseNet-121 (Huang et al. 2017)"),
    "efficientnet_b0": (efficientnet_b0, "classifier.1", "EfficientNet-B0 (Tan & Le 2019)"),
    "mobilenet_v3_large": (mobilenet_v3_large, "classifier.3",
                           "MobileNetV3-Large (Howard et al. 2019)"),
    "convnext_tiny": (convnext_tiny, "classifier.2", "ConvNeXt-Tiny (Liu et al. 2022)"),
}

HEADER = """# {name}: {title}, as torchvision.models.{name} (torchvision 0.14).
# Generated by scripts/zoo/make_zoo_configs.py: edit the script, not this file.
# Layer names are torchvision's state_dict names, so its weights load by name:
#   crema test configs/zoo/{name}.yaml --weights {name}.pth --set data.test.source.root=DIR
# (torch.save(model.state_dict()), or a safetensors file of it; tests/zoo/zoo_logits_test.py
# writes both and checks that crema's logits equal torchvision's). The test transform is
# torchvision's for its ImageNet weights: the shorter side resized to 256 (bilinear), the centre
# 224 x 224, /255, ImageNet's mean and std. Max pooling rounds down as PyTorch does
# (round_mode: floor). The logits are the blob '{logits}'.
"""


def layers_of(name):
    """The layers of configs/zoo/NAME.yaml as (name, type, keys), the accuracy layer left out."""
    net = Net()
    ARCHITECTURES[name][0](net)
    return net.layers


def inference_config(name):
    build, head, title = ARCHITECTURES[name]
    net = Net()
    logits = build(net)
    net.comment("top-1 accuracy of the test set; the logits are the blob " + logits)
    net.add("accuracy", "Accuracy", [logits, "label"], phase="test")
    return (HEADER.format(name=name, title=title, logits=logits) +
            f"name: {name}\nseed: 1\n\n"
            "data:\n  test:\n"
            "    # ImageNet's validation images as one folder per class (torchvision's ImageFolder)\n"
            "    source: {format: image_folder, root: /data/imagenet/val}\n"
            "    batch_size: 50\n"
            f"    transform: {TEST_TRANSFORM}\n\n"
            "model:\n  inputs: {data: [3, 224, 224], label: []}\n  layers:\n" +
            "\n".join(net.lines) + "\n")


def finetune_config(name):
    _, head, title = ARCHITECTURES[name]
    return f"""# {name}_finetune: {name}.yaml with a new classifier, trained on a folder of your images.
# Generated by scripts/zoo/make_zoo_configs.py: edit the script, not this file.
#   crema train configs/zoo/{name}_finetune.yaml --weights {name}.pth \\
#     --set model.layers.{head}_new.num_output=3 \\
#     --set data.train.source.root=photos/train --set data.test.source.root=photos/val
# The last layer '{head}' becomes '{head}_new' with num_output classes (set it once, as above):
# renamed, it is not loaded from the ImageNet weights (their 1000 rows do not fit) and starts from
# its filler, while every other layer loads by name. Its top is still the blob '{head}', so the
# loss and the accuracy read it unchanged. The training transform is torchvision's reference
# recipe (random resized crop 224, horizontal flip); the test transform is {name}.yaml's.
_base_: {name}.yaml
name: {name}_finetune

data:
  train:
    source: {{format: image_folder, root: /data/my_images/train}}
    batch_size: 32
    transform: {TRAIN_TRANSFORM}
    workers: 2
  test:
    source: {{root: /data/my_images/val}}
    batch_size: 32

model:
  patch_layers:
    {head}: {{name: {head}_new, num_output: 10}}
  append_layers:
    - {{name: loss, type: SoftmaxWithLoss, bottom: [{head}, label], top: loss}}

solver:
  type: sgd
  base_lr: 0.001
  momentum: 0.9
  weight_decay: 0.0001
  lr_policy: {{type: cosine}}
  max_epochs: 10
  test_interval: 500
  display: 20
"""


def outputs():
    files = {}
    for name in ARCHITECTURES:
        files[f"{name}.yaml"] = inference_config(name)
        files[f"{name}_finetune.yaml"] = finetune_config(name)
    return files


def main():
    check = sys.argv[1:] == ["--check"]
    stale = []
    os.makedirs(OUT, exist_ok=True)
    for file, text in outputs().items():
        path = os.path.join(OUT, file)
        if check:
            if not os.path.exists(path) or open(path).read() != text:
                stale.append(path)
            continue
        with open(path, "w") as f:
            f.write(text)
    if stale:
        print("differs from scripts/zoo/make_zoo_configs.py's output (run it): " + ", ".join(stale))
        sys.exit(1)


if __name__ == "__main__":
    main()
