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

local foreach = core._optim
local norm_many, scale_many = foreach.norm_many, foreach.scale_many

-- The parameters (a tensor or a table of them) checked, each once (a
-- parameter listed twice counts and is scaled once), grouped by device in
-- order of first appearance: {{device = d, params = {...}}, ...}. No handle
-- is made for any gradient: the engine reads p.grad itself.
local function device_groups(name, parameters)
  if core.is_tensor(parameters) then parameters = { parameters } end
  if type(parameters) ~= "table" then
    raise(string.format("%s: expected a tensor or a table of tensors, got %s", name, type(parameters)))
  end
  local groups, by_device, seen = {}, {}, {}
  for i, p in ipairs(parameters) do
    if not core.is_tensor(p) then
      raise(string.format("%s: parameter %d is a %s, not a tensor", name, i, type(p)))
    end
    if not seen[p] then
      seen[p] = true
      local device = p.device
      local g = by_device[device]
      if g == nil then
        g = { device = device, params = {} }
        by_device[device], groups[#groups + 1] = g, g
      end
      g.params[#g.params + 1] = p
    end
  end
  return groups
end

-- The total p-norm of the groups' gradients, a 0-dim tensor on the first
-- group's device with a gradient, in its first gradient's dtype (as
-- PyTorch's); nil when no parameter has a gradient. One engine call per
-- device (lt_foreach_norm, sums in double); over several devices the norms
-- are combined as torch.nn.utils does, the norm of the devices' norms.
local function total_norm(groups, p)
  local total
  for _, g in ipairs(groups) do
    local n = norm_many(g.params, p, true)
    if n ~= nil then
      if total == nil then
        total = n
      else
        n = replace(n, n:to(total.device))
        local first = total
        if p == math.huge then
          local bigger, nan = n:gt(total), n:ne(n)
          local kept = core.where(nan, n, total)
          total = core.where(bigger, n, kept)
          free_all { bigger, nan, kept, n }
        else
          local sum = total:double():pow(p) + n:double():pow(p)
          total = replace(sum, sum:pow(1 / p)):to(first.dtype)
          n:free()
        end
        if not rawequal(total, first) then first:free() end
      end
    end
  end
  return total
end

--- Scales every gradient by max_norm / (total norm + 1e-6) when that is below
--- one; returns the total norm (the norm of the gradients' norms, a 0-dim
--- tensor on the first gradient's device), as torch.nn.utils.clip_grad_norm_.
--- Two engine calls per device, the norm and the scale (PyTorch's
--- _foreach_norm and _foreach_mul_), whatever the number of parameters.
function utils.clip_grad_norm_(parameters, max_norm, opts)
  local name = "clip_grad_norm_"
  max_norm = finite_number(name, "max_norm", max_norm)
  local o = options.read(name, opts, { norm_type = 2, error_if_nonfinite = false })
  local p = norm_order(name, o.norm_type)
  if type(o.error_if_nonfinite) ~= "boolean" then
    raise(name .. ": error_if_nonfinite must be a boolean, got " .. type(o.error_if_nonfinite))
  end
  local groups = device_groups(name, parameters)
  local ok, result = pcall(function()
    local total = total_norm(groups, p)
    if total == nil then return core.tensor(0.0) end
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
    -- The coefficient on every device before the first gradient is scaled:
    -- what can fail (allocations) comes before any write.
    local coefs = {}
    for _, g in ipairs(groups) do coefs[g] = coef:to(g.device) end
    for _, g in ipairs(groups) do scale_many(g.params, coefs[g], true) end
    for _, c in pairs(coefs) do if not rawequal(c, coef) then c:free() end end
    coef:free()
    return total
  end)
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
