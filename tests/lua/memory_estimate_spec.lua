-- lt.memory.estimate: a step's peak predicted op by op through a shadow of
-- the allocator, without allocating it, and everything as it was after.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local training = require "lt.recipes.training"
local optim = lt.optim

local MiB = 2 ^ 20

-- The recipes' models and optimizers, seeded.
local recipe_models = dofile("scripts/bench/recipe_models.lua")
local function mlp_recipe()
  lt.manual_seed(1)
  return recipe_models.mlp()
end
local function cnn_recipe()
  lt.manual_seed(1)
  return recipe_models.cnn()
end

-- The recipes' step (lua/lt/recipes/training.lua) on a fresh batch of n images.
local function recipe_step(model, opt, n, opts)
  return function()
    local x, y = lt.randn(n, 1, 28, 28), lt.randint(1, 10, {n})
    return training.train_step(model, opt, x, y, opts or {})
  end
end

local real_peak = recipe_models.real_peak

local function within(est, real, what)
  local rel = math.abs(est - real) / real
  assert(rel <= 0.01, ("%s: estimated %d bytes, the real step peaked at %d (%.2f%% off)"):format(
    what, est, real, 100 * rel))
end

local function snapshot(model, opt)
  local s = {params = {}, grads = {}, state = {}}
  for i, p in ipairs(model:parameters()) do
    s.params[i] = p:clone()
    s.grads[i] = p.grad and p.grad:clone() or false
    local st = opt.state[p]
    s.state[i] = st and {step = st.step, exp_avg = st.exp_avg and st.exp_avg:clone(),
      momentum_buffer = st.momentum_buffer and st.momentum_buffer:clone()} or false
  end
  s.lr = opt.param_groups[1].lr
  return s
end

local function same(a, b) return a:ne(b):sum():item() == 0 end

local function assert_unchanged(model, opt, s)
  for i, p in ipairs(model:parameters()) do
    assert(same(p, s.params[i]), "parameter " .. i .. " changed")
    if s.grads[i] then
      assert(p.grad and same(p.grad, s.grads[i]), "gradient " .. i .. " not put back")
    else
      assert.is_nil(p.grad, "gradient " .. i .. " appeared")
    end
    local st = opt.state[p]
    if s.state[i] then
      assert.equal(s.state[i].step, st.step)
      if s.state[i].exp_avg then assert(same(st.exp_avg, s.state[i].exp_avg), "exp_avg " .. i .. " changed") end
      if s.state[i].momentum_buffer then
        assert(same(st.momentum_buffer, s.state[i].momentum_buffer), "momentum " .. i .. " changed")
      end
    else
      assert.is_nil(st, "optimizer state " .. i .. " appeared")
    end
  end
  assert.equal(s.lr, opt.param_groups[1].lr)
end

describe("lt.memory.estimate", function()
  it("predicts each recipe step's peak within 1% (first step and steady state, memory options too)", function()
    local cases = {
      {"MLP, SGD momentum", mlp_recipe, {}},
      {"CNN, Adam", cnn_recipe, {}},
      {"CNN, bf16 autocast", cnn_recipe, {amp = "bf16"}},
      {"CNN, 2 checkpoint segments", cnn_recipe, {checkpoint_segments = 2}},
      {"CNN, 2 micro-batches", cnn_recipe, {accum = 2}},
    }
    for _, case in ipairs(cases) do
      for _, n in ipairs {1, 64} do
        local model, opt = case[2]()
        local step = recipe_step(model, opt, n, case[3])
        for round = 1, 2 do -- without, then with gradients and optimizer state
          local what = ("%s, batch %d, step %d"):format(case[1], n, round)
          local est = lt.memory.estimate(step)
          local parts = 0
          for _, bytes in pairs(est.by_category) do parts = parts + bytes end
          assert.equal(est.peak, parts, what .. ": the categories add up to the peak")
          within(est.peak, real_peak(step), what)
        end
      end
    end
  end)

  it("predicts a step on a CUDA device (the simulated one under lt_simdev)", function()
    if lt.cuda.device_count() == 0 then
      pending("skipped: no CUDA device")
      return
    end
    local model = mlp_recipe()
    model:to("cuda:0")
    local opt = optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9})
    local step = function()
      local x, y = lt.randn(32, 1, 28, 28, {device = "cuda:0"}), lt.randint(1, 10, {32}, {device = "cuda:0"})
      return training.train_step(model, opt, x, y, {})
    end
    for round = 1, 2 do
      local est = lt.memory.estimate(step)
      assert.equal("cuda:0", est.device)
      collectgarbage("collect")
      lt.memory.reset_peak("cuda:0")
      step()
      within(est.peak, lt.memory.max_allocated("cuda:0"), "MLP on cuda:0, step " .. round)
    end
  end)

  it("allocates nothing real and leaves parameters, gradients, optimizer state, schedule and RNG as they were", function()
    local model, opt, sched = cnn_recipe()
    local step = recipe_step(model, opt, 16)
    step()
    local before = snapshot(model, opt)
    lt.memory.reset_peak()
    local stats = lt.memory.stats()
    local rng = lt.get_rng_state()
    local est = lt.memory.estimate(function()
      step()
      sched:step()
      model:zero_grad() -- drops the real gradients: they come back
      step()
    end)
    local after = lt.memory.stats()
    assert.equal(stats.allocation.all.allocated, after.allocation.all.allocated, "real allocations")
    assert.equal(stats.allocated_bytes.all.current, after.allocated_bytes.all.current)
    assert.equal(stats.allocated_bytes.all.peak, after.allocated_bytes.all.peak)
    assert.same(rng, lt.get_rng_state())
    assert_unchanged(model, opt, before)
    assert.equal(stats.allocated_bytes.all.current, est.baseline)
    assert.is_true(est.peak > est.baseline)
    assert.equal("cpu", est.device)
    assert.equal(est.peak, est.devices.cpu.peak)
  end)

  it("finds the largest CNN batch that fits under a limit without allocating any batch", function()
    local limit = 48 * MiB
    local model, opt = cnn_recipe()
    lt.memory.set_limit(limit)
    local function fits(n)
      local est = lt.memory.estimate(recipe_step(model, opt, n))
      assert.equal(limit, est.limit)
      if not est.fits then
        assert.truthy(est.oom:find("out of memory on cpu", 1, true))
        assert(est.peak > est.baseline, "the estimate goes on past the failure")
      end
      return est.fits
    end
    local real_allocs = lt.memory.stats().allocation.all.allocated
    local lo, hi = 1, 1024 -- lo fits, hi does not
    assert(fits(lo) and not fits(hi))
    while hi - lo > 1 do
      local mid = (lo + hi) // 2
      if fits(mid) then lo = mid else hi = mid end
    end
    assert.equal(real_allocs, lt.memory.stats().allocation.all.allocated, "the search allocated")
    local ok, err = pcall(function()
      local peak = real_peak(recipe_step(model, opt, lo))
      assert(peak <= limit, ("batch %d peaked at %d, over the limit"):format(lo, peak))
      local ran, msg = pcall(recipe_step(model, opt, hi))
      assert(not ran, ("batch %d ran under the limit its estimate exceeds"):format(hi))
      assert.truthy(tostring(msg):find("out of memory", 1, true))
    end)
    lt.memory.set_limit(nil)
    model:zero_grad()
    assert(ok, err)
    assert.is_true(lo > 8)
  end)

  it("gives tensors made inside shapes without data: item 0, no totable, no save or load, a printed shape", function()
    local real = lt.tensor({3.5, 4})
    local path = os.tmpname()
    local seen = {}
    lt.memory.estimate(function()
      local t = lt.ones(2, 3) * 2
      assert.same({2, 3}, t.shape)
      assert.equal("float32", t.dtype)
      seen.item = t:sum():item()
      seen.real = real[1]:item()
      seen.printed = tostring(t)
      seen.totable = h.fails(function() return t:totable() end)
      seen.save = h.fails(function() lt.save(path, {t = t}) end)
      seen.load = h.fails(function() return lt.load(path) end)
    end)
    os.remove(path)
    assert.equal(0, seen.item)
    assert.equal(3.5, seen.real)
    assert.truthy(seen.printed:find("no data", 1, true))
    assert.truthy(seen.printed:find("size=(2, 3)", 1, true))
    assert.truthy(seen.totable:find("totable: no values inside lt.memory.estimate", 1, true))
    assert.truthy(seen.save:find("inside lt.memory.estimate", 1, true))
    assert.truthy(seen.load:find("inside lt.memory.estimate", 1, true))
    assert.same({3.5, 4}, real:totable())
  end)

  it("refuses, at the next use, a tensor kept past the estimate", function()
    local kept
    lt.memory.estimate(function() kept = lt.randn(4, 4) end)
    local err = h.fails_cleanly(function() return kept + 1 end)
    assert.truthy(err:find("made inside lt.memory.estimate and holds no data", 1, true), err)
    assert.same({4, 4}, kept.shape)
    kept = nil
    collectgarbage("collect")
  end)

  it("raises fn's error after putting everything back", function()
    local model, opt = mlp_recipe()
    local step = recipe_step(model, opt, 8)
    step()
    local before = snapshot(model, opt)
    local allocated = lt.memory.allocated()
    local err = h.fails(function()
      lt.memory.estimate(function()
        step()
        error("boom in the step")
      end)
    end)
    assert.truthy(err:find("boom in the step", 1, true))
    assert_unchanged(model, opt, before)
    collectgarbage("collect")
    assert.equal(allocated, lt.memory.allocated())
    assert.is_true(lt.memory.estimate(step).peak > allocated) -- and it can run again
  end)

  it("rejects what is not a function, and estimates inside estimates", function()
    local err = h.fails(function() lt.memory.estimate(42) end)
    assert.truthy(err:find("lt.memory.estimate: expected a function, got number", 1, true))
    local nested
    lt.memory.estimate(function() nested = h.fails(function() lt.memory.estimate(function() end) end) end)
    assert.truthy(nested:find("estimates do not nest", 1, true))
    assert.is_false(lt.memory._estimating())
  end)
end)
