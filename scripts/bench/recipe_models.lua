-- The recipes' models and optimizers (scripts/train_fashion_mlp.lua and
-- scripts/train_fashion_cnn.lua build the same inline), for the estimate's
-- benchmark (scripts/bench/estimate.lua) and spec (tests/lua/memory_estimate_spec.lua).
local lt = lt or require "lt"
local nn, optim = lt.nn, lt.optim

local models = {}

-- 784-256-128-10 with SGD momentum.
function models.mlp()
  local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
    nn.Linear(128, 10))
  return model, optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9})
end

-- Two conv3x3-BatchNorm-ReLU-maxpool blocks (32, 64 channels), 3136-128-10,
-- Adam with the recipe's cosine schedule.
function models.cnn()
  local function block(cin, cout)
    return nn.Sequential(nn.Conv2d(cin, cout, 3, {padding = 1}), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))
  end
  local model = nn.Sequential(block(1, 32), block(32, 64), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(),
    nn.Linear(128, 10))
  local opt = optim.Adam(model:parameters(), {lr = 1e-3})
  return model, opt, optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = 5})
end

-- A step's real peak from a settled allocator (garbage collected, peak
-- reset): what an estimate of the step is set beside.
function models.real_peak(step)
  collectgarbage("collect")
  lt.memory.reset_peak()
  step()
  return lt.memory.max_allocated()
end

return models
