-- Activation modules: nn.ReLU({inplace=}), nn.GELU({approximate="none"|"tanh"}),
-- nn.Tanh(), nn.Sigmoid(). Their forward is the functional op.
local Module = require "lt.nn.module"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local functional
local function F()
  functional = functional or require "lt.nn.functional"
  return functional
end

-- The fields a module's forward hands its op (options.cached).
local GELU_OPTIONS = { "approximate" }

local ReLU = Module:extend("ReLU")

function ReLU:init(opts)
  self.inplace = options.read("ReLU", opts, { inplace = false }).inplace
end

function ReLU:forward(x)
  return F()._relu(x, self.inplace)
end

function ReLU:extra_repr()
  return self.inplace and "inplace=true" or ""
end

local GELU = Module:extend("GELU")

function GELU:init(opts)
  local approximate = options.read("GELU", opts, { approximate = "none" }).approximate
  if approximate ~= "none" and approximate ~= "tanh" then
    raise("GELU: approximate must be 'none' or 'tanh', got " .. tostring(approximate))
  end
  self.approximate = approximate
end

function GELU:forward(x)
  return F().gelu(x, options.cached(self, GELU_OPTIONS))
end

function GELU:extra_repr()
  return "approximate='" .. self.approximate .. "'"
end

local Tanh = Module:extend("Tanh")

function Tanh:forward(x)
  return F().tanh(x)
end

local Sigmoid = Module:extend("Sigmoid")

function Sigmoid:forward(x)
  return F().sigmoid(x)
end

return { ReLU = ReLU, GELU = GELU, Tanh = Tanh, Sigmoid = Sigmoid }
