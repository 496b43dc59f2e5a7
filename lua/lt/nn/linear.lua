-- nn.Linear(in_features, out_features, {bias=true, dtype=, device=}):
-- y = x W^T + b, W [out, in]; and nn.Identity.
local core = require "lt.core"
local Module = require "lt.nn.module"
local init = require "lt.nn.initializers"
local options = require "lt.nn.options"

local Parameter = Module.Parameter

local function F() return require "lt.nn.functional" end

local Linear = Module:extend("Linear")

function Linear:init(in_features, out_features, opts)
  local o = options.read("Linear", opts, { bias = true }, options.factory_keys)
  self.in_features = options.integer("Linear", "in_features", in_features, 0)
  self.out_features = options.integer("Linear", "out_features", out_features, 0)
  local factory = options.factory(o)
  self.weight = Parameter(options.tensor("Linear", core.empty, { self.out_features, self.in_features }, factory))
  if o.bias then
    self.bias = Parameter(options.tensor("Linear", core.empty, { self.out_features }, factory))
  else
    self:register_parameter("bias", nil)
  end
  self:reset_parameters()
end

-- PyTorch's default initialisation (init.default_layer_).
function Linear:reset_parameters()
  init.default_layer_(self.weight, self.bias)
end

function Linear:forward(x)
  return F().linear(x, self.weight, self.bias)
end

function Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s", self.in_features, self.out_features,
    tostring(self.bias ~= nil))
end

local Identity = Module:extend("Identity")

-- Accepts and ignores constructor arguments, as PyTorch's.
function Identity:init() end

function Identity:forward(x)
  return x
end

return { Linear = Linear, Identity = Identity }
