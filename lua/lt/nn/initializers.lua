-- lt.nn.init: in-place weight initialisation as torch.nn.init. Each fills
-- through a detached alias (so that autograd never records the fill, as
-- PyTorch's no_grad) and returns the tensor. (The file is not named init.lua:
-- that name is the lt.nn package itself.)
local core = require "lt.core"
local raise = require "lt.user_error"
local options_reader = require "lt.nn.options"

local init = {}

local function check_tensor(fn, t)
  if not core.is_tensor(t) then
    raise(string.format("%s: expected a tensor, got %s", fn, type(t)))
  end
end

-- fan_in = shape[2] * receptive field, fan_out = shape[1] * receptive field.
function init.calculate_fan_in_and_fan_out(t)
  check_tensor("calculate_fan_in_and_fan_out", t)
  local shape = t.shape
  if #shape < 2 then
    raise("calculate_fan_in_and_fan_out: fan in and fan out can not be computed for a tensor with "
      .. "fewer than 2 dimensions (got " .. #shape .. ")")
  end
  local receptive = 1
  for i = 3, #shape do receptive = receptive * shape[i] end
  return shape[2] * receptive, shape[1] * receptive
end

-- torch.nn.init.calculate_gain.
function init.calculate_gain(nonlinearity, param)
  local linear = { linear = true, conv1d = true, conv2d = true, conv3d = true, conv_transpose1d = true,
    conv_transpose2d = true, conv_transpose3d = true, sigmoid = true }
  if linear[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "selu" then return 3 / 4 end
  if nonlinearity == "leaky_relu" then
    local slope = param == nil and 0.01 or param
    if type(slope) ~= "number" then
      raise("calculate_gain: negative_slope " .. tostring(slope) .. " is not a valid number")
    end
    return math.sqrt(2 / (1 + slope * slope))
  end
  raise("calculate_gain: unsupported nonlinearity '" .. tostring(nonlinearity) .. "'")
end

-- PyTorch's default for Linear and Conv layers: kaiming_uniform_ with
-- a = sqrt(5), which gives the weight the bound 1/sqrt(fan_in), and the bias
-- (if any) uniform in the same bound.
function init.default_layer_(weight, bias)
  init.kaiming_uniform_(weight, { a = math.sqrt(5) })
  if bias ~= nil then
    local fan_in = init.calculate_fan_in_and_fan_out(weight)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    init.uniform_(bias, -bound, bound)
  end
end

function init.uniform_(t, a, b)
  check_tensor("uniform_", t)
  t:detach():uniform_(a or 0, b or 1)
  return t
end

function init.normal_(t, mean, std)
  check_tensor("normal_", t)
  t:detach():normal_(mean or 0, std or 1)
  return t
end

function init.constant_(t, value)
  check_tensor("constant_", t)
  t:detach():fill_(value)
  return t
end

function init.zeros_(t)
  check_tensor("zeros_", t)
  t:detach():zero_()
  return t
end

function init.ones_(t)
  check_tensor("ones_", t)
  t:detach():fill_(1)
  return t
end

local function kaiming_std(fn, t, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "a" and k ~= "mode" and k ~= "nonlinearity" then
      options_reader.unknown(fn, k, { a = true, mode = true, nonlinearity = true })
    end
  end
  local mode = opts.mode or "fan_in"
  if mode ~= "fan_in" and mode ~= "fan_out" then
    raise(string.format("%s: mode %s not supported, please use one of fan_in, fan_out", fn, tostring(mode)))
  end
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  local fan = mode == "fan_in" and fan_in or fan_out
  local gain = init.calculate_gain(opts.nonlinearity or "leaky_relu", opts.a or 0)
  if fan == 0 then return 0 end
  return gain / math.sqrt(fan)
end

-- kaiming_uniform_(t, {a=0, mode="fan_in", nonlinearity="leaky_relu"}):
-- uniform(-bound, bound) with bound = gain * sqrt(3 / fan).
function init.kaiming_uniform_(t, opts)
  check_tensor("kaiming_uniform_", t)
  local bound = math.sqrt(3) * kaiming_std("kaiming_uniform_", t, opts)
  return init.uniform_(t, -bound, bound)
end

function init.kaiming_normal_(t, opts)
  check_tensor("kaiming_normal_", t)
  return init.normal_(t, 0, kaiming_std("kaiming_normal_", t, opts))
end

-- xavier_uniform_(t, gain=1): uniform(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)).
function init.xavier_uniform_(t, gain)
  check_tensor("xavier_uniform_", t)
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  local a = (gain or 1) * math.sqrt(6 / (fan_in + fan_out))
  return init.uniform_(t, -a, a)
end

function init.xavier_normal_(t, gain)
  check_tensor("xavier_normal_", t)
  local fan_in, fan_out = init.calculate_fan_in_and_fan_out(t)
  return init.normal_(t, 0, (gain or 1) * math.sqrt(2 / (fan_in + fan_out)))
end

return init
