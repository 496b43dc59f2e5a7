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

-- nn.parallel (DistributedDataParallel) loads on first use, as lt.distributed does;
-- nn.functional too, so that the module system does not depend on it being loadable.
return require "lt.namespace" (nn, "lt.nn", { parallel = "lt.nn.parallel", functional = "lt.nn.functional" })
