-- optim.SGD(params, {lr=, momentum=0, dampening=0, weight_decay=0,
-- nesterov=false, maximize=false}): torch.optim.SGD. State: a momentum
-- buffer per parameter when momentum is not 0 (1x the parameter bytes),
-- none otherwise.
local core = require "lt.core"
local Optimizer = require "lt.optim.optimizer"

local sgd_calls = core._optim.sgd_calls

local SGD = Optimizer:extend("SGD", {
  lr = Optimizer.required,
  momentum = 0,
  dampening = 0,
  weight_decay = 0,
  nesterov = false,
  maximize = false,
})
SGD.state_tensors = { "momentum_buffer" }

local function check_number(self, group, key)
  local v = group[key]
  if type(v) ~= "number" then self:fail("option '%s' must be a number, got %s", key, type(v)) end
  return v
end

function SGD:check(group)
  if check_number(self, group, "lr") < 0 then self:fail("invalid learning rate: %s", group.lr) end
  if check_number(self, group, "momentum") < 0 then self:fail("invalid momentum value: %s", group.momentum) end
  if check_number(self, group, "weight_decay") < 0 then
    self:fail("invalid weight_decay value: %s", group.weight_decay)
  end
  check_number(self, group, "dampening")
  if group.nesterov and (group.momentum <= 0 or group.dampening ~= 0) then
    self:fail("nesterov momentum requires a momentum and zero dampening (got momentum %s, dampening %s)",
      group.momentum, group.dampening)
  end
end

-- The call for params (all with a gradient, on one device): PyTorch starts
-- a momentum buffer at the first gradient, and the kernel writes it whole,
-- so a new buffer is allocated uninitialised and kept only once written.
function SGD:prepare(params, group, made)
  local state, momentum = self.state, group.momentum
  local bufs, fresh = false, false
  if momentum ~= 0 then
    bufs, fresh = {}, {}
    for i, p in ipairs(params) do
      local s = state[p]
      local buf = s and s.momentum_buffer
      fresh[i] = buf == nil
      if buf == nil then
        buf = Optimizer.new_buffer(p, false)
        made[#made + 1] = buf
      end
      bufs[i] = buf
    end
  end
  return { params, bufs, fresh, group.lr, momentum, group.dampening, group.weight_decay, group.nesterov,
    group.maximize }
end

function SGD:run(calls)
  sgd_calls(self.name, calls)
end

function SGD:commit(call)
  local state, bufs, fresh = self.state, call[2], call[3]
  for i, p in ipairs(call[1]) do
    local s = state[p]
    if s == nil then
      s = { step = 0 }
      state[p] = s
    end
    if fresh and fresh[i] then s.momentum_buffer = bufs[i] end
    s.step = s.step + 1
  end
end

return SGD
