-- optim.Adam(params, {lr=0.001, betas={0.9, 0.999}, eps=1e-8,
-- weight_decay=0, amsgrad=false, maximize=false}) and optim.AdamW (the same
-- with decoupled weight decay, default 0.01): torch.optim.Adam/AdamW. State
-- per parameter: exp_avg and exp_avg_sq (2x the parameter bytes), and
-- max_exp_avg_sq with amsgrad (3x), plus the step count.
local core = require "lt.core"
local Optimizer = require "lt.optim.optimizer"

local adam_many = core._optim.adam_many

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

-- One step of params (all with a gradient, on one device) in one engine
-- call; each parameter keeps its own step count (one that got no gradient
-- in some step is behind the others).
local function update_many(self, params, group)
  local state, amsgrad = self.state, group.amsgrad
  local ms, vs, vmaxs, steps = {}, {}, amsgrad and {} or nil, {}
  for i, p in ipairs(params) do
    local s = state[p]
    local m, v = s.exp_avg, s.exp_avg_sq
    if m == nil then
      m = Optimizer.new_buffer(p)
      v = Optimizer.new_buffer(p)
      s.exp_avg, s.exp_avg_sq = m, v
    end
    if amsgrad then
      local vmax = s.max_exp_avg_sq
      if vmax == nil then
        vmax = Optimizer.new_buffer(p)
        s.max_exp_avg_sq = vmax
      end
      vmaxs[i] = vmax
    end
    ms[i], vs[i], steps[i] = m, v, s.step + 1
  end
  local betas = group.betas
  adam_many(self.name, params, true, ms, vs, vmaxs, steps, group.lr, betas[1], betas[2], group.eps,
    group.weight_decay, amsgrad, self.decoupled, group.maximize)
  for i, p in ipairs(params) do state[p].step = steps[i] end
end

Adam.check, Adam.update_many = check, update_many
AdamW.check, AdamW.update_many = check, update_many

return { Adam = Adam, AdamW = AdamW }
