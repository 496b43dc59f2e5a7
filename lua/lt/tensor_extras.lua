-- Tensor methods and lt functions written in Lua, on the engine's own:
-- t:new_zeros / new_ones / new_empty / new_full (t's dtype and device unless
-- the options say otherwise), t:clamp{min =, max =} beside t:clamp(lo, hi),
-- and lt.finfo / lt.iinfo (PyTorch's figures of each dtype).
local core = require "lt.core"
local raise = require "lt.user_error"
local options_reader = require "lt.nn.options"

local Tensor = core.Tensor
local is_tensor = core.is_tensor

-- The sizes and the options table of a (sizes..., opts) or ({sizes}, opts)
-- call: the last argument is the options when it is a table that is not a
-- list of sizes.
local function split_options(...)
  local n = select("#", ...)
  local last = n > 0 and select(n, ...) or nil
  if type(last) == "table" and not is_tensor(last) and last[1] == nil and next(last) ~= nil then
    return table.pack(select(1, ...)), n - 1, last
  end
  return table.pack(...), n, nil
end

-- t's dtype and device, then what opts sets.
local function like(op, t, opts)
  if opts ~= nil and type(opts) ~= "table" then
    raise(("%s: expected an options table, got %s"):format(op, type(opts)))
  end
  local o = { dtype = t.dtype, device = t.device }
  for k, v in pairs(opts or {}) do o[k] = v end
  return o
end

for name, make in pairs { new_zeros = core.zeros, new_ones = core.ones, new_empty = core.empty } do
  Tensor[name] = function(t, ...)
    if not is_tensor(t) then raise(("%s: call it as t:%s(...)"):format(name, name)) end
    local args, n, opts = split_options(...)
    args[n + 1] = like(name, t, opts)
    return make(table.unpack(args, 1, n + 1))
  end
end

-- t:new_full(sizes, value, opts), as PyTorch's x.new_full(size, fill_value).
function Tensor.new_full(t, sizes, value, opts)
  if not is_tensor(t) then raise("new_full: call it as t:new_full(sizes, value)") end
  return core.full(sizes, value, like("new_full", t, opts))
end

-- t:clamp(lo, hi) as before; t:clamp{min = lo, max = hi} as PyTorch's keywords.
local function with_bounds(name, clamp)
  return function(t, lo, hi, ...)
    if type(lo) == "table" and not is_tensor(lo) and hi == nil then
      for key in pairs(lo) do
        if key ~= "min" and key ~= "max" then options_reader.unknown(name, key, { min = true, max = true }) end
      end
      return clamp(t, lo.min, lo.max)
    end
    return clamp(t, lo, hi, ...)
  end
end
Tensor.clamp = with_bounds("clamp", Tensor.clamp)
Tensor.clamp_ = with_bounds("clamp_", Tensor.clamp_)

-- PyTorch's torch.finfo / torch.iinfo figures.
local FINFO = {
  float32 = { bits = 32, eps = 1.1920928955078125e-07, max = 3.4028234663852886e+38,
              tiny = 1.1754943508222875e-38, resolution = 1e-06 },
  float64 = { bits = 64, eps = 2.220446049250313e-16, max = 1.7976931348623157e+308,
              tiny = 2.2250738585072014e-308, resolution = 1e-15 },
  float16 = { bits = 16, eps = 0.0009765625, max = 65504.0, tiny = 6.103515625e-05, resolution = 0.001 },
  bfloat16 = { bits = 16, eps = 0.0078125, max = 3.3895313892515355e+38, tiny = 1.1754943508222875e-38,
               resolution = 0.01 },
}
local IINFO = {
  int64 = { bits = 64, min = math.mininteger, max = math.maxinteger },
  int32 = { bits = 32, min = -2147483648, max = 2147483647 },
  uint8 = { bits = 8, min = 0, max = 255 },
}
local ALIASES = { float = "float32", double = "float64", half = "float16", long = "int64", int = "int32" }

local function dtype_of(op, d)
  if d == nil then return "float32" end
  if is_tensor(d) then return d.dtype end
  if type(d) ~= "string" then raise(("%s: expected a dtype name or a tensor, got %s"):format(op, type(d))) end
  return ALIASES[d] or d
end

local function info(op, table_of, kind)
  return function(d)
    local name = dtype_of(op, d)
    local figures = table_of[name]
    if figures == nil then
      raise(("%s: %s is not a%s dtype"):format(op, name, kind))
    end
    local out = { dtype = name }
    for k, v in pairs(figures) do out[k] = v end
    out.min = out.min or -out.max
    out.smallest_normal = out.tiny
    return out
  end
end

return {
  finfo = info("finfo", FINFO, " floating"),
  iinfo = info("iinfo", IINFO, "n integer"),
}
