-- ResNets as torchvision builds them (torchvision.models.resnet): the same
-- module tree, so the same state_dict names, shapes and order, and a
-- torchvision checkpoint loads strictly (saved as safetensors, lt.load):
--
--   conv1 bn1 relu maxpool layer1..layer4 avgpool fc
--   layerN = nn.Sequential of blocks, each conv1 bn1 relu conv2 bn2 [conv3
--   bn3] and, where the shape changes, downsample = Sequential(conv 1x1, bn)
--   ("layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_mean")
--
-- resnet18 {2,2,2,2} and resnet34 {3,4,6,3} of BasicBlocks; resnet50
-- {3,4,6,3}, resnet101 {3,4,23,3}, resnet152 {3,8,36,3} of Bottlenecks, and
-- the variants with wider or grouped bottlenecks (resnext50_32x4d,
-- wide_resnet50_2). Options, torchvision's: {num_classes=1000,
-- zero_init_residual=false, groups=1, width_per_group=64}; and dtype=,
-- device= for the parameters. torchvision's replace_stride_with_dilation
-- and norm_layer are not offered.
local nn = require "lt.nn"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local init = nn.init

local M = {}

-- The factory options (dtype, device) every layer is made with.
local function conv3x3(in_planes, out_planes, stride, groups, factory)
  return nn.Conv2d(in_planes, out_planes, 3, { stride = stride, padding = 1, groups = groups, bias = false,
    dtype = factory.dtype, device = factory.device })
end

local function conv1x1(in_planes, out_planes, stride, factory)
  return nn.Conv2d(in_planes, out_planes, 1, { stride = stride, bias = false, dtype = factory.dtype,
    device = factory.device })
end

local function batch_norm(planes, factory)
  return nn.BatchNorm2d(planes, { dtype = factory.dtype, device = factory.device })
end

-- y = m(x), and x's handle released when this block made x itself: the
-- intermediate results of a block go back to the allocator as soon as the
-- next layer has used them (autograd keeps what it saved), instead of
-- waiting for the collector. The block's input is the caller's: never freed.
local function step(m, x)
  local y = m(x)
  if not rawequal(x, y) then x:free() end
  return y
end

-- out + identity in place (torchvision's out += identity), then ReLU.
local function add_residual(block, out, x)
  if block.downsample ~= nil then
    local identity = block.downsample(x)
    out:add_(identity)
    identity:free()
  else
    out:add_(x)
  end
  return block.relu(out) -- in place: returns out
end

-- ---- blocks ----

local BasicBlock = nn.Module:extend("BasicBlock")
M.BasicBlock = BasicBlock
BasicBlock.expansion = 1

-- BasicBlock(inplanes, planes, stride=1, downsample=nil, groups=1,
-- base_width=64, factory={}): two 3x3 convolutions.
function BasicBlock:init(inplanes, planes, stride, downsample, groups, base_width, factory)
  factory = factory or {}
  if (groups or 1) ~= 1 or (base_width or 64) ~= 64 then
    raise("BasicBlock only supports groups=1 and width_per_group=64")
  end
  self.conv1 = conv3x3(inplanes, planes, stride or 1, 1, factory)
  self.bn1 = batch_norm(planes, factory)
  self.relu = nn.ReLU { inplace = true }
  self.conv2 = conv3x3(planes, planes, 1, 1, factory)
  self.bn2 = batch_norm(planes, factory)
  -- Registered only when there is one: torchvision's None is no module.
  if downsample ~= nil then self.downsample = downsample end
  self.stride = stride or 1
end

function BasicBlock:forward(x)
  local out = self.conv1(x)
  out = step(self.bn1, out)
  out = self.relu(out)
  out = step(self.conv2, out)
  out = step(self.bn2, out)
  return add_residual(self, out, x)
end

local Bottleneck = nn.Module:extend("Bottleneck")
M.Bottleneck = Bottleneck
Bottleneck.expansion = 4

-- Bottleneck(inplanes, planes, stride=1, downsample=nil, groups=1,
-- base_width=64, factory={}): 1x1 down to `width`, 3x3 (strided, grouped)
-- and 1x1 up to planes * 4, with torchvision's (ResNet v1.5) stride on the
-- 3x3 convolution.
function Bottleneck:init(inplanes, planes, stride, downsample, groups, base_width, factory)
  factory = factory or {}
  groups, base_width = groups or 1, base_width or 64
  local width = math.floor(planes * (base_width / 64)) * groups
  self.conv1 = conv1x1(inplanes, width, 1, factory)
  self.bn1 = batch_norm(width, factory)
  self.conv2 = conv3x3(width, width, stride or 1, groups, factory)
  self.bn2 = batch_norm(width, factory)
  self.conv3 = conv1x1(width, planes * Bottleneck.expansion, 1, factory)
  self.bn3 = batch_norm(planes * Bottleneck.expansion, factory)
  self.relu = nn.ReLU { inplace = true }
  if downsample ~= nil then self.downsample = downsample end
  self.stride = stride or 1
end

function Bottleneck:forward(x)
  local out = self.conv1(x)
  out = step(self.bn1, out)
  out = self.relu(out)
  out = step(self.conv2, out)
  out = step(self.bn2, out)
  out = self.relu(out)
  out = step(self.conv3, out)
  out = step(self.bn3, out)
  return add_residual(self, out, x)
end

-- ---- the network ----

local ResNet = nn.Module:extend("ResNet")
M.ResNet = ResNet

local DEFAULTS = { num_classes = 1000, zero_init_residual = false, groups = 1, width_per_group = 64 }

-- ResNet(block, layers, opts): block BasicBlock or Bottleneck, layers the
-- number of blocks in each of the four stages.
function ResNet:init(block, layers, opts)
  local o = options.read("ResNet", opts, DEFAULTS, options.factory_keys)
  if block ~= BasicBlock and block ~= Bottleneck then
    raise("ResNet: block must be lt.models.BasicBlock or lt.models.Bottleneck")
  end
  if type(layers) ~= "table" or #layers ~= 4 then
    raise("ResNet: layers must be a table of 4 block counts, got " .. tostring(layers))
  end
  local factory = options.factory(o)
  self.inplanes = 64
  self.groups = options.integer("ResNet", "groups", o.groups, 1)
  self.base_width = options.integer("ResNet", "width_per_group", o.width_per_group, 1)
  local num_classes = options.integer("ResNet", "num_classes", o.num_classes, 1)

  self.conv1 = nn.Conv2d(3, self.inplanes, 7, { stride = 2, padding = 3, bias = false, dtype = factory.dtype,
    device = factory.device })
  self.bn1 = batch_norm(self.inplanes, factory)
  self.relu = nn.ReLU { inplace = true }
  self.maxpool = nn.MaxPool2d(3, { stride = 2, padding = 1 })
  self.layer1 = self:_make_layer(block, 64, layers[1], 1, factory)
  self.layer2 = self:_make_layer(block, 128, layers[2], 2, factory)
  self.layer3 = self:_make_layer(block, 256, layers[3], 2, factory)
  self.layer4 = self:_make_layer(block, 512, layers[4], 2, factory)
  self.avgpool = nn.AdaptiveAvgPool2d({ 1, 1 })
  self.fc = nn.Linear(512 * block.expansion, num_classes, factory)

  -- torchvision's initialisation: He (fan_out) for convolutions, BatchNorm
  -- scale 1 and shift 0 (their defaults already), fc left at nn.Linear's.
  for _, m in ipairs(self:modules()) do
    if getmetatable(m).__class == nn.Conv2d then
      init.kaiming_normal_(m.weight, { mode = "fan_out", nonlinearity = "relu" })
    end
  end
  -- Each residual branch starts as zero, so each block starts as the
  -- identity (Goyal et al., 2017).
  if o.zero_init_residual then
    for _, m in ipairs(self:modules()) do
      local cls = getmetatable(m).__class
      if cls == Bottleneck then
        init.zeros_(m.bn3.weight)
      elseif cls == BasicBlock then
        init.zeros_(m.bn2.weight)
      end
    end
  end
end

-- One stage: `blocks` blocks of `planes`, the first with the stride and,
-- where the shape changes, a projection of its input (downsample).
function ResNet:_make_layer(block, planes, blocks, stride, factory)
  local downsample
  if stride ~= 1 or self.inplanes ~= planes * block.expansion then
    downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride, factory),
      batch_norm(planes * block.expansion, factory))
  end
  local list = { block(self.inplanes, planes, stride, downsample, self.groups, self.base_width, factory) }
  self.inplanes = planes * block.expansion
  for i = 2, blocks do
    list[i] = block(self.inplanes, planes, 1, nil, self.groups, self.base_width, factory)
  end
  return nn.Sequential(list)
end

function ResNet:forward(x)
  local y = self.conv1(x)
  y = step(self.bn1, y)
  y = self.relu(y)
  y = step(self.maxpool, y)
  y = step(self.layer1, y)
  y = step(self.layer2, y)
  y = step(self.layer3, y)
  y = step(self.layer4, y)
  y = step(self.avgpool, y)
  local flat = y:flatten(2)
  y:free()
  return step(self.fc, flat)
end

-- ---- torchvision's configurations ----

-- Options with the variant's fixed ones set; a user's value for those is
-- refused rather than silently overridden.
local function with(name, opts, fixed)
  local o = {}
  for k, v in pairs(opts or {}) do
    if fixed[k] ~= nil then raise(string.format("%s: option '%s' is fixed by this model", name, k)) end
    o[k] = v
  end
  for k, v in pairs(fixed) do o[k] = v end
  return o
end

function M.resnet18(opts) return ResNet(BasicBlock, { 2, 2, 2, 2 }, opts) end
function M.resnet34(opts) return ResNet(BasicBlock, { 3, 4, 6, 3 }, opts) end
function M.resnet50(opts) return ResNet(Bottleneck, { 3, 4, 6, 3 }, opts) end
function M.resnet101(opts) return ResNet(Bottleneck, { 3, 4, 23, 3 }, opts) end
function M.resnet152(opts) return ResNet(Bottleneck, { 3, 8, 36, 3 }, opts) end

function M.resnext50_32x4d(opts)
  return ResNet(Bottleneck, { 3, 4, 6, 3 }, with("resnext50_32x4d", opts, { groups = 32, width_per_group = 4 }))
end

function M.wide_resnet50_2(opts)
  return ResNet(Bottleneck, { 3, 4, 6, 3 }, with("wide_resnet50_2", opts, { width_per_group = 128 }))
end

return M
