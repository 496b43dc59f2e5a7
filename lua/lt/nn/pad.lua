-- Padding: F.pad (the C function lt.core._pad: one output tensor, its own
-- backward) and the string paddings of convolutions, padding="same" and
-- padding="valid", resolved as PyTorch's _convolution_mode does so that
-- outputs and gradients match it.
local core = require "lt.core"
local raise = require "lt.user_error"

local pad = { pad = core._pad }

-- The string paddings: returns s, or raises naming the module or op.
function pad.check_mode(name, s)
  if s ~= "same" and s ~= "valid" then
    raise(string.format("%s: padding must be a number, a pair, 'same' or 'valid', got '%s'", name, s))
  end
  return s
end

-- PyTorch checks this at construction (Conv2d) or call (F.conv2d): an output
-- as large as the input needs stride 1.
function pad.check_same_stride(name, stride)
  if stride[1] ~= 1 or stride[2] ~= 1 then
    raise(string.format("%s: padding='same' is not supported for strided convolutions (got stride (%d, %d))",
      name, stride[1], stride[2]))
  end
end

-- padding="same" for a kernel of kernel[1] x kernel[2] taps spaced by
-- dilation: each spatial dim needs dilation * (k - 1) in all, total // 2
-- before and the rest after. Returns the symmetric part {h, w} for the conv
-- op and, when a total is odd, the F.pad list that adds its extra element
-- after (bottom, right), else nil: PyTorch's split, so the numbers match.
function pad.same(kernel, dilation)
  local th, tw = dilation[1] * (kernel[1] - 1), dilation[2] * (kernel[2] - 1)
  local h, w = th // 2, tw // 2
  local eh, ew = th - 2 * h, tw - 2 * w
  return { h, w }, (eh > 0 or ew > 0) and { 0, ew, 0, eh } or nil
end

local function integer(v)
  return type(v) == "number" and math.tointeger(v) or nil
end

-- An integer or a table of two as {a, b}; nil for anything else, which the
-- conv op refuses with a message naming it.
local function pair(v)
  if type(v) == "table" then
    local a, b = integer(v[1]), integer(v[2])
    return #v == 2 and a and b and { a, b } or nil
  end
  local n = integer(v)
  return n and { n, n }
end

-- F.conv2d with a string padding: conv2d is the C op, opts has the string.
function pad.conv2d(conv2d, x, w, b, opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.padding = 0
  if pad.check_mode("conv2d", opts.padding) == "valid" then return conv2d(x, w, b, o) end
  local stride, dilation = pair(opts.stride or 1), pair(opts.dilation or 1)
  -- A bad weight, stride or dilation: the op's own message names it.
  if not (stride and dilation and core.is_tensor(w) and w:dim() == 4) then return conv2d(x, w, b, o) end
  pad.check_same_stride("conv2d", stride)
  local extra
  o.padding, extra = pad.same({ w:size(3), w:size(4) }, dilation)
  -- Only a batch [N, C, H, W] is padded: the op refuses any other input
  -- with its own shape.
  if extra and core.is_tensor(x) and x:dim() == 4 then
    local padded = core._pad(x, extra)
    local ok, y = pcall(conv2d, padded, w, b, o)
    -- An input-sized copy: its bytes go back now unless the graph saved it.
    padded:free()
    if ok then return y end
    -- Refused: the message would show the padded shape. The input as given
    -- differs only in H and W, so it is refused too, naming its own shape.
    conv2d(x, w, b, o)
    raise((tostring(y):gsub("^[^\n:]*:%d+: ", "")))
  end
  return conv2d(x, w, b, o)
end

return pad
