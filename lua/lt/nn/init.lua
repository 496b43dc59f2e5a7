-- lt.nn: modules (nn.Module and the layers), nn.Parameter, nn.init (weight
-- initialisation), nn.utils (gradient clipping) and nn.functional (loaded on first use, so that the module
-- system does not depend on it being loadable).
local Module = require "lt.nn.module"

local nn = {
  Module = Module,
  Parameter = Module.Parameter,
  is_parameter = Module.is_parameter,
  is_module = Module.is_module,
  init = require "lt.nn.initializers",
  utils = require "lt.nn.utils",
}

-- The layers that keep no reference to a tensor handle they take or return
-- (nn.Sequential releases what one of them made once the next has used it).
-- Set on these classes only: a subclass, which may keep its input, is not.
local KEEP_NO_HANDLES = {}
for _, name in ipairs { "Linear", "Identity", "Conv2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "ReLU",
  "GELU", "Tanh", "Sigmoid", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Dropout", "Flatten", "Embedding" } do
  KEEP_NO_HANDLES[name] = true
end

-- A family's classes into nn (lua/lt/nn/<family>.lua), marked as above.
local function add_family(family)
  local classes = require("lt.nn." .. family)
  for name, cls in pairs(classes) do
    if KEEP_NO_HANDLES[name] then Module.keeps_no_handles(cls) end
    rawset(nn, name, cls)
  end
  return classes
end

for _, family in ipairs { "linear", "norm", "activation", "dropout", "flatten", "container", "loss" } do
  add_family(family)
end

-- The families a script may not use load with the first of their classes it names: every
-- module loaded at start-up is Lua heap that each full collection walks (namespace_spec
-- checks that these lists are the families' classes). nn.parallel
-- (DistributedDataParallel) loads on first use, as lt.distributed does; nn.functional too,
-- so that the module system does not depend on it being loadable.
local lazy = { parallel = "lt.nn.parallel", functional = "lt.nn.functional" }
for family, names in pairs {
  conv = { "Conv2d" },
  pooling = { "AdaptiveAvgPool2d", "AvgPool2d", "MaxPool2d" },
  sparse = { "Embedding" },
  attention = { "MultiheadAttention" },
  checkpoint = { "checkpoint_sequential" },
} do
  for _, name in ipairs(names) do lazy[name] = function() return add_family(family)[name] end end
end

return require "lt.namespace" (nn, "lt.nn", lazy)
