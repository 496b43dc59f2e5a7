-- lt.memory.estimate against the real step: for each recipe model's training
-- step (lua/lt/recipes/training.lua's, with the recipes' memory options) and the
-- transformer block of steps.lua, the predicted peak beside the real
-- max_allocated from the same state, on the first step (no gradients or
-- optimizer state yet) and the second, and the time of an estimate beside
-- the step's (medians of 5).
--   lt scripts/bench/estimate.lua [batch ...]      (default: 1 128)
local lt = lt or require "lt"
local training = require "lt.recipes.training"
local steps = dofile("scripts/bench/steps.lua")

local recipe_models = dofile("scripts/bench/recipe_models.lua")
local mlp_recipe, cnn_recipe = recipe_models.mlp, recipe_models.cnn

local function recipe(make, opts)
  return function(batch)
    local model, opt = make()
    return function()
      local x, y = lt.randn(batch, 1, 28, 28), lt.randint(1, 10, {batch})
      training.train_step(model, opt, x, y, opts)
    end
  end
end

local cases = {
  {"MLP recipe (SGD momentum)", recipe(mlp_recipe, {})},
  {"CNN recipe (Adam)", recipe(cnn_recipe, {})},
  {"CNN recipe, --amp bf16", recipe(cnn_recipe, {amp = "bf16"})},
  {"CNN recipe, --checkpoint_segments 2", recipe(cnn_recipe, {checkpoint_segments = 2})},
  {"CNN recipe, --accum 4", recipe(cnn_recipe, {accum = 4})},
  {steps[3].name, steps[3].make},
}

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local function seconds(fn)
  local times = {}
  for i = 1, 5 do
    local t0 = os.clock()
    fn()
    times[i] = os.clock() - t0
  end
  return median(times)
end

local real_peak = recipe_models.real_peak

local batches = {}
for i, a in ipairs(arg or {}) do batches[i] = math.tointeger(tonumber(a)) end
if #batches == 0 then batches = {1, 128} end

print("| step | batch | step | estimated peak | real peak | difference | estimate / step time |")
print("|---|---:|---:|---:|---:|---:|---:|")
for _, case in ipairs(cases) do
  for _, batch in ipairs(batches) do
    lt.manual_seed(0)
    local step = case[2](batch)
    for round = 1, 2 do
      local est = lt.memory.estimate(step)
      local real = real_peak(step)
      local cost = round == 2 and ("%.3f"):format(seconds(function() lt.memory.estimate(step) end) /
        seconds(step)) or ""
      print(("| %s | %d | %d | %d | %d | %+d B | %s |"):format(case[1], batch, round, est.peak, real,
        est.peak - real, cost))
    end
    collectgarbage("collect")
  end
end
