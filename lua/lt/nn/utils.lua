-- nn.utils: gradient clipping, as torch.nn.utils.
--   nn.utils.clip_grad_norm_(parameters, max_norm, {norm_type = 2, error_if_nonfinite = false})
--   nn.utils.clip_grad_value_(parameters, clip_value)
-- parameters: one tensor or a table of them (a module's :parameters());
-- those without a gradient are skipped. Gradients are scaled in place on
-- their own devices, with no copy to the host (the total norm stays a
-- tensor), so a training step that clips does not wait for the device;
-- with a GradScaler, call scaler:unscale_(opt) first.
local core = require "lt.core"
local options = require "lt.nn.options"
local raise = require "lt.user_error"
local not_applied = require "lt.not_applied"

local utils = {}

local HALF = { float16 = true, bfloat16 = true }

-- New handles on the gradients of parameters (a tensor or a table of
-- tensors), not the cached p.grad ones: the caller frees them when done, so
-- that clipping leaves no handle behind that would hold a gradient past
-- zero_grad.
local grad_of = core._grad

local function gradients(name, parameters)
  if core.is_tensor(parameters) then parameters = { parameters } end
  if type(parameters) ~= "table" then
    raise(string.format("%s: expected a tensor or a table of tensors, got %s", name, type(parameters)))
  end
  for i, p in ipairs(parameters) do
    if not core.is_tensor(p) then
      raise(string.format("%s: parameter %d is a %s, not a tensor", name, i, type(p)))
    end
  end
  local grads = {}
  for _, p in ipairs(parameters) do grads[#grads + 1] = grad_of(p) end
  return grads
end

local function free_all(list)
  for _, t in ipairs(list) do t:free() end
end

-- new, after freeing old unless it is new itself (t:to(device) and t:float()
-- hand back t when there is nothing to do).
local function replace(old, new)
  if not rawequal(old, new) then old:free() end
  return new
end

local function finite_number(name, what, v)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    raise(string.format("%s: %s must be a finite number, got %s", name, what, tostring(v)))
  end
  return v
end

-- A norm order: a positive number or math.huge (inf), as torch's norm_type.
local function norm_order(name, v)
  if type(v) ~= "number" or not (v > 0) then
    raise(string.format("%s: norm_type must be a positive number or math.huge, got %s", name, tostring(v)))
  end
  return v
end

-- The p-norm of one gradient, a 0-dim tensor on its device: float32 for a
-- 16-bit gradient (the norms are then combined in float32, as PyTorch's norm
-- accumulates). The usual orders make no gradient-sized temporary for
-- float32 and float64, since clipping must not raise the peak it runs at:
-- 2 as a dot product (a 1 x n by n x 1 GEMM), inf from the largest and the
-- smallest element.
-- A 16-bit norm as float32 (the norms are combined in float32).
local function replace_float(n)
  return HALF[n.dtype] and replace(n, n:float()) or n
end

local function tensor_norm(g, p)
  if g:numel() == 0 then return g:sum() end -- a zero of g's dtype, on its device
  if p == 2 then
    -- A 16-bit sum of squares would overflow at a norm of 256: those sum
    -- in float32 (a float32 copy, the one temporary) and round once.
    local wide = HALF[g.dtype] and g:float() or g
    local flat = wide:reshape(1, -1)
    local column = flat:t()
    local square = flat:matmul(column)
    local scalar = square:reshape()
    local norm = scalar:sqrt()
    -- the views too: each holds the gradient's storage
    free_all { column, flat, scalar, square }
    if not rawequal(wide, g) then wide:free() end
    return norm
  end
  if p == math.huge then
    local hi, lo = g:max(), g:min()
    local neg = -lo
    local above = hi:gt(neg)
    local norm = core.where(above, hi, neg)
    free_all { hi, lo, neg, above }
    return norm
  end
  local a = g:abs()
  if p == 1 then
    local norm = a:sum()
    a:free()
    return norm
  end
  local powered = a:pow(p)
  a:free()
  local sum = powered:sum()
  powered:free()
  local norm = sum:pow(1 / p)
  sum:free()
  return norm
end

--- Scales every gradient by max_norm / (total norm + 1e-6) when that is below
--- one; returns the total norm (the norm of the gradients' norms, a 0-dim
--- tensor on the first gradient's device), as torch.nn.utils.clip_grad_norm_.
function utils.clip_grad_norm_(parameters, max_norm, opts)
  local name = "clip_grad_norm_"
  max_norm = finite_number(name, "max_norm", max_norm)
  local o = options.read(name, opts, { norm_type = 2, error_if_nonfinite = false })
  local p = norm_order(name, o.norm_type)
  if type(o.error_if_nonfinite) ~= "boolean" then
    raise(name .. ": error_if_nonfinite must be a boolean, got " .. type(o.error_if_nonfinite))
  end
  local grads = gradients(name, parameters)
  if #grads == 0 then return core.tensor(0.0) end
  -- Every temporary is freed at its last use (the norms are 0-dim, but one
  -- per gradient, and a 16-bit gradient's float32 copy is gradient-sized).
  local ok, result = pcall(core.no_grad, function()
    local device = grads[1].device
    local total
    for _, g in ipairs(grads) do
      local n = replace_float(tensor_norm(g, p):to(device))
      if p == math.huge then
        -- the larger, or a NaN (as max propagates it)
        if total == nil then
          total = n
        else
          local bigger, nan = n:gt(total), n:ne(n)
          local kept = core.where(nan, n, total)
          local new = core.where(bigger, n, kept)
          free_all { bigger, nan, kept, n, total }
          total = new
        end
      else
        if p ~= 1 then n = replace(n, n:pow(p)) end
        if total == nil then
          total = n
        else
          local new = total + n
          free_all { total, n }
          total = new
        end
      end
    end
    if p ~= math.huge and p ~= 1 then total = replace(total, total:pow(1 / p)) end
    total = replace(total, total:to(grads[1].dtype)) -- the gradients' dtype, as PyTorch's
    if o.error_if_nonfinite then
      local v = total:item() -- the one host read, asked for by the option
      if v ~= v or v == math.huge then
        raise(string.format("%s: the total norm of order %s of the gradients is non-finite (%s), "
          .. "so it cannot be clipped; pass error_if_nonfinite=false to scale by it anyway",
          name, tostring(p), v ~= v and "nan" or "inf"))
      end
    end
    local shifted = total + 1e-6
    local ratio = max_norm / shifted
    local coef = ratio:clamp(nil, 1.0)
    free_all { shifted, ratio }
    -- The coefficient on every gradient's device before the first gradient
    -- is scaled: what can fail (allocations) comes before any write, and
    -- mul_ by a 0-dim tensor allocates nothing, so no failure leaves some
    -- gradients scaled and others not.
    local coefs = { [device] = coef }
    for _, g in ipairs(grads) do
      if coefs[g.device] == nil then coefs[g.device] = coef:to(g.device) end
    end
    for _, g in ipairs(grads) do g:mul_(coefs[g.device]) end
    for _, c in pairs(coefs) do c:free() end
    return total
  end)
  free_all(grads)
  if not ok then raise(not_applied(name, result, "no gradient was scaled")) end
  return result
end

--- Clamps every gradient to [-clip_value, clip_value] in place.
function utils.clip_grad_value_(parameters, clip_value)
  local name = "clip_grad_value_"
  clip_value = finite_number(name, "clip_value", clip_value)
  local grads = gradients(name, parameters)
  -- clamp_ with numbers allocates nothing: it cannot fail halfway.
  core.no_grad(function()
    for _, g in ipairs(grads) do g:clamp_(-clip_value, clip_value) end
  end)
  free_all(grads)
end

return utils
