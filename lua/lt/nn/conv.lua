-- nn.Conv2d(in_channels, out_channels, kernel_size, {stride=1, padding=0,
-- dilation=1, groups=1, bias=true, dtype=, device=}); sizes are an integer
-- or a table {h, w}; padding may also be "valid" (none) or "same" (output as
-- large as the input, stride 1 only; see lt.nn.pad). Weight [out, in /
-- groups, kh, kw].
local core = require "lt.core"
local Module = require "lt.nn.module"
local init = require "lt.nn.initializers"
local options = require "lt.nn.options"
local pad = require "lt.nn.pad"
local raise = require "lt.user_error"

local Parameter = Module.Parameter

local functional
local function F()
  functional = functional or require "lt.nn.functional"
  return functional
end

local Conv2d = Module:extend("Conv2d")

function Conv2d:init(in_channels, out_channels, kernel_size, opts)
  local name = "Conv2d"
  local o = options.read(name, opts, { stride = 1, padding = 0, dilation = 1, groups = 1, bias = true },
    options.factory_keys)
  self.in_channels = options.integer(name, "in_channels", in_channels, 1)
  self.out_channels = options.integer(name, "out_channels", out_channels, 1)
  self.kernel_size = options.pair(name, "kernel_size", kernel_size, 1) -- the weight's shape: ours to check
  -- Stride, dilation, padding and groups are checked once, by the engine, as
  -- F.conv2d would check them, but now, when the module is made.
  self.stride = options.pair(name, "stride", o.stride)
  self.dilation = options.pair(name, "dilation", o.dilation)
  self.groups = options.integer(name, "groups", o.groups)
  local numeric_padding = 0
  if type(o.padding) == "string" then
    -- Kept as the string, as PyTorch keeps it; F.conv2d resolves it.
    self.padding = pad.check_mode(name, o.padding)
  else
    self.padding = options.pair(name, "padding", o.padding)
    numeric_padding = self.padding
  end
  core._functional.check_conv2d(name, { stride = self.stride, dilation = self.dilation, groups = self.groups,
    padding = numeric_padding })
  if self.padding == "same" then pad.check_same_stride(name, self.stride) end
  if self.in_channels % self.groups ~= 0 then
    raise(string.format("Conv2d: in_channels must be divisible by groups (got in_channels %d, groups %d)",
      self.in_channels, self.groups))
  end
  if self.out_channels % self.groups ~= 0 then
    raise(string.format("Conv2d: out_channels must be divisible by groups (got out_channels %d, groups %d)",
      self.out_channels, self.groups))
  end
  local factory = options.factory(o)
  self.weight = Parameter(options.tensor(name, core.empty, { self.out_channels,
    self.in_channels // self.groups, self.kernel_size[1], self.kernel_size[2] }, factory))
  if o.bias then
    self.bias = Parameter(options.tensor(name, core.empty, { self.out_channels }, factory))
  else
    self:register_parameter("bias", nil)
  end
  self:reset_parameters()
end

-- PyTorch's default initialisation (init.default_layer_).
function Conv2d:reset_parameters()
  init.default_layer_(self.weight, self.bias)
end

-- The fields forward hands F.conv2d (options.cached: one table, not one a call).
local CONV_OPTIONS = { "stride", "padding", "dilation", "groups" }

function Conv2d:forward(x)
  return F().conv2d(x, self.weight, self.bias, options.cached(self, CONV_OPTIONS))
end

local function is_pair(t, a, b) return t[1] == a and t[2] == b end

function Conv2d:extra_repr()
  local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
    options.tuple(self.kernel_size), options.tuple(self.stride))
  if type(self.padding) == "string" then
    s = s .. ", padding=" .. self.padding
  elseif not is_pair(self.padding, 0, 0) then
    s = s .. ", padding=" .. options.tuple(self.padding)
  end
  if not is_pair(self.dilation, 1, 1) then s = s .. ", dilation=" .. options.tuple(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if self.bias == nil then s = s .. ", bias=false" end
  return s
end

return { Conv2d = Conv2d }
