-- lt.nn.functional (F): the nn ops as functions, with PyTorch's signatures
-- adapted to Lua: keyword arguments are an options table, dims and class
-- labels count from 1. Most entries are the C functions themselves
-- (lt.core._functional), so a training step pays no Lua wrapper per op.
--
--   F.linear(x, w, b)                 F.conv2d(x, w, b, {stride=, padding=, dilation=, groups=})
--     padding: an integer, a pair {h, w}, "valid" (0) or "same" (output as large as the input; stride 1)
--   F.pad(x, {left, right, top, bottom, ...}, {mode="constant", value=0})  (pairs from the last dim; negative crops)
--   F.max_pool2d(x, k, {stride=, padding=, dilation=, ceil_mode=, return_indices=})
--   F.avg_pool2d(x, k, {stride=, padding=, ceil_mode=, count_include_pad=, divisor_override=})
--   F.adaptive_avg_pool2d(x, output_size)   output_size: an integer or {h, w} (false keeps that input size)
--   F.batch_norm(x, running_mean, running_var, w, b, {training=false, momentum=0.1, eps=1e-5})
--   F.layer_norm(x, normalized_shape, w, b, {eps=1e-5})
--   F.relu(x, {inplace=})  F.gelu(x, {approximate="none"|"tanh"})  F.tanh(x)  F.sigmoid(x)
--   F.softmax(x, d)  F.log_softmax(x, d)  F.flatten(x, s, e)
--   F.dropout(x, p=0.5, training=true, inplace=false)  F.dropout(x, p, {training=, inplace=})
--   F.embedding(indices, w, {padding_idx=})
--   F.scaled_dot_product_attention(q, k, v, {attn_mask=, dropout_p=0, is_causal=false, scale=1/sqrt(E)})
--     q [..., L, E], k [..., S, E], v [..., S, Ev]; blockwise, never an L x S matrix (lt/attention.h)
--   F.cross_entropy(logits, target, {reduction="mean", ignore_index=-100, label_smoothing=0, weight=})
--     target: 1-based class labels (int64), or class probabilities (floating, logits' shape)
--   F.nll_loss(log_probs, target, {reduction=, ignore_index=, weight=})
--   F.mse_loss(a, b, {reduction="mean"})
local core = require "lt.core"
local raise = require "lt.user_error"
local shapes = require "lt.shapes"
local options = require "lt.nn.options"

local F = {}
for name, fn in pairs(core._functional) do F[name] = fn end

-- conv2d: the C op, with padding "same" or "valid" resolved first
-- (lt.nn.pad); the C op places its errors at the script's line itself.
local c_conv2d = core._functional.conv2d
local padding = require "lt.nn.pad"
function F.conv2d(x, w, b, opts)
  if type(opts) == "table" and type(opts.padding) == "string" then
    return padding.conv2d(c_conv2d, x, w, b, opts)
  end
  return c_conv2d(x, w, b, opts)
end

F.pad = padding.pad

local function check_tensor(op, x)
  if not core.is_tensor(x) then raise(string.format("%s: expected a tensor, got %s", op, type(x))) end
end

-- relu with its option already read: nn.ReLU's forward calls it with the flag
-- it read once, when made.
function F._relu(x, inplace)
  check_tensor("relu", x)
  if inplace then return x:relu_() end
  return x:relu()
end

function F.relu(x, opts)
  return F._relu(x, opts ~= nil and options.read("relu", opts, { inplace = false }).inplace)
end

function F.tanh(x)
  check_tensor("tanh", x)
  return x:tanh()
end

function F.sigmoid(x)
  check_tensor("sigmoid", x)
  return x:sigmoid()
end

-- ---- cross_entropy ----

local FLOATING = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
local REDUCTIONS = { none = true, mean = true, sum = true }
local CE_DEFAULTS = { reduction = "mean", ignore_index = -100, label_smoothing = 0 }

-- The options of the probability path, checked as the C path checks them.
local function soft_ce_options(opts)
  if opts == nil then return "mean", -100, 0, nil end
  if type(opts) ~= "table" then raise("cross_entropy: expected an options table, got " .. type(opts)) end
  for k in pairs(opts) do
    if CE_DEFAULTS[k] == nil and k ~= "weight" then options.unknown("cross_entropy", k, CE_DEFAULTS, { weight = true }) end
  end
  local reduction = opts.reduction or "mean"
  if not REDUCTIONS[reduction] then
    raise("cross_entropy: reduction must be 'none', 'mean' or 'sum', got " .. tostring(reduction))
  end
  local ignore_index = opts.ignore_index or -100
  if type(ignore_index) ~= "number" or ignore_index ~= math.floor(ignore_index) then
    raise("cross_entropy: ignore_index must be an integer, got " .. tostring(ignore_index))
  end
  local ls = opts.label_smoothing or 0
  if type(ls) ~= "number" or not (ls >= 0 and ls <= 1) then
    raise("cross_entropy: label_smoothing must be between 0 and 1, got " .. tostring(ls))
  end
  local weight = opts.weight
  if weight ~= nil and not core.is_tensor(weight) then
    raise("cross_entropy: weight must be a tensor of class weights, got " .. type(weight))
  end
  return reduction, ignore_index, ls, weight
end

-- PyTorch's cross_entropy with class probabilities: with p = target smoothed
-- as target * (1 - ls) + ls / C and w the class weights (1 without),
-- loss_n = -sum_c w_c p_nc log_softmax(input)_nc; "mean" divides the sum by
-- the number of samples (N times the spatial size), not by the weights.
-- Built from differentiable ops, so both input and target get gradients
-- and every backend runs it.
local function soft_cross_entropy(input, target, opts)
  if not core.is_tensor(input) then raise("cross_entropy: expected a tensor for input, got " .. type(input)) end
  local reduction, ignore_index, ls, weight = soft_ce_options(opts)
  if not FLOATING[input.dtype] then
    raise("cross_entropy: expected a floating point input, got " .. input.dtype)
  end
  local ndim = input:dim()
  if ndim == 0 then
    raise("cross_entropy: expected input with 1 or more dimensions [N, C, ...], got []")
  end
  if not shapes.equal(target.shape, input.shape) then
    raise(string.format("cross_entropy: probability target of shape %s must match input %s",
      shapes.text(target.shape), shapes.text(input.shape)))
  end
  if target.device ~= input.device then
    raise(string.format("cross_entropy: probability target is on %s but input is on %s", target.device, input.device))
  end
  -- PyTorch refuses any ignore_index that could be a class (>= 0 there);
  -- lt's classes start at 1.
  if ignore_index >= 1 then
    raise(string.format("cross_entropy: ignore_index is not supported for probability targets (got %s)",
      tostring(math.tointeger(ignore_index) or ignore_index)))
  end
  local cdim = ndim == 1 and 1 or 2
  local c = input:size(cdim)
  if weight ~= nil then
    if weight:dim() ~= 1 or weight:numel() ~= c then
      raise(string.format("cross_entropy: weight should have one value for each of the %d classes, got shape %s",
        c, shapes.text(weight.shape)))
    end
    if not FLOATING[weight.dtype] then
      raise("cross_entropy: expected a floating point weight, got " .. weight.dtype)
    end
    if weight.device ~= input.device then
      raise(string.format("cross_entropy: weight is on %s but input is on %s", weight.device, input.device))
    end
  end

  -- Each intermediate is freed at its last use: those the graph saves stay
  -- alive through it, the others (input-sized, most of them) go back now
  -- instead of when the collector comes.
  local p = target
  if ls > 0 then
    local scaled = target * (1 - ls)
    p = scaled + ls / c
    scaled:free()
  end
  local log_probs = F.log_softmax(input, cdim)
  local terms = log_probs * p
  log_probs:free()
  if not rawequal(p, target) then p:free() end
  if weight ~= nil then
    local w = weight
    if ndim > 1 then
      -- [1, C, 1, ...]: broadcast over the batch and spatial dims.
      local view = {}
      for d = 1, ndim do view[d] = 1 end
      view[2] = c
      w = weight:view(view)
    end
    local weighted = terms * w
    terms:free()
    if not rawequal(w, weight) then w:free() end
    terms = weighted
  end
  local sum = reduction == "none" and terms:sum(cdim) or terms:sum()
  terms:free()
  local total = -sum
  sum:free()
  if reduction ~= "mean" then return total end
  -- An empty batch gives 0 / 0, NaN, as PyTorch's.
  local mean = total / (input:numel() / c)
  total:free()
  return mean
end

local class_index_cross_entropy = F.cross_entropy

-- Floating targets are class probabilities; anything else goes straight to
-- the fused C op (class labels), checked there.
function F.cross_entropy(input, target, opts)
  if core.is_tensor(target) then
    if FLOATING[target.dtype] then return soft_cross_entropy(input, target, opts) end
    -- Labels have one dim fewer than the input: a target of the input's
    -- shape was meant as probabilities (PyTorch's rule is the shape).
    local ndim = target.ndim
    if ndim > 0 and core.is_tensor(input) and input.ndim == ndim and shapes.equal(target.shape, input.shape) then
      raise(string.format(
        "cross_entropy: a target of the input's shape %s holds class probabilities and must be floating point, got %s",
        shapes.text(input.shape), target.dtype))
    end
  end
  return class_index_cross_entropy(input, target, opts)
end

-- torch.flatten: from dim s (default 1) to dim e (default -1).
function F.flatten(x, s, e)
  check_tensor("flatten", x)
  return x:flatten(s or 1, e or -1)
end

-- ---- adaptive_avg_pool2d ----

-- The output size as {h, w} for an input of sizes h_in x w_in: an integer,
-- or a pair whose false entries (PyTorch's None) keep the input's size.
local function adaptive_size(output_size, h_in, w_in)
  local pair = type(output_size) == "table" and output_size or { output_size, output_size }
  if type(output_size) == "table" and #output_size ~= 2 then
    raise(string.format("adaptive_avg_pool2d: output_size must be an integer or a table of 2, got %d values",
      #output_size))
  end
  local out = {}
  for d = 1, 2 do -- not ipairs: a nil entry must be refused, not end the loop
    local v = pair[d]
    if v == false then
      out[d] = d == 1 and h_in or w_in
    else
      local n = type(v) == "number" and math.tointeger(v) or nil
      if n == nil or n < 1 then
        raise("adaptive_avg_pool2d: output_size must hold integers of at least 1 (or false), got "
          .. tostring(v))
      end
      out[d] = n
    end
  end
  return out
end

-- Mean over PyTorch's windows along dim d, concatenated along d: output
-- element i (0-based) of `out` averages input rows floor(i*n/out) up to
-- ceil((i+1)*n/out) - 1, so windows overlap when out does not divide n and
-- repeat when out > n. Built from narrow, mean and cat, whose backward
-- gives this op's.
local function pool_along(x, d, out)
  local n = x:size(d)
  local parts = {}
  for i = 0, out - 1 do
    local first = i * n // out
    local last = -((-(i + 1) * n) // out) -- ceil((i+1)*n/out), exclusive
    local window = x:narrow(d, first + 1, last - first)
    parts[i + 1] = window:mean(d, true)
    window:free()
  end
  local y = core.cat(parts, d)
  for _, p in ipairs(parts) do p:free() end
  return y
end

-- PyTorch's adaptive_avg_pool2d on (C, H, W) or (N, C, H, W): each output
-- cell the mean of its window (pool_along). A mean over a rectangle is the
-- mean over its rows of their means, so the two dims pool one after the
-- other: h + w windows instead of h * w. The common cases take one op:
-- output 1 x 1 (ResNet's head) is a mean over H and W, and windows that
-- tile the input evenly are avg_pool2d's.
function F.adaptive_avg_pool2d(x, output_size)
  check_tensor("adaptive_avg_pool2d", x)
  local nd = x:dim()
  if nd ~= 3 and nd ~= 4 then
    raise(string.format("adaptive_avg_pool2d: expected a 3D (C, H, W) or 4D (N, C, H, W) input, got %dD", nd))
  end
  if not FLOATING[x.dtype] then
    raise("adaptive_avg_pool2d: expected a floating point input, got " .. x.dtype)
  end
  local h_in, w_in = x:size(nd - 1), x:size(nd)
  if h_in == 0 or w_in == 0 then
    raise(string.format("adaptive_avg_pool2d: expected non-empty spatial dims, got %d x %d", h_in, w_in))
  end
  local size = adaptive_size(output_size, h_in, w_in)
  local h, w = size[1], size[2]
  if h == 1 and w == 1 then return x:mean({ nd - 1, nd }, true) end
  if h_in % h == 0 and w_in % w == 0 then
    return F.avg_pool2d(x, { h_in // h, w_in // w })
  end
  local rows = h == h_in and x or pool_along(x, nd - 1, h)
  if w == w_in then return rows end -- rows is new: h ~= h_in here (else both would divide)
  local y = pool_along(rows, nd, w)
  if not rawequal(rows, x) then rows:free() end
  return y
end

return require "lt.namespace" (F, "lt.nn.functional")
