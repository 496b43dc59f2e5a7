-- Learning-rate schedules over an optimizer's parameter groups, by PyTorch's
-- closed forms (torch.optim.lr_scheduler): the rate of epoch e depends only on
-- e and the group's initial rate, so schedules are reproducible and resumable.
--   StepLR(opt, {step_size=, gamma=0.1}):  lr = base * gamma ^ floor(e / step_size)
--   CosineAnnealingLR(opt, {T_max=, eta_min=0}):
--     lr = eta_min + (base - eta_min) * (1 + cos(pi * e / T_max)) / 2
-- sched:step() advances one epoch (call it after opt:step()),
-- sched:get_last_lr() gives the rates now in force, one per group.
local raise = require "lt.user_error"
local methods = require "lt.methods"
local estimate = require "lt.memory_estimate"

local Scheduler = {}
Scheduler.__index = Scheduler

local function define(name, options, closed_form)
  local cls = setmetatable({}, {
    __index = Scheduler,
    __call = function(cls, opt, opts) return cls.new(cls, opt, opts) end,
  })
  cls.__index = cls
  cls.name = name
  cls.options = options
  cls.closed_form = closed_form
  return cls
end

function Scheduler.new(cls, opt, opts)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    raise(string.format("%s: expected an optimizer, got %s", cls.name, type(opt)))
  end
  opts = opts or {}
  local self = setmetatable({ optimizer = opt, last_epoch = 0, base_lrs = {} }, cls)
  for key in pairs(opts) do
    if cls.options[key] == nil then raise(string.format("%s: unknown option '%s'", cls.name, tostring(key))) end
  end
  for key, spec in pairs(cls.options) do
    local value = opts[key]
    if value == nil then value = spec.default end
    if value == nil then raise(string.format("%s: option '%s' is required", cls.name, key)) end
    if type(value) ~= "number" or (spec.check and not spec.check(value)) then
      raise(string.format("%s: invalid %s: %s (%s)", cls.name, key, tostring(value), spec.expected))
    end
    self[key] = value
  end
  for i, group in ipairs(opt.param_groups) do
    -- initial_lr is kept in the group, as PyTorch does, so that a second
    -- scheduler or a resumed run starts from the same base.
    if group.initial_lr == nil then group.initial_lr = group.lr end
    self.base_lrs[i] = group.initial_lr
  end
  self:apply()
  return self
end

-- The rates of epoch for every group, computed by sched (self, or a
-- candidate with loaded values) before any group is changed.
local function rates(sched, epoch)
  local lrs = {}
  for i in ipairs(sched.optimizer.param_groups) do
    local base = sched.base_lrs[i]
    if type(base) ~= "number" then
      raise(string.format("%s: parameter group %d has no base learning rate (added after the scheduler was made?)",
        sched.name, i))
    end
    lrs[i] = sched:closed_form(base, epoch)
  end
  return lrs
end

-- Sets the rates of the epoch now (all computed first: a failure changes no group).
function Scheduler:apply()
  local lrs = rates(self, self.last_epoch)
  for i, group in ipairs(self.optimizer.param_groups) do group.lr = lrs[i] end
  self.last_lr = lrs
end

function Scheduler:step()
  estimate.keep(self) -- put back after lt.memory.estimate
  estimate.keep(self.optimizer.param_groups, 2)
  local lrs = rates(self, self.last_epoch + 1)
  self.last_epoch = self.last_epoch + 1
  for i, group in ipairs(self.optimizer.param_groups) do group.lr = lrs[i] end
  self.last_lr = lrs
end

function Scheduler:get_last_lr()
  return table.move(self.last_lr, 1, #self.last_lr, 1, {})
end

function Scheduler:state_dict()
  local sd = { last_epoch = self.last_epoch, base_lrs = table.move(self.base_lrs, 1, #self.base_lrs, 1, {}) }
  for key in pairs(self.options) do sd[key] = self[key] end
  return sd
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
  if type(sd) ~= "table" then raise(string.format("%s: expected a table (from state_dict()), got %s", name, type(sd))) end
  local keep = opts and opts.keep_options
  local candidate = setmetatable({}, { __index = self })
  local differ = {}
  for key, value in pairs(sd) do
    local spec = self.options[key]
    if key == "last_epoch" then
      if math.type(value) ~= "integer" or value < 0 then
        raise(string.format("%s: last_epoch must be a non-negative integer, got %s", name, tostring(value)))
      end
    elseif key == "base_lrs" then
      local groups = #self.optimizer.param_groups
      if type(value) ~= "table" or #value ~= groups then
        raise(string.format("%s: base_lrs must list %d rate%s, one per parameter group", name, groups,
          groups == 1 and "" or "s"))
      end
      for i = 1, groups do
        if type(value[i]) ~= "number" then
          raise(string.format("%s: base_lrs[%d] must be a number, got %s", name, i, tostring(value[i])))
        end
      end
      value = table.move(value, 1, groups, 1, {})
    elseif spec == nil then
      raise(string.format("%s: unknown key '%s'", name, tostring(key)))
    elseif type(value) ~= "number" or (spec.check and not spec.check(value)) then
      raise(string.format("%s: invalid %s: %s (%s)", name, key, tostring(value), spec.expected))
    else
      if value ~= self[key] then differ[key] = value end
      if keep then value = self[key] end
    end
    candidate[key] = value
  end
  local lrs = rates(candidate, candidate.last_epoch)
  for key, value in pairs(candidate) do self[key] = value end
  for i, group in ipairs(self.optimizer.param_groups) do group.lr = lrs[i] end
  self.last_lr = lrs
  return differ
end

local function positive_integer(v) return math.type(v) == "integer" and v > 0 end

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

methods.guard(Scheduler, "lr_scheduler", "a scheduler", "sched", methods.instance_of(Scheduler), { new = true })

return { StepLR = StepLR, CosineAnnealingLR = CosineAnnealingLR }
