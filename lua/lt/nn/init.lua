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
  parallel = require "lt.nn.parallel", -- DistributedDataParallel (lt.distributed loads at its first use)
}

for _, family in ipairs { "linear", "conv", "norm", "activation", "pooling", "dropout", "flatten",
  "container", "sparse", "loss", "checkpoint", "attention" } do
  for name, cls in pairs(require("lt.nn." .. family)) do nn[name] = cls end
end

-- The layers that keep no reference to a tensor handle they take or return
-- (nn.Sequential releases what one of them made once the next has used it).
-- Set on these classes only: a subclass, which may keep its input, is not.
for _, name in ipairs { "Linear", "Identity", "Conv2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "ReLU",
  "GELU", "Tanh", "Sigmoid", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Dropout", "Flatten", "Embedding" } do
  if nn[name] then Module.keeps_no_handles(nn[name]) end
end

return setmetatable(nn, {
  __index = function(t, key)
    if key == "functional" then
      local F = require "lt.nn.functional"
      rawset(t, key, F)
      return F
    end
  end,
})
