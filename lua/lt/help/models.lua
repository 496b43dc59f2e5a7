-- lt.help: the model zoo (lua/lt/models/).
local FULL = "builds a full-size model (tens to hundreds of MiB of parameters)"

return {
  title = "Models",
  intro = "lt.models (loaded on first use) builds torchvision's ResNets and VGGs with torchvision's module "
    .. "tree, parameter names and initialisation, so their checkpoints (converted to safetensors) load "
    .. "strictly with m:load_state_dict(lt.load(path)); and multilayer perceptrons. Every constructor also "
    .. "takes dtype= and device= for the parameters.",
  entries = {
    { "lt.models", "lt.models", "ResNets, VGGs and MLPs, and their building blocks.",
      ex = "local net = lt.models.mlp({4, 16, 3})", members = "lt.models." },
    { "lt.models.resnet18",
      "lt.models.resnet18({num_classes=1000, zero_init_residual=false, dtype=, device=}), resnet34, resnet50, "
        .. "resnet101, resnet152",
      "torchvision's ResNets for [N, 3, H, W] images: 18 and 34 layers of BasicBlocks ({2, 2, 2, 2}, "
        .. "{3, 4, 6, 3}), 50, 101 and 152 of Bottlenecks ({3, 4, 6, 3}, {3, 4, 23, 3}, {3, 8, 36, 3}). "
        .. "zero_init_residual starts each residual branch at zero (each block the identity).",
      opts = "num_classes=1000, zero_init_residual=false, groups=1, width_per_group=64, dtype, device",
      ex = "local net = lt.models.resnet18({num_classes = 10}); local logits = net(lt.randn(2, 3, 32, 32))",
      aliases = { "lt.models.resnet34", "lt.models.resnet50", "lt.models.resnet101", "lt.models.resnet152" },
      see = { "lt.models.ResNet" } },
    { "lt.models.resnext50_32x4d", "lt.models.resnext50_32x4d({num_classes=1000, ...}), wide_resnet50_2",
      "ResNet-50's layout with grouped bottlenecks (32 groups of width 4) or twice-as-wide ones "
        .. "(width_per_group 128), as torchvision's; the fixed options are refused.",
      opts = "num_classes=1000, zero_init_residual=false, dtype, device",
      ex = "local net = lt.models.resnext50_32x4d({num_classes = 10})", run = FULL,
      aliases = { "lt.models.wide_resnet50_2" } },
    { "lt.models.ResNet", "lt.models.ResNet(block, layers, {num_classes=1000, zero_init_residual=false, groups=1, width_per_group=64, dtype=, device=})",
      "A ResNet of block (lt.models.BasicBlock or lt.models.Bottleneck) with layers[i] blocks in stage i "
        .. "(four stages): conv1 bn1 relu maxpool layer1..layer4 avgpool fc, torchvision's names.",
      opts = "num_classes=1000, zero_init_residual=false, groups=1, width_per_group=64, dtype, device",
      ex = "local tiny = lt.models.ResNet(lt.models.BasicBlock, {1, 1, 1, 1}, {num_classes = 10})" },
    { "lt.models.BasicBlock", "lt.models.BasicBlock(inplanes, planes, stride=1, downsample, groups=1, base_width=64, factory)",
      "ResNet's two-3x3-convolution block (conv1 bn1 relu conv2 bn2, plus downsample), for ResNet-18 and 34.",
      ex = "local block = lt.models.BasicBlock(8, 8); local out = block(lt.randn(1, 8, 4, 4))" },
    { "lt.models.Bottleneck", "lt.models.Bottleneck(inplanes, planes, stride=1, downsample, groups=1, base_width=64, factory)",
      "ResNet's 1x1-3x3-1x1 block (v1.5: the stride on the 3x3), widening to planes * 4, for ResNet-50 and up.",
      ex = "local block = lt.models.Bottleneck(32, 8); local out = block(lt.randn(1, 32, 4, 4))" },
    { "lt.models.vgg11",
      "lt.models.vgg11({num_classes=1000, dropout=0.5, init_weights=true, dtype=, device=}), vgg13, vgg16, "
        .. "vgg19 and vgg11_bn .. vgg19_bn",
      "torchvision's VGGs (configurations A, B, D, E; the _bn ones with batch norm): features, avgpool to "
        .. "7 x 7, classifier Linear(512*7*7, 4096) ReLU Dropout Linear(4096, 4096) ReLU Dropout "
        .. "Linear(4096, num_classes).",
      opts = "num_classes=1000, dropout=0.5, init_weights=true, batch_norm (fixed by the name), dtype, device",
      ex = "local net = lt.models.vgg16_bn({num_classes = 10})", run = FULL,
      aliases = { "lt.models.vgg13", "lt.models.vgg16", "lt.models.vgg19", "lt.models.vgg11_bn",
        "lt.models.vgg13_bn", "lt.models.vgg16_bn", "lt.models.vgg19_bn" } },
    { "lt.models.vgg", "lt.models.vgg(cfg, {batch_norm=false, num_classes=1000, dropout=0.5, init_weights=true, in_channels=3, pool=7, hidden=4096, dtype=, device=})",
      "A VGG of any configuration: a name (\"A\", \"B\", \"D\", \"E\") or a list of widths and \"M\" (a 2 x 2 "
        .. "max pool). in_channels, pool (the avgpool's output size) and hidden (the classifier's width) make "
        .. "a small one; the defaults are torchvision's.",
      opts = "batch_norm=false, num_classes=1000, dropout=0.5, init_weights=true, in_channels=3, pool=7, "
        .. "hidden=4096, dtype, device",
      ex = "local net = lt.models.vgg({8, \"M\", 16, \"M\"}, {in_channels = 1, pool = 1, hidden = 32, num_classes = 10})\n"
        .. "local logits = net(lt.randn(2, 1, 28, 28))",
      aliases = { "lt.models.VGG" } },
    { "lt.models.make_layers", "lt.models.make_layers(cfg, batch_norm, in_channels=3, factory) -> features, channels",
      "torchvision's make_layers: VGG's feature extractor for a configuration list (Conv2d 3x3, [BatchNorm2d], "
        .. "ReLU per width, MaxPool2d 2 per \"M\") as an nn.Sequential, and its output channels.",
      ex = "local features, channels = lt.models.make_layers({8, \"M\", 16}, true, 1)" },
    { "lt.models.cfgs", "lt.models.cfgs", "VGG's configurations A, B, D and E (vgg11, 13, 16, 19) as lists of widths and \"M\".",
      ex = "local widths = lt.models.cfgs.D" },
    { "lt.models.mlp", "lt.models.mlp(sizes, {activation=\"relu\", dropout=0, bias=true, dtype=, device=})",
      "A multilayer perceptron through sizes = {in, hidden..., out} as an nn.Sequential (Linear, "
        .. "activation, [Dropout], ..., Linear: no activation after the last, the output is logits), so its "
        .. "state_dict names are the hand-written Sequential's. activation is \"relu\", \"gelu\", \"tanh\", "
        .. "\"sigmoid\" or a function returning a new module per layer.",
      opts = "activation=\"relu\", dropout=0, bias=true, dtype, device",
      ex = "local net = lt.models.mlp({784, 256, 10}, {dropout = 0.1})" },
  },
}
