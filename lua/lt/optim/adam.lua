-- optim.Adam(params, {lr=0.001, betas={0.9, 0.999}, eps=1e-8,
-- weight_decay=0, amsgrad=false, maximize=false}) and optim.AdamW (the same
-- with decoupled weight decay, default 0.01): torch.optim.Adam/AdamW. State
-- per parameter: exp_avg and exp_avg_sq (2x the parameter bytes), and
-- max_exp_avg_sq with amsgrad (3x), plus the step count.
local core = require "lt.core"
local Optimizer = require "lt.optim.optimizer"

local adam_calls = core._optim.adam_calls

local function define(name, weight_decay, decoupled)
  local cls = Optimizer:extend(name, {
    lr = 1e-3,
    betas = { 0.9, 0.999 },
    eps = 1e-8,
    weight_decay = weight_decay,
    amsgrad = false,
    maximize = false,
  })
  cls.state_tensors = { "exp_avg", "exp_avg_sq", "max_exp_avg_sq" }
  cls.decoupled = decoupled
  return cls
end

local Adam = define("Adam", 0, false)
local AdamW = define("AdamW", 1e-2, true)

local function check_number(self, group, key)
  local v = group[key]
  if type(v) ~= "number" then self:fail("option '%s' must be a number, got %s", key, type(v)) end
  return v
end

local function check(self, group)
  if check_number(self, group, "lr") < 0 then self:fail("invalid learning rate: %s", group.lr) end
  if check_number(self, group, "eps") < 0 then self:fail("invalid epsilon value: %s", group.eps) end
  if check_number(self, group, "weight_decay") < 0 then
    self:fail("invalid weight_decay value: %s", group.weight_decay)
  end
  local betas = group.betas
  if type(betas) ~= "table" or #betas ~= 2 then
    self:fail("betas must be a table of two numbers, got %s", type(betas) == "table" and #betas .. " values" or type(betas))
  end
  for i = 1, 2 do
    local b = betas[i]
    if type(b) ~= "number" or not (b >= 0 and b < 1) then
      self:fail("invalid beta parameter at index %d: %s (expected a number in [0, 1))", i, tostring(b))
    end
  end
end

-- A buffer of state s (nil before the first step), or a new zero-filled one
-- appended to made.
local function buffer(s, key, p, made)
  local t = s and s[key]
  if t == nil then
    t = Optimizer.new_buffer(p)
    made[#made + 1] = t
  end
  return t
end

-- The call for params (all with a gradient, on one device); each parameter
-- keeps its own step count (one that got no gradient in some step is behind
-- the others).
local function prepare(self, params, group, made)
  local state, amsgrad = self.state, group.amsgrad
  local ms, vs, vmaxs, steps = {}, {}, amsgrad and {} or false, {}
  for i, p in ipairs(params) do
    local s = state[p]
    ms[i] = buffer(s, "exp_avg", p, made)
    vs[i] = buffer(s, "exp_avg_sq", p, made)
    if amsgrad then vmaxs[i] = buffer(s, "max_exp_avg_sq", p, made) end
    steps[i] = (s and s.step or 0) + 1
  end
  local betas = group.betas
  return { params, ms, vs, vmaxs, steps, group.lr, betas[1], betas[2], group.eps, group.weight_decay, amsgrad,
    self.decoupled, group.maximize }
end

local function run(self, calls)
  adam_calls(self.name, calls)
end

local function commit(self, call)
  local state, ms, vs, vmaxs, steps = self.state, call[2], call[3], call[4], call[5]
  for i, p in ipairs(call[1]) do
    local s = state[p]
    if s == nil then
      s = {}
      state[p] = s
    end
    s.exp_avg, s.exp_avg_sq, s.step = ms[i], vs[i], steps[i]
    if vmaxs then s.max_exp_avg_sq = vmaxs[i] end
  end
end

for _, cls in ipairs { Adam, AdamW } do
  cls.check, cls.prepare, cls.run, cls.commit = check, prepare, run, commit
end

return { Adam = Adam, AdamW = AdamW }
