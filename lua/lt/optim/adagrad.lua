-- optim.Adagrad(params, {lr=0.01, lr_decay=0, weight_decay=0,
-- initial_accumulator_value=0, eps=1e-10, maximize=false}):
-- torch.optim.Adagrad (dense gradients). State per parameter: sum (1x the
-- parameter bytes, starting at initial_accumulator_value) and the step
-- count. PyTorch makes the state of every parameter in the constructor;
-- lt makes it at a parameter's first step, as for its other optimizers, with
-- the same values (a frozen parameter then holds none).
local core = require "lt.core"
local Optimizer = require "lt.optim.optimizer"

local adagrad_calls = core._optim.adagrad_calls

local Adagrad = Optimizer:extend("Adagrad", {
  lr = 1e-2,
  lr_decay = 0,
  weight_decay = 0,
  initial_accumulator_value = 0,
  eps = 1e-10,
  maximize = false,
})
Adagrad.state_tensors = { "sum" }

local function check_number(self, group, key)
  local v = group[key]
  if type(v) ~= "number" then self:fail("option '%s' must be a number, got %s", key, type(v)) end
  return v
end

function Adagrad:check(group)
  if check_number(self, group, "lr") < 0 then self:fail("invalid learning rate: %s", group.lr) end
  if check_number(self, group, "lr_decay") < 0 then self:fail("invalid lr_decay value: %s", group.lr_decay) end
  if check_number(self, group, "weight_decay") < 0 then
    self:fail("invalid weight_decay value: %s", group.weight_decay)
  end
  if check_number(self, group, "initial_accumulator_value") < 0 then
    self:fail("invalid initial_accumulator_value value: %s", group.initial_accumulator_value)
  end
  if check_number(self, group, "eps") < 0 then self:fail("invalid epsilon value: %s", group.eps) end
end

-- The call for params (all with a gradient, on one device); each parameter
-- keeps its own step count, which its lr_decay reads.
function Adagrad:prepare(params, group, made)
  local state, init = self.state, group.initial_accumulator_value
  local sums, steps = {}, {}
  for i, p in ipairs(params) do
    local s = state[p]
    local sum = s and s.sum
    if sum == nil then
      sum = Optimizer.new_buffer(p, init == 0)
      made[#made + 1] = sum
      if init ~= 0 then sum:fill_(init) end
    end
    sums[i] = sum
    steps[i] = (s and s.step or 0) + 1
  end
  return { params, sums, steps, group.lr, group.lr_decay, group.weight_decay, group.eps,
    group.maximize and true or false }
end

function Adagrad:run(calls)
  adagrad_calls(self.name, calls)
end

function Adagrad:commit(call)
  local state, sums, steps = self.state, call[2], call[3]
  for i, p in ipairs(call[1]) do
    local s = state[p]
    if s == nil then
      s = {}
      state[p] = s
    end
    s.sum, s.step = sums[i], steps[i]
  end
end

return Adagrad
