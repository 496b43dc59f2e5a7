-- Learning-rate schedules over an optimizer's parameter groups, with
-- torch.optim.lr_scheduler's names, options and values. Each schedule is a
-- closed form of the epoch (and of what the groups hold), so schedules are
-- reproducible and resumable; where PyTorch computes a rate recursively from
-- the previous one, the closed form gives the same value (to rounding).
--   StepLR(opt, {step_size=, gamma=0.1}):  lr = base * gamma ^ floor(e / step_size)
--   CosineAnnealingLR(opt, {T_max=, eta_min=0}):
--     lr = eta_min + (base - eta_min) * (1 + cos(pi * e / T_max)) / 2
--   LinearLR(opt, {start_factor=1/3, end_factor=1, total_iters=5}):
--     lr = base * (start + (end - start) * min(e, total_iters) / total_iters)
--   LambdaLR(opt, lr_lambda): lr = base * lr_lambda(e); lr_lambda is a
--     function or a list of functions, one per group
--   OneCycleLR(opt, {max_lr=, total_steps= | epochs= and steps_per_epoch=,
--     pct_start=0.3, anneal_strategy="cos"|"linear", div_factor=25,
--     final_div_factor=1e4, three_phase=false, cycle_momentum=true,
--     base_momentum=0.85, max_momentum=0.95}): one cycle per run, stepped
--     once per batch; cycles SGD's momentum or Adam's beta1 the other way
--   SequentialLR(opt, {schedulers={...}, milestones={...}}): schedulers[k+1]
--     from epoch milestones[k] on, started from its own epoch 0
-- sched:step() advances one epoch (call it after opt:step()),
-- sched:get_last_lr() gives the rates now in force, one per group,
-- sched:state_dict() / sched:load_state_dict(sd, {keep_options=}) save and
-- resume. A refused step, construction or load changes no group.
local class = require "lt.class"
local raise = require "lt.user_error"
local options_reader = require "lt.nn.options"
local methods = require "lt.methods"
local estimate = require "lt.memory_estimate"

local Scheduler = {}
Scheduler.__index = Scheduler

local is_scheduler = methods.instance_of(Scheduler)

-- A value as error messages show it: lists in braces, strings quoted.
local function show(v)
  if type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = show(x) end
    return "{" .. table.concat(parts, ", ") .. "}"
  elseif type(v) == "string" then
    return string.format("%q", v)
  end
  return tostring(v)
end

-- Option values compare by content: lists (max_lr per group, milestones)
-- are equal when their elements are.
local function same_value(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  if #a ~= #b then return false end
  for i = 1, #a do
    if not same_value(a[i], b[i]) then return false end
  end
  return true
end

local function copy_list(t) return table.move(t, 1, #t, 1, {}) end

-- cls.options maps each option to {default =, optional = true (may stay
-- nil), kind = the Lua type (default "number"; "any" leaves it to check),
-- check = function(v) -> valid, expected = what check wants, in words,
-- state = false (not part of state_dict, as functions and other schedulers
-- cannot be saved)}.
local function valid(spec, value)
  local kind = spec.kind or "number"
  if kind ~= "any" and type(value) ~= kind then return false end
  return spec.check == nil or spec.check(value)
end

local function invalid(prefix, key, value, spec)
  raise(string.format("%s: invalid %s: %s (%s)", prefix, key, show(value), spec.expected))
end

-- Hooks a class may define (all but attach and after_apply are pure: they
-- raise or return, and change nothing):
--   init(self)         construction-only checks and derived values
--   check(self)        checks of the options together, also on a loaded candidate
--   attach(self)       writes what the schedule keeps in the groups (initial_lr)
--   closed_form(self, base, epoch, i)   group i's rate
--   schedule(self, epoch)  per group, the fields the epoch sets ({lr =, ...})
--   after_apply(self, epoch)
local function define(name, options, closed_form)
  local cls = class.extend(Scheduler, name, { call = function(cls, opt, opts) return cls.new(cls, opt, opts) end })
  cls.name = name
  cls.options = options
  cls.closed_form = closed_form
  return cls
end

local function read_options(self, cls, opts)
  if type(opts) ~= "table" then raise(string.format("%s: expected an options table, got %s", cls.name, type(opts))) end
  for key in pairs(opts) do
    if cls.options[key] == nil then options_reader.unknown(cls.name, key, cls.options) end
  end
  for key, spec in pairs(cls.options) do
    local value = opts[key]
    if value == nil then value = spec.default end
    if value == nil and not spec.optional then raise(string.format("%s: option '%s' is required", cls.name, key)) end
    if value ~= nil and not valid(spec, value) then invalid(cls.name, key, value, spec) end
    -- a list is copied: the caller changing it later must not change the schedule
    if type(value) == "table" and getmetatable(value) == nil then value = copy_list(value) end
    self[key] = value
  end
end

-- Runs fn, which changes fields of groups; if it fails, every group gets
-- back the fields it had (schedules only set fields or replace a table,
-- never change one in place, so a shallow copy is enough) and the error
-- goes on, already placed at the user's line.
local function with_rollback(groups, fn)
  local saved = {}
  for i, group in ipairs(groups) do
    local copy = {}
    for k, v in pairs(group) do copy[k] = v end
    saved[i] = copy
  end
  local ok, err = pcall(fn)
  if ok then return end
  for i, group in ipairs(groups) do
    for k in pairs(group) do group[k] = nil end
    for k, v in pairs(saved[i]) do group[k] = v end
  end
  error(err, 0)
end

-- Takes the fields schedule computed for epoch (Lua assignments only, which
-- cannot fail).
local function assign(self, updates, epoch)
  self.last_epoch = epoch
  local lrs = {}
  for i, group in ipairs(self.optimizer.param_groups) do
    for key, value in pairs(updates[i]) do group[key] = value end
    lrs[i] = updates[i].lr
  end
  self.last_lr = lrs
  if self.after_apply then self:after_apply(epoch) end
end

-- Sets the epoch's fields in every group, all computed first: a failure
-- changes no group and keeps the epoch.
local function apply(self, epoch)
  assign(self, self:schedule(epoch), epoch)
end

function Scheduler.new(cls, opt, opts)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    raise(string.format("%s: expected an optimizer, got %s", cls.name, type(opt)))
  end
  if cls.normalize then opts = cls.normalize(opts) end
  local self = setmetatable({ optimizer = opt, last_epoch = 0 }, cls)
  read_options(self, cls, opts or {})
  if self.init then self:init() end
  if self.check then self:check() end
  with_rollback(opt.param_groups, function()
    self:attach()
    apply(self, 0)
  end)
  return self
end

-- initial_lr is kept in the group, as PyTorch does, so that a second
-- scheduler or a resumed run starts from the same base.
function Scheduler:attach()
  self.base_lrs = {}
  for i, group in ipairs(self.optimizer.param_groups) do
    if group.initial_lr == nil then group.initial_lr = group.lr end
    self.base_lrs[i] = group.initial_lr
  end
end

-- The base rate of group i, which a group added after the scheduler lacks.
local function base_of(self, i)
  local base = self.base_lrs[i]
  if type(base) ~= "number" then
    raise(string.format("%s: parameter group %d has no base learning rate (added after the scheduler was made?)",
      self.name, i))
  end
  return base
end

function Scheduler:schedule(epoch)
  local updates = {}
  for i in ipairs(self.optimizer.param_groups) do
    updates[i] = { lr = self:closed_form(base_of(self, i), epoch, i) }
  end
  return updates
end

-- Sets the rates of the epoch now.
function Scheduler:apply()
  apply(self, self.last_epoch)
end

function Scheduler:step()
  estimate.keep(self) -- put back after lt.memory.estimate
  estimate.keep(self.optimizer.param_groups, 2)
  for _, child in ipairs(self.children or {}) do estimate.keep(child) end
  apply(self, self.last_epoch + 1)
end

function Scheduler:get_last_lr()
  return copy_list(self.last_lr)
end

function Scheduler:state_dict()
  local sd = { last_epoch = self.last_epoch }
  if self.base_lrs then sd.base_lrs = copy_list(self.base_lrs) end
  for key, spec in pairs(self.options) do
    local value = self[key]
    if spec.state ~= false and value ~= nil then
      sd[key] = type(value) == "table" and copy_list(value) or value
    end
  end
  if self.children then
    sd.schedulers = {}
    for i, child in ipairs(self.children) do sd.schedulers[i] = child:state_dict() end
  end
  return sd
end

-- A copy of sched with sd's values, checked whole; sched itself is not
-- changed. differ collects the saved options that differ from sched's.
local function candidate_of(sched, sd, keep, name, differ)
  if type(sd) ~= "table" then raise(string.format("%s: expected a table (from state_dict()), got %s", name, type(sd))) end
  local candidate = setmetatable({}, getmetatable(sched))
  for k, v in pairs(sched) do candidate[k] = v end
  for key, value in pairs(sd) do
    local spec = sched.options[key]
    if key == "last_epoch" then
      if math.type(value) ~= "integer" or value < 0 then
        raise(string.format("%s: last_epoch must be a non-negative integer, got %s", name, tostring(value)))
      end
    elseif key == "base_lrs" and sched.base_lrs then
      local groups = #sched.optimizer.param_groups
      if type(value) ~= "table" or #value ~= groups then
        raise(string.format("%s: base_lrs must list %d rate%s, one per parameter group", name, groups,
          groups == 1 and "" or "s"))
      end
      for i = 1, groups do
        if type(value[i]) ~= "number" then
          raise(string.format("%s: base_lrs[%d] must be a number, got %s", name, i, tostring(value[i])))
        end
      end
      value = copy_list(value)
    elseif key == "schedulers" and sched.children then
      value = sched:load_children(value, keep, name)
    elseif spec == nil or spec.state == false then
      raise(string.format("%s: unknown key '%s'", name, tostring(key)))
    elseif not valid(spec, value) then
      invalid(name, key, value, spec)
    else
      if not same_value(value, sched[key]) then differ[key] = value end
      if keep then
        value = sched[key]
      elseif type(value) == "table" then
        value = copy_list(value)
      end
    end
    candidate[key == "schedulers" and "children" or key] = value
  end
  if candidate.check then candidate:check(name) end
  return candidate
end

-- Restores a state_dict, checked whole on a candidate before anything is
-- taken: a bad state dict changes nothing. PyTorch's rule restores the
-- schedule's options too; with {keep_options = true} this schedule's own
-- options stay, so that a resumed run asking for a longer schedule (T_max of
-- the new run) continues on it from the saved epoch instead of the finished
-- old one (whose last rate may be 0). Returns the saved options that differ
-- from the ones in force, name -> saved value.
function Scheduler:load_state_dict(sd, opts)
  local name = self.name .. ": load_state_dict"
  local differ = {}
  local candidate = candidate_of(self, sd, opts and opts.keep_options, name, differ)
  local updates = candidate:schedule(candidate.last_epoch)
  -- from here nothing can fail
  if candidate.children ~= self.children then
    for i, child in ipairs(self.children) do
      for k, v in pairs(candidate.children[i]) do child[k] = v end
    end
    candidate.children = self.children
  end
  for k, v in pairs(candidate) do self[k] = v end
  assign(self, updates, self.last_epoch)
  return differ
end

local function positive_integer(v) return math.type(v) == "integer" and v > 0 end
local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

local StepLR = define("StepLR", {
  step_size = { check = positive_integer, expected = "a positive integer" },
  gamma = { default = 0.1, expected = "a number" },
}, function(self, base, epoch)
  return base * self.gamma ^ (epoch // self.step_size)
end)

local CosineAnnealingLR = define("CosineAnnealingLR", {
  T_max = { check = function(v) return v > 0 end, expected = "a positive number" },
  eta_min = { default = 0, expected = "a number" },
}, function(self, base, epoch)
  return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2
end)

-- PyTorch's bounds: the first factor must leave a rate (> 0); neither may
-- raise the rate above the base.
local LinearLR = define("LinearLR", {
  start_factor = { default = 1 / 3, check = function(v) return v > 0 and v <= 1 end, expected = "a number in (0, 1]" },
  end_factor = { default = 1.0, check = function(v) return v >= 0 and v <= 1 end, expected = "a number in [0, 1]" },
  total_iters = { default = 5, check = positive_integer, expected = "a positive integer" },
}, function(self, base, epoch)
  local change = (self.end_factor - self.start_factor) * math.min(self.total_iters, epoch) / self.total_iters
  return base * (self.start_factor + change)
end)

local function function_or_list(v)
  if type(v) == "function" then return true end
  if type(v) ~= "table" or #v == 0 then return false end
  for _, f in ipairs(v) do
    if type(f) ~= "function" then return false end
  end
  return true
end

-- The functions are not saved (state = false): as PyTorch's state_dict
-- skips plain functions, a resumed run passes its own.
local LambdaLR = define("LambdaLR", {
  lr_lambda = { kind = "any", check = function_or_list, state = false,
    expected = "a function of the epoch, or a list of them, one per parameter group" },
}, function(self, base, epoch, i)
  local fn = type(self.lr_lambda) == "function" and self.lr_lambda or self.lr_lambda[i]
  local ok, factor = pcall(fn, epoch)
  if not ok then
    raise(string.format("LambdaLR: lr_lambda of parameter group %d failed at epoch %d: %s", i, epoch, tostring(factor)))
  end
  if type(factor) ~= "number" or not finite(factor) then
    raise(string.format("LambdaLR: lr_lambda of parameter group %d returned %s at epoch %d (expected a finite number)",
      i, show(factor), epoch))
  end
  return base * factor
end)

-- LambdaLR(opt, fn) and LambdaLR(opt, {f1, f2}) as in PyTorch, and
-- LambdaLR(opt, {lr_lambda = ...}) as the other schedulers take options.
-- Anything else is taken as lr_lambda, so that the error names it.
function LambdaLR.normalize(opts)
  if type(opts) == "table" and (opts.lr_lambda ~= nil or #opts == 0) then return opts end
  return { lr_lambda = opts }
end

function LambdaLR:check()
  local groups = #self.optimizer.param_groups
  if type(self.lr_lambda) == "table" and #self.lr_lambda ~= groups then
    raise(string.format("LambdaLR: expected %d lr_lambda%s (one per parameter group), got %d", groups,
      groups == 1 and "" or "s", #self.lr_lambda))
  end
end

-- OneCycleLR (Smith and Topor's 1cycle). Per-group values may be one number
-- or a list with one per group, as PyTorch's max_lr and momenta.
local function number_or_list(ok)
  return function(v)
    if type(v) == "number" then return ok(v) end
    if type(v) ~= "table" or #v == 0 then return false end
    for _, x in ipairs(v) do
      if type(x) ~= "number" or not ok(x) then return false end
    end
    return true
  end
end

local function non_negative(v) return finite(v) and v >= 0 end
local function positive(v) return finite(v) and v > 0 end

local OneCycleLR = define("OneCycleLR", {
  max_lr = { kind = "any", check = number_or_list(non_negative),
    expected = "a non-negative number or a list of them, one per parameter group" },
  total_steps = { optional = true, check = positive_integer, expected = "a positive integer" },
  epochs = { optional = true, check = positive_integer, state = false, expected = "a positive integer" },
  steps_per_epoch = { optional = true, check = positive_integer, state = false, expected = "a positive integer" },
  pct_start = { default = 0.3, check = function(v) return v >= 0 and v <= 1 end, expected = "a number in [0, 1]" },
  anneal_strategy = { default = "cos", kind = "string",
    check = function(v) return v == "cos" or v == "linear" end, expected = '"cos" or "linear"' },
  div_factor = { default = 25.0, check = positive, expected = "a positive number" },
  final_div_factor = { default = 1e4, check = positive, expected = "a positive number" },
  three_phase = { default = false, kind = "boolean", expected = "a boolean" },
  cycle_momentum = { default = true, kind = "boolean", expected = "a boolean" },
  base_momentum = { default = 0.85, kind = "any", check = number_or_list(non_negative),
    expected = "a non-negative number or a list of them, one per parameter group" },
  max_momentum = { default = 0.95, kind = "any", check = number_or_list(non_negative),
    expected = "a non-negative number or a list of them, one per parameter group" },
})

function OneCycleLR:init()
  if self.total_steps == nil then
    if self.epochs == nil or self.steps_per_epoch == nil then
      raise("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
    end
    self.total_steps = self.epochs * self.steps_per_epoch
  elseif self.epochs ~= nil and self.steps_per_epoch ~= nil
      and self.epochs * self.steps_per_epoch ~= self.total_steps then
    -- PyTorch would take total_steps silently; the two disagreeing is a mistake
    raise(string.format("OneCycleLR: total_steps %d disagrees with epochs * steps_per_epoch = %d * %d = %d",
      self.total_steps, self.epochs, self.steps_per_epoch, self.epochs * self.steps_per_epoch))
  end
  if self.cycle_momentum then
    -- As PyTorch: beta1 where the optimizer has betas (Adam, AdamW), else momentum (SGD).
    local defaults = self.optimizer.defaults or {}
    if defaults.betas == nil and defaults.momentum == nil then
      raise(string.format("OneCycleLR: cycle_momentum needs an optimizer with momentum or betas, %s has neither "
        .. "(pass cycle_momentum = false)", tostring(self.optimizer.name)))
    end
    self.use_beta1 = defaults.betas ~= nil
  end
end

-- The value of option key for group i.
local function per_group(self, key, i)
  local v = self[key]
  if type(v) == "table" then return v[i] end
  return v
end

function OneCycleLR:check(prefix)
  prefix = prefix or "OneCycleLR"
  local groups = #self.optimizer.param_groups
  local keys = self.cycle_momentum and { "max_lr", "base_momentum", "max_momentum" } or { "max_lr" }
  for _, key in ipairs(keys) do
    if type(self[key]) == "table" and #self[key] ~= groups then
      raise(string.format("%s: %s lists %d values, the optimizer has %d parameter group%s", prefix, key, #self[key],
        groups, groups == 1 and "" or "s"))
    end
  end
  if self.cycle_momentum and self.use_beta1 then
    for _, key in ipairs { "base_momentum", "max_momentum" } do
      for i = 1, groups do
        local m = per_group(self, key, i)
        if m >= 1 then
          raise(string.format("%s: %s %s for parameter group %d is beta1 of %s, which must be below 1", prefix, key,
            show(m), i, tostring(self.optimizer.name)))
        end
      end
    end
  end
end

-- As PyTorch, the cycle's rates and momenta live in the groups (initial_lr,
-- max_lr, min_lr, max_momentum, base_momentum), so the optimizer's
-- state_dict carries them.
function OneCycleLR:attach()
  self.base_lrs = {}
  for i, group in ipairs(self.optimizer.param_groups) do
    local max_lr = per_group(self, "max_lr", i)
    group.initial_lr = max_lr / self.div_factor
    group.max_lr = max_lr
    group.min_lr = group.initial_lr / self.final_div_factor
    if self.cycle_momentum then
      group.max_momentum = per_group(self, "max_momentum", i)
      group.base_momentum = per_group(self, "base_momentum", i)
    end
    self.base_lrs[i] = group.initial_lr
  end
end

-- PyTorch's phases: each goes from its start to its end value over steps
-- up to end_step (fractional, as PyTorch computes it); the last one also
-- takes any step past its end.
local function phases(self)
  local T, p = self.total_steps, self.pct_start
  if self.three_phase then
    return {
      { end_step = p * T - 1, lr = { "initial_lr", "max_lr" }, momentum = { "max_momentum", "base_momentum" } },
      { end_step = 2 * p * T - 2, lr = { "max_lr", "initial_lr" }, momentum = { "base_momentum", "max_momentum" } },
      { end_step = T - 1, lr = { "initial_lr", "min_lr" }, momentum = { "max_momentum", "max_momentum" } },
    }
  end
  return {
    { end_step = p * T - 1, lr = { "initial_lr", "max_lr" }, momentum = { "max_momentum", "base_momentum" } },
    { end_step = T - 1, lr = { "max_lr", "min_lr" }, momentum = { "base_momentum", "max_momentum" } },
  }
end

local function anneal(strategy, from, to, pct)
  if strategy == "cos" then return to + (from - to) / 2.0 * (math.cos(math.pi * pct) + 1) end
  return (to - from) * pct + from
end

function OneCycleLR:schedule(step)
  if step > self.total_steps then
    raise(string.format("OneCycleLR: tried to step %d times, but total_steps is %d (the cycle is over; "
      .. "make total_steps, or epochs * steps_per_epoch, cover every batch)", step, self.total_steps))
  end
  local list, phase, start = phases(self), nil, 0
  for i, p in ipairs(list) do
    if step <= p.end_step or i == #list then
      phase = p
      break
    end
    start = p.end_step
  end
  if phase.end_step == start then
    -- PyTorch divides by zero here
    raise(string.format("OneCycleLR: step %d falls in a phase of no length (pct_start %s, total_steps %d)", step,
      show(self.pct_start), self.total_steps))
  end
  local pct = (step - start) / (phase.end_step - start)
  local updates = {}
  for i, group in ipairs(self.optimizer.param_groups) do
    for _, key in ipairs { phase.lr[1], phase.lr[2], self.cycle_momentum and phase.momentum[1] or nil,
      self.cycle_momentum and phase.momentum[2] or nil } do
      if type(group[key]) ~= "number" then
        raise(string.format("OneCycleLR: parameter group %d has no %s (added after the scheduler was made?)", i, key))
      end
    end
    local u = { lr = anneal(self.anneal_strategy, group[phase.lr[1]], group[phase.lr[2]], pct) }
    if self.cycle_momentum then
      local m = anneal(self.anneal_strategy, group[phase.momentum[1]], group[phase.momentum[2]], pct)
      -- a new betas table, not a write into the group's: the group's
      -- table may be shared with a state_dict copy or an estimate's snapshot
      if self.use_beta1 then u.betas = { m, group.betas[2] } else u.momentum = m end
    end
    updates[i] = u
  end
  return updates
end

-- SequentialLR: the children are schedulers of the same optimizer; the one
-- in force at epoch e is the last whose milestone is <= e, at its own epoch
-- e - milestone (PyTorch restarts it at 0 there). Each child is a closed
-- form, so its values at any epoch do not depend on the ones before.
local function list_of(pred)
  return function(v)
    if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
    for i = 1, #v do
      if not pred(v[i]) then return false end
    end
    return next(v) == nil or #v > 0
  end
end

local SequentialLR = define("SequentialLR", {
  schedulers = { kind = "any", state = false, check = list_of(is_scheduler), expected = "a list of schedulers" },
  milestones = { kind = "any", check = list_of(function(m) return math.type(m) == "integer" and m >= 0 end),
    expected = "a list of non-negative integers" },
})

function SequentialLR:init()
  local list = self.schedulers
  self.schedulers = nil -- the children are self.children; "schedulers" in a state_dict is theirs
  if #list == 0 then raise("SequentialLR: expected at least one scheduler, got none") end
  for i, child in ipairs(list) do
    if child.optimizer ~= self.optimizer then
      raise(string.format("SequentialLR: schedulers[%d] (%s) belongs to another optimizer", i, child.name))
    end
    if child.children then
      raise(string.format("SequentialLR: schedulers[%d] is a SequentialLR; nesting them is not supported", i))
    end
  end
  self.children = list
end

function SequentialLR:check(prefix)
  prefix = prefix or "SequentialLR"
  local m, n = self.milestones, #self.children
  if #m ~= n - 1 then
    raise(string.format("%s: %d scheduler%s need %d milestone%s, got %d: %s", prefix, n, n == 1 and "" or "s", n - 1,
      n == 2 and "" or "s", #m, show(m)))
  end
  for i = 2, #m do
    if m[i] <= m[i - 1] then
      raise(string.format("%s: milestones must increase, got %s", prefix, show(m)))
    end
  end
end

-- SequentialLR's rates are its children's; it keeps no base of its own.
function SequentialLR:attach() end

-- The child in force at epoch, and its own epoch.
local function active(self, epoch)
  local m, k = self.milestones, 1
  while k <= #m and m[k] <= epoch do k = k + 1 end
  return self.children[k], k > 1 and epoch - m[k - 1] or epoch
end

function SequentialLR:schedule(epoch)
  local child, local_epoch = active(self, epoch)
  return child:schedule(local_epoch)
end

-- The child in force shows its epoch and rates, as PyTorch's does.
function SequentialLR:after_apply(epoch)
  local child, local_epoch = active(self, epoch)
  child.last_epoch = local_epoch
  child.last_lr = copy_list(self.last_lr)
end

-- Checks each child's saved state on its own candidate (nothing taken yet).
function SequentialLR:load_children(list, keep, name)
  local n = #self.children
  if type(list) ~= "table" or #list ~= n then
    raise(string.format("%s: schedulers must list the state of %d scheduler%s", name, n, n == 1 and "" or "s"))
  end
  local candidates = {}
  for i, child in ipairs(self.children) do
    candidates[i] = candidate_of(child, list[i], keep, string.format("%s: schedulers[%d] (%s)", name, i, child.name), {})
  end
  return candidates
end

methods.guard(Scheduler, "lr_scheduler", "a scheduler", "sched", is_scheduler,
  { new = true, attach = true, schedule = true })

return {
  StepLR = StepLR,
  CosineAnnealingLR = CosineAnnealingLR,
  LinearLR = LinearLR,
  LambdaLR = LambdaLR,
  OneCycleLR = OneCycleLR,
  SequentialLR = SequentialLR,
}
