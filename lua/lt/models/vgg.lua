-- VGG as torchvision builds it (torchvision.models.vgg), names included, so
-- a torchvision checkpoint loads strictly:
--
--   features    nn.Sequential: per config entry a Conv2d 3x3 (padding 1),
--               [BatchNorm2d], ReLU, or "M" a MaxPool2d 2 ("features.0.weight")
--   avgpool     nn.AdaptiveAvgPool2d({7, 7})
--   classifier  Linear(512*7*7, 4096) ReLU Dropout Linear(4096, 4096) ReLU
--               Dropout Linear(4096, num_classes)   ("classifier.6.bias")
--
-- vgg11 / vgg13 / vgg16 / vgg19 are configs "A" / "B" / "D" / "E", each with
-- {batch_norm=false, num_classes=1000, dropout=0.5, init_weights=true} (and
-- the _bn names with batch_norm=true). vgg(cfg, opts) builds any config, a
-- name or a list such as {64, "M", 128, "M"}, and takes three options of
-- lt's own that make a VGG-style small enough to train on a laptop (the
-- defaults are torchvision's): in_channels=3, pool=7 (avgpool's output
-- size) and hidden=4096 (the classifier's width).
local nn = require "lt.nn"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local init = nn.init

local M = {}

M.cfgs = {
  A = { 64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M" },
  B = { 64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M" },
  D = { 64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M" },
  E = { 64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M" },
}

-- torchvision's make_layers: the feature extractor of a config. Returns it
-- and its number of output channels.
function M.make_layers(cfg, batch_norm, in_channels, factory)
  factory = factory or {}
  local layers = {}
  local channels = in_channels or 3
  for i, v in ipairs(cfg) do
    if v == "M" then
      layers[#layers + 1] = nn.MaxPool2d(2, { stride = 2 })
    else
      local width = options.integer("vgg", "config entry " .. i, v, 1)
      layers[#layers + 1] = nn.Conv2d(channels, width, 3, { padding = 1, dtype = factory.dtype,
        device = factory.device })
      if batch_norm then layers[#layers + 1] = nn.BatchNorm2d(width, factory) end
      layers[#layers + 1] = nn.ReLU { inplace = true }
      channels = width
    end
  end
  return nn.Sequential(layers), channels
end

local VGG = nn.Module:extend("VGG")
M.VGG = VGG

local DEFAULTS = { batch_norm = false, num_classes = 1000, dropout = 0.5, init_weights = true, in_channels = 3,
  pool = 7, hidden = 4096 }

function VGG:init(cfg, opts)
  local o = options.read("vgg", opts, DEFAULTS, options.factory_keys)
  if type(cfg) == "string" then
    local named = M.cfgs[cfg]
    if named == nil then raise("vgg: unknown config '" .. cfg .. "' (expected A, B, D, E or a list)") end
    cfg = named
  end
  if type(cfg) ~= "table" or #cfg == 0 then raise("vgg: expected a config name or a non-empty list") end
  local factory = options.factory(o)
  local pool = options.integer("vgg", "pool", o.pool, 1)
  local hidden = options.integer("vgg", "hidden", o.hidden, 1)
  local features, channels = M.make_layers(cfg, o.batch_norm, options.integer("vgg", "in_channels",
    o.in_channels, 1), factory)
  self.features = features
  self.avgpool = nn.AdaptiveAvgPool2d({ pool, pool })
  self.classifier = nn.Sequential(
    nn.Linear(channels * pool * pool, hidden, factory), nn.ReLU { inplace = true }, nn.Dropout(o.dropout),
    nn.Linear(hidden, hidden, factory), nn.ReLU { inplace = true }, nn.Dropout(o.dropout),
    nn.Linear(hidden, options.integer("vgg", "num_classes", o.num_classes, 1), factory))
  if o.init_weights then
    -- torchvision's: He (fan_out) convolutions, N(0, 0.01) linears, zero
    -- biases, BatchNorm at 1 and 0 (its defaults already).
    for _, m in ipairs(self:modules()) do
      local cls = getmetatable(m).__class
      if cls == nn.Conv2d then
        init.kaiming_normal_(m.weight, { mode = "fan_out", nonlinearity = "relu" })
        init.zeros_(m.bias)
      elseif cls == nn.Linear then
        init.normal_(m.weight, 0, 0.01)
        init.zeros_(m.bias)
      end
    end
  end
end

function VGG:forward(x)
  local y = self.features(x)
  local pooled = self.avgpool(y)
  if not rawequal(y, x) then y:free() end
  local flat = pooled:flatten(2)
  pooled:free()
  local out = self.classifier(flat)
  flat:free()
  return out
end

function M.vgg(cfg, opts) return VGG(cfg, opts) end

-- vgg11(opts) .. vgg19_bn(opts): torchvision's names.
for name, cfg in pairs { vgg11 = "A", vgg13 = "B", vgg16 = "D", vgg19 = "E" } do
  M[name] = function(opts) return VGG(cfg, opts) end
  M[name .. "_bn"] = function(opts)
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    if o.batch_norm == false then raise(name .. "_bn: batch_norm is always true") end
    o.batch_norm = true
    return VGG(cfg, o)
  end
end

return M
