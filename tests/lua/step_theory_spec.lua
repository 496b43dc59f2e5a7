-- The step timeline theory (lua/lt/recipes/step_theory.lua) against measured
-- training steps: from shapes and the layers' save rules alone it predicts
-- the exact peak of the deep MLP's step (plain, under autocast, checkpointed)
-- and the CNN's within 2% at every downsampling, which is what makes it a
-- theory worth setting beside the memory-tricks table's measured savings.
local tricks = require "lt.recipes.memory_tricks"
local step_theory = require "lt.recipes.step_theory"

local CNN_BATCH, MLP_BATCH = 16, 64

-- The measured and predicted peaks of one configuration.
local function both(model_name, opts, how, theory_opts)
  local batch = model_name == "cnn" and CNN_BATCH or MLP_BATCH
  how = how or {}
  how.batch = batch
  local measured, state = tricks.training_peak(model_name, opts, nil, how)
  return measured, tricks.theory_peak(model_name, opts, state, theory_opts, batch)
end

local function assert_within(measured, predicted, fraction, what)
  local off = math.abs(predicted - measured) / measured
  assert(off <= fraction, ("%s: measured %d bytes, theory %d (%.2f%% apart)"):format(what, measured, predicted,
    100 * off))
end

local function checkpointed(model_name)
  return { step = function(model, x, target, opt)
    return tricks.train_step(model, x, target, opt, tricks.checkpointed(model_name))
  end }
end

local function ranges(model_name)
  local model = tricks.setup(model_name, nil, 1)
  return step_theory.checkpoint_ranges(model, tricks.checkpoint_segments(model_name, model))
end

describe("the step timeline theory", function()
  it("predicts the deep MLP's training peak to 1 KiB: plain, under autocast and checkpointed", function()
    local measured, predicted = both("mlp", {})
    assert.equal(measured, predicted)
    measured, predicted = both("mlp", {}, { step = tricks.autocast_step }, { autocast = true })
    assert.is_true(math.abs(measured - predicted) <= 1024, ("autocast: %d against %d"):format(measured, predicted))
    measured, predicted = both("mlp", {}, checkpointed("mlp"), { segments = ranges("mlp") })
    assert.is_true(math.abs(measured - predicted) <= 1024, ("checkpointed: %d against %d"):format(measured, predicted))
  end)

  it("predicts the CNN's training peak within 2% at full resolution, pooled and strided", function()
    for _, downsample in ipairs({ "none", "maxpool", "strided" }) do
      local measured, predicted = both("cnn", { downsample = downsample })
      assert_within(measured, predicted, 0.02, downsample)
    end
  end)

  it("predicts the CNN's training peak within 3% under autocast and checkpointed", function()
    local measured, predicted = both("cnn", {}, { step = tricks.autocast_step }, { autocast = true })
    assert_within(measured, predicted, 0.03, "autocast")
    measured, predicted = both("cnn", {}, checkpointed("cnn"), { segments = ranges("cnn") })
    assert_within(measured, predicted, 0.03, "checkpointed")
  end)

  it("splits a Sequential into checkpoint_sequential's leaf ranges", function()
    -- The CNN's 6 children, one per segment: block 1 is leaves 1-4, block 2
    -- leaves 5-8, then Flatten, Linear and ReLU; the last Linear runs as usual.
    assert.same({ { 1, 4 }, { 5, 8 }, { 9, 9 }, { 10, 10 }, { 11, 11 } }, ranges("cnn"))
    assert.same({ { 1, 8 }, { 9, 16 }, { 17, 24 } }, ranges("mlp"))
  end)

  it("names a layer it has no rule for", function()
    local lt = require "lt"
    local model = lt.nn.Sequential(lt.nn.Linear(4, 4), lt.nn.Tanh())
    local ok, err = pcall(step_theory.describe, model, lt.randn(2, 4))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("no rule for a Tanh layer", 1, true))
  end)
end)
