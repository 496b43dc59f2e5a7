-- optim.RMSprop(params, {lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0,
-- momentum=0, centered=false, maximize=false}): torch.optim.RMSprop. State
-- per parameter: square_avg (1x the parameter bytes), momentum_buffer when
-- momentum is not 0 and grad_avg when centered (up to 3x), and the step
-- count. Buffers start at zero, as PyTorch's zeros_like.
local core = require "lt.core"
local Optimizer = require "lt.optim.optimizer"

local rmsprop_calls = core._optim.rmsprop_calls

local RMSprop = Optimizer:extend("RMSprop", {
  lr = 1e-2,
  alpha = 0.99,
  eps = 1e-8,
  weight_decay = 0,
  momentum = 0,
  centered = false,
  maximize = false,
})
RMSprop.state_tensors = { "square_avg", "momentum_buffer", "grad_avg" }

local function check_number(self, group, key)
  local v = group[key]
  if type(v) ~= "number" then self:fail("option '%s' must be a number, got %s", key, type(v)) end
  return v
end

-- PyTorch's checks, and alpha above 1 (PyTorch takes it; the average's
-- weights would change sign).
function RMSprop:check(group)
  if check_number(self, group, "lr") < 0 then self:fail("invalid learning rate: %s", group.lr) end
  if check_number(self, group, "eps") < 0 then self:fail("invalid epsilon value: %s", group.eps) end
  if check_number(self, group, "momentum") < 0 then self:fail("invalid momentum value: %s", group.momentum) end
  if check_number(self, group, "weight_decay") < 0 then
    self:fail("invalid weight_decay value: %s", group.weight_decay)
  end
  local alpha = check_number(self, group, "alpha")
  if not (alpha >= 0 and alpha <= 1) then
    self:fail("invalid alpha value: %s (expected a number in [0, 1])", alpha)
  end
end

-- A buffer of state s (nil before the first step, or made by an earlier
-- step without momentum or centering), or a new zero-filled one appended to
-- made.
local function buffer(s, key, p, made)
  local t = s and s[key]
  if t == nil then
    t = Optimizer.new_buffer(p)
    made[#made + 1] = t
  end
  return t
end

-- The call for params (all with a gradient, on one device).
function RMSprop:prepare(params, group, made)
  local state = self.state
  local momentum, centered = group.momentum ~= 0, group.centered and true or false
  local vs, bufs, gavgs, steps = {}, momentum and {} or false, centered and {} or false, {}
  for i, p in ipairs(params) do
    local s = state[p]
    vs[i] = buffer(s, "square_avg", p, made)
    if momentum then bufs[i] = buffer(s, "momentum_buffer", p, made) end
    if centered then gavgs[i] = buffer(s, "grad_avg", p, made) end
    steps[i] = (s and s.step or 0) + 1
  end
  return { params, vs, bufs, gavgs, group.lr, group.alpha, group.eps, group.weight_decay, group.momentum,
    centered, group.maximize and true or false, steps = steps }
end

function RMSprop:run(calls)
  rmsprop_calls(self.name, calls)
end

function RMSprop:commit(call)
  local state, vs, bufs, gavgs, steps = self.state, call[2], call[3], call[4], call.steps
  for i, p in ipairs(call[1]) do
    local s = state[p]
    if s == nil then
      s = {}
      state[p] = s
    end
    s.square_avg, s.step = vs[i], steps[i]
    if bufs then s.momentum_buffer = bufs[i] end
    if gavgs then s.grad_avg = gavgs[i] end
  end
end

return RMSprop
