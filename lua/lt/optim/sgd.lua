-- optim.SGD(params, {lr=, momentum=0, dampening=0, weight_decay=0,
-- nesterov=false, maximize=false}): torch.optim.SGD. State: a momentum
-- buffer per parameter when momentum is not 0 (1x the parameter bytes),
-- none otherwise.
local core = require "lt.core"
local Optimizer = require "lt.optim.optimizer"

local sgd_many = core._optim.sgd_many

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

-- One step of params (all with a gradient, on one device) in one engine call.
function SGD:update_many(params, group)
  local state, momentum = self.state, group.momentum
  local bufs, fresh
  if momentum ~= 0 then
    -- PyTorch starts a buffer at the first gradient: the kernel writes it
    -- whole, so it is allocated uninitialised and kept only once written.
    bufs, fresh = {}, {}
    for i, p in ipairs(params) do
      local buf = state[p].momentum_buffer
      fresh[i] = buf == nil
      bufs[i] = buf or Optimizer.new_buffer(p, false)
    end
  end
  sgd_many(self.name, params, true, bufs, fresh, group.lr, momentum, group.dampening, group.weight_decay,
    group.nesterov, group.maximize)
  for i, p in ipairs(params) do
    local s = state[p]
    if fresh and fresh[i] then s.momentum_buffer = bufs[i] end
    s.step = s.step + 1
  end
end

return SGD
