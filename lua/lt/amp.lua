-- lt.amp: loss scaling for float16 mixed precision (torch.cuda.amp.GradScaler,
-- update rule and messages as in PyTorch 1.13).
--
--   local scaler = lt.amp.GradScaler()     -- {init_scale=65536, growth_factor=2,
--                                           --  backoff_factor=0.5, growth_interval=2000, enabled=true}
--   scaler:scale(loss):backward()
--   scaler:step(opt)                        -- unscales, skips the step on inf/NaN gradients
--   scaler:update()                         -- backs off after inf/NaN, grows after growth_interval good steps
--
-- The scale is a float32 number (PyTorch keeps it in a float32 tensor): it
-- only moves by powers of the factors, and growth stops where float32 would
-- overflow. bfloat16 has float32's range and needs no scaler.
local core = require "lt.core"
local methods = require "lt.methods"
local options_reader = require "lt.nn.options"
local raise = require "lt.user_error"
local by_device = require "lt.by_device"
local not_applied = require "lt.not_applied"
local estimate = require "lt.memory_estimate"

local is_tensor = core.is_tensor

local amp = {}

-- ---- float32 arithmetic on Lua numbers ----

local FLOAT32_OVERFLOW = 0x1.ffffffp127 -- the smallest double that rounds to float32 infinity

-- x rounded to the nearest float32 (infinity beyond its range).
local function float32(x)
  if x ~= x then return x end
  if x >= FLOAT32_OVERFLOW then return math.huge end
  if x <= -FLOAT32_OVERFLOW then return -math.huge end
  return (string.unpack("<f", string.pack("<f", x)))
end

local function is_finite(x) return x == x and x ~= math.huge and x ~= -math.huge end

-- ---- per-optimizer stages (PyTorch's OptState) ----

local READY, UNSCALED, STEPPED = "ready", "unscaled", "stepped"

-- For each gradient in a list of parameters' (true: their .grad, read in C
-- without a Lua handle), grad *= inv_scale (a float32 value) in place, and
-- found_inf (a float32 tensor of one element) set to 1 where a gradient held
-- an inf or NaN before; one engine call, no wait for the device.
local unscale_calls = core._optim.unscale_calls
local has_grad = core._optim.has_grad

local GradScaler = {}
GradScaler.__index = GradScaler
GradScaler.__name = "GradScaler"

local DEFAULTS = { init_scale = 65536.0, growth_factor = 2.0, backoff_factor = 0.5, growth_interval = 2000,
  enabled = true }

local function check_options(opts)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then raise("GradScaler: expected an options table, got " .. type(opts)) end
  for key in pairs(opts) do
    if DEFAULTS[key] == nil then options_reader.unknown("GradScaler", key, DEFAULTS) end
  end
  local o = {}
  for key, value in pairs(DEFAULTS) do
    if opts[key] == nil then o[key] = value else o[key] = opts[key] end
  end
  for _, key in ipairs { "init_scale", "growth_factor", "backoff_factor" } do
    if type(o[key]) ~= "number" then raise(string.format("GradScaler: %s must be a number, got %s", key, type(o[key]))) end
  end
  if math.type(o.growth_interval) ~= "integer" or o.growth_interval < 1 then
    raise("GradScaler: growth_interval must be a positive integer, got " .. tostring(o.growth_interval))
  end
  if type(o.enabled) ~= "boolean" then raise("GradScaler: enabled must be a boolean, got " .. type(o.enabled)) end
  if not (o.growth_factor > 1.0) then raise("GradScaler: The growth factor must be > 1.0.") end
  if not (o.backoff_factor < 1.0) then raise("GradScaler: The backoff factor must be < 1.0.") end
  return o
end

-- GradScaler{...}: see the options at the top.
function amp.GradScaler(opts)
  local o = check_options(opts)
  return setmetatable({
    _enabled = o.enabled,
    _scale = float32(o.init_scale),
    _growth_factor = o.growth_factor,
    _backoff_factor = o.backoff_factor,
    _growth_interval = o.growth_interval,
    _growth_tracker = 0,
    _per_optimizer = setmetatable({}, { __mode = "k" }),
  }, GradScaler)
end

function GradScaler:_state(optimizer)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    raise("GradScaler: expected an optimizer, got " .. type(optimizer))
  end
  estimate.keep(self) -- put back after lt.memory.estimate
  estimate.keep(self._per_optimizer, 2)
  local s = self._per_optimizer[optimizer]
  if s == nil then
    -- found_inf: a boolean, or nil while unscale_'s flags (a float32 tensor
    -- per device, in flags) are unread.
    s = { stage = READY, found_inf = false, checked = false }
    self._per_optimizer[optimizer] = s
  end
  return s
end

-- 16-bit floats, which a scaled loss must not stay in.
local HALF = { float16 = true, bfloat16 = true }

-- outputs (a tensor, or a table of tensors, nested) times the scale. As in
-- PyTorch, where the scale is a float32 tensor, a float16 or bfloat16 output
-- is scaled in float32: loss * 65536 would overflow float16 from a loss of 1.
function GradScaler:scale(outputs)
  if not self._enabled then return outputs end
  if is_tensor(outputs) then
    if HALF[outputs.dtype] then outputs = outputs:float() end
    return outputs * self._scale
  end
  if type(outputs) ~= "table" then raise("GradScaler:scale: outputs must be a tensor or a table of tensors") end
  local scaled = {}
  for k, v in pairs(outputs) do scaled[k] = self:scale(v) end
  return scaled
end

-- Divides the optimizer's gradients by the scale, in place, once per step,
-- and records whether any was inf or NaN (then step skips the update).
function GradScaler:unscale_(optimizer)
  if not self._enabled then return end
  local s = self:_state(optimizer)
  if s.stage == UNSCALED then
    raise("GradScaler:unscale_: unscale_() has already been called on this optimizer since the last update().")
  elseif s.stage == STEPPED then
    raise("GradScaler:unscale_: unscale_() is being called after step().")
  end
  -- PyTorch: self._scale.double().reciprocal().float(), applied in float32.
  local inv_scale = float32(1.0 / self._scale)
  -- The parameters with a gradient, by device: a gradient has its
  -- parameter's dtype and device (t.grad refuses others).
  local set = by_device.new()
  for _, group in ipairs(optimizer.param_groups) do
    for _, p in ipairs(group.params) do
      if has_grad(p) then
        if p.dtype == "float16" then raise("GradScaler:unscale_: Attempting to unscale FP16 gradients.") end
        by_device.add(set, p)
      end
    end
  end
  local lists, order = set.lists, set.order
  -- One flag per device, owned here and only read when step() or update()
  -- needs the answer, so unscaling waits for no device. All are made before
  -- the one engine call, which writes no gradient unless it can unscale
  -- them all: a failure (out of memory) leaves the gradients and this
  -- optimizer's stage as they were, and unscale_ can be called again.
  local flags, per_device = {}, {}
  local ok, err = pcall(function()
    for i, device in ipairs(order) do
      flags[i] = core.zeros({ 1 }, { dtype = "float32", device = device })
      per_device[i] = lists[device]
    end
    if #order > 0 then unscale_calls(per_device, flags, inv_scale) end
  end)
  if not ok then
    for _, flag in ipairs(flags) do flag:free() end
    raise(not_applied("GradScaler:unscale_", err, "no gradient was unscaled"))
  end
  s.found_inf, s.flags, s.checked, s.stage = nil, flags, #order > 0, UNSCALED
end

-- Whether unscale_ found an inf or NaN: reads the flags once (a host sync
-- per device, as PyTorch's found_inf.item() in step()).
local function found_inf(s)
  if s.found_inf == nil then
    local found = false
    for _, flag in ipairs(s.flags) do
      if flag:item() ~= 0 then found = true end
      flag:free() -- made by unscale_ and read only here
    end
    s.found_inf, s.flags = found, nil
  end
  return s.found_inf
end

-- optimizer:step() unless the gradients held an inf or NaN (unscaling them
-- first if unscale_ was not called). Returns whether the step was taken.
function GradScaler:step(optimizer, ...)
  if not self._enabled then
    optimizer:step(...)
    return true
  end
  local s = self:_state(optimizer)
  if s.stage == STEPPED then raise("GradScaler:step: step() has already been called since the last update().") end
  if s.stage == READY then self:unscale_(optimizer) end
  if not s.checked then raise("GradScaler:step: No inf checks were recorded for this optimizer.") end
  if found_inf(s) then
    s.stage = STEPPED
    return false
  end
  -- STEPPED only once the step is taken: a failed step (out of memory)
  -- changes no parameter, so step() may be called again; the gradients
  -- stay unscaled and are not unscaled twice.
  optimizer:step(...)
  s.stage = STEPPED
  return true
end

-- The scale for the next iteration: times backoff_factor after an inf/NaN
-- (and the count of good steps restarts), times growth_factor after
-- growth_interval good steps in a row. new_scale (a number) sets it instead.
function GradScaler:update(new_scale)
  if not self._enabled then return end
  estimate.keep(self) -- put back after lt.memory.estimate
  estimate.keep(self._per_optimizer, 2)
  if new_scale ~= nil then
    if type(new_scale) ~= "number" then raise("GradScaler:update: new_scale must be a number, got " .. type(new_scale)) end
    self._scale = float32(new_scale)
  else
    local found, any = false, false
    for _, s in pairs(self._per_optimizer) do
      if s.checked then
        any = true
        found = found or found_inf(s)
      end
    end
    if not any then raise("GradScaler:update: No inf checks were recorded prior to update.") end
    -- torch._amp_update_scale_
    if found then
      self._scale = float32(self._scale * self._backoff_factor)
      self._growth_tracker = 0
    else
      local successful = self._growth_tracker + 1
      if successful == self._growth_interval then
        local grown = float32(self._scale * self._growth_factor)
        if is_finite(grown) then self._scale = grown end
        self._growth_tracker = 0
      else
        self._growth_tracker = successful
      end
    end
  end
  self._per_optimizer = setmetatable({}, { __mode = "k" })
end

function GradScaler:get_scale() return self._enabled and self._scale or 1.0 end
function GradScaler:is_enabled() return self._enabled end
function GradScaler:get_growth_factor() return self._growth_factor end
function GradScaler:set_growth_factor(v) self._growth_factor = v end
function GradScaler:get_backoff_factor() return self._backoff_factor end
function GradScaler:set_backoff_factor(v) self._backoff_factor = v end
function GradScaler:get_growth_interval() return self._growth_interval end
function GradScaler:set_growth_interval(v) self._growth_interval = v end

function GradScaler:state_dict()
  if not self._enabled then return {} end
  return { scale = self._scale, growth_factor = self._growth_factor, backoff_factor = self._backoff_factor,
    growth_interval = self._growth_interval, _growth_tracker = self._growth_tracker }
end

function GradScaler:load_state_dict(sd)
  if not self._enabled then return end
  if type(sd) ~= "table" or next(sd) == nil then
    raise("GradScaler:load_state_dict: The source state dict is empty, possibly because it was saved from a " ..
      "disabled instance of GradScaler.")
  end
  self._scale = float32(sd.scale)
  self._growth_factor = sd.growth_factor
  self._backoff_factor = sd.backoff_factor
  self._growth_interval = sd.growth_interval
  self._growth_tracker = sd._growth_tracker
end

function GradScaler:__tostring()
  return string.format("GradScaler(scale=%g, growth_tracker=%d, enabled=%s)", self:get_scale(),
    self._growth_tracker, tostring(self._enabled))
end

-- scaler.step(opt) with a dot: a clear error, not one from inside this file.
methods.guard(GradScaler, "GradScaler", "a GradScaler", "scaler", function(v) return getmetatable(v) == GradScaler end)

return amp
