-- nn.MaxPool2d(kernel_size, {stride=kernel_size, padding=0, dilation=1,
-- ceil_mode=false}) and nn.AvgPool2d(kernel_size, {stride=kernel_size,
-- padding=0, ceil_mode=false, count_include_pad=true}). Sizes are kept as
-- given (an integer or a table {h, w}) and passed on to the functional op.
-- nn.AdaptiveAvgPool2d(output_size): PyTorch's, output_size an integer or
-- {h, w} (false keeps that input size), F.adaptive_avg_pool2d's windows.
local core = require "lt.core"
local Module = require "lt.nn.module"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local functional
local function F()
  functional = functional or require "lt.nn.functional"
  return functional
end

local function size_text(v)
  return type(v) == "table" and options.tuple(v) or tostring(v)
end

-- An integer or a pair, kept in the form given; the values are the engine's
-- to check (check_pool below).
local function check_size(name, what, v)
  options.pair(name, what, v)
  return v
end

-- The engine's checks of the options, as F.max_pool2d / F.avg_pool2d make
-- them, but when the module is made.
local function check_pool(name, is_max, kernel_size, opts)
  core._functional.check_pool2d(name, is_max, kernel_size, opts)
end

-- The fields each forward hands its op (options.cached: one table, not one a call).
local MAX_POOL_OPTIONS = { "stride", "padding", "dilation", "ceil_mode" }
local AVG_POOL_OPTIONS = { "stride", "padding", "ceil_mode", "count_include_pad" }

local MaxPool2d = Module:extend("MaxPool2d")

function MaxPool2d:init(kernel_size, opts)
  local o = options.read("MaxPool2d", opts, { padding = 0, dilation = 1, ceil_mode = false }, { stride = true })
  self.kernel_size = check_size("MaxPool2d", "kernel_size", kernel_size)
  self.stride = check_size("MaxPool2d", "stride", o.stride or kernel_size)
  self.padding = check_size("MaxPool2d", "padding", o.padding)
  self.dilation = check_size("MaxPool2d", "dilation", o.dilation)
  self.ceil_mode = o.ceil_mode
  check_pool("MaxPool2d", true, self.kernel_size, { stride = self.stride, padding = self.padding,
    dilation = self.dilation })
end

function MaxPool2d:forward(x)
  return F().max_pool2d(x, self.kernel_size, options.cached(self, MAX_POOL_OPTIONS))
end

function MaxPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s",
    size_text(self.kernel_size), size_text(self.stride), size_text(self.padding), size_text(self.dilation),
    tostring(self.ceil_mode))
end

local AvgPool2d = Module:extend("AvgPool2d")

function AvgPool2d:init(kernel_size, opts)
  local o = options.read("AvgPool2d", opts, { padding = 0, ceil_mode = false, count_include_pad = true },
    { stride = true })
  self.kernel_size = check_size("AvgPool2d", "kernel_size", kernel_size)
  self.stride = check_size("AvgPool2d", "stride", o.stride or kernel_size)
  self.padding = check_size("AvgPool2d", "padding", o.padding)
  check_pool("AvgPool2d", false, self.kernel_size, { stride = self.stride, padding = self.padding })
  self.ceil_mode = o.ceil_mode
  self.count_include_pad = o.count_include_pad
end

function AvgPool2d:forward(x)
  return F().avg_pool2d(x, self.kernel_size, options.cached(self, AVG_POOL_OPTIONS))
end

function AvgPool2d:extra_repr()
  return string.format("kernel_size=%s, stride=%s, padding=%s", size_text(self.kernel_size),
    size_text(self.stride), size_text(self.padding))
end

local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")

function AdaptiveAvgPool2d:init(output_size)
  -- Checked now, when the module is made, as the op checks it per call.
  local sizes = type(output_size) == "table" and output_size or { output_size }
  if type(output_size) == "table" and #output_size ~= 2 then
    raise(string.format("AdaptiveAvgPool2d: output_size must be an integer or a table of 2, got %d values",
      #output_size))
  end
  for _, v in ipairs(sizes) do
    if v ~= false then options.integer("AdaptiveAvgPool2d", "output_size", v, 1) end
  end
  self.output_size = output_size
end

function AdaptiveAvgPool2d:forward(x)
  return F().adaptive_avg_pool2d(x, self.output_size)
end

-- PyTorch prints output_size=(1, 1), or None for a size kept.
function AdaptiveAvgPool2d:extra_repr()
  local v = self.output_size
  if type(v) ~= "table" then return "output_size=" .. tostring(v) end
  local function one(n) return n == false and "None" or tostring(n) end
  return string.format("output_size=(%s, %s)", one(v[1]), one(v[2]))
end

return { MaxPool2d = MaxPool2d, AvgPool2d = AvgPool2d, AdaptiveAvgPool2d = AdaptiveAvgPool2d }
