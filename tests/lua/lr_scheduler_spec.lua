-- Learning-rate schedules against PyTorch's own (tests/fixtures/lr, written by
-- tests/fixtures/gen_lr_fixture.py): LinearLR, LambdaLR, OneCycleLR (with the
-- momentum or beta1 it cycles) and SequentialLR, step by step, resumed from
-- a state_dict halfway; their refusals of bad input, each leaving optimizer
-- and scheduler as they were; and optimizers over frozen parameters.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local fixture = dofile("tests/fixtures/lr/lr_fixture.lua")
local optim = lt.optim
local S = optim.lr_scheduler

-- The Lua twins of the generator's LAMBDAS.
local LAMBDAS = {
  decay = function(e) return 0.9 ^ e end,
  warmup = function(e) return math.min(1.0, (e + 1) / 4) end,
  halving = function(e) return 1.0 / (1 + e // 2) end,
}

-- Rates are doubles: PyTorch's recursive forms and lt's closed forms agree to
-- a few ulp.
local REL, FLOOR = 1e-12, 1e-18

local function close(expected, actual, what)
  assert(type(actual) == "number", string.format("%s: expected a number, got %s", what, tostring(actual)))
  assert(math.abs(expected - actual) <= REL * math.abs(expected) + FLOOR,
    string.format("%s: expected %.17g, got %.17g", what, expected, actual))
end

local function copy(t)
  if type(t) ~= "table" then return t end
  local c = {}
  for k, v in pairs(t) do c[k] = copy(v) end
  return c
end

local function make_optimizer(case)
  local groups = {}
  for i, g in ipairs(case.groups) do
    local group = copy(g)
    group.params = { lt.zeros(1):requires_grad_() }
    groups[i] = group
  end
  return optim[case.optimizer](groups, copy(case.optimizer_options))
end

local function make_scheduler(name, opt, options)
  if name == "LambdaLR" then
    local fns = {}
    for i, n in ipairs(options.lambdas) do fns[i] = LAMBDAS[n] end
    return S.LambdaLR(opt, #fns == 1 and fns[1] or fns)
  elseif name == "SequentialLR" then
    local children = {}
    for i, c in ipairs(options.schedulers) do children[i] = make_scheduler(c.scheduler, opt, c.options) end
    return S.SequentialLR(opt, { schedulers = children, milestones = copy(options.milestones) })
  end
  return S[name](opt, copy(options))
end

-- The optimizer and scheduler at epoch against the fixture: every group's
-- lr (also as get_last_lr gives it), and OneCycleLR's momentum or betas.
local function check_epoch(name, case, opt, sched, epoch)
  local lrs, last = case.lrs[epoch + 1], sched:get_last_lr()
  assert.equal(#opt.param_groups, #last, name .. ": get_last_lr length")
  for i, group in ipairs(opt.param_groups) do
    local what = string.format("%s epoch %d group %d", name, epoch, i)
    close(lrs[i], group.lr, what .. " lr")
    assert.equal(group.lr, last[i], what .. ": get_last_lr differs from the group's lr")
    if case.momentum then close(case.momentum[epoch + 1][i], group.momentum, what .. " momentum") end
    if case.betas then
      local betas = case.betas[epoch + 1][i]
      close(betas[1], group.betas[1], what .. " beta1")
      close(betas[2], group.betas[2], what .. " beta2")
    end
  end
  assert.equal(epoch, sched.last_epoch)
end

local CASES = h.sorted_keys(fixture)

describe("learning-rate schedules match PyTorch 2.15 step by step", function()
  for _, name in ipairs(CASES) do
    local case = fixture[name]
    if case.scheduler then
      it(name, function()
        local opt = make_optimizer(case)
        local sched = make_scheduler(case.scheduler, opt, case.options)
        check_epoch(name, case, opt, sched, 0)
        for epoch = 1, case.steps do
          opt:step() -- no gradients: nothing moves, the order is PyTorch's
          sched:step()
          check_epoch(name, case, opt, sched, epoch)
        end
      end)

      it(name .. ", resumed from a state_dict halfway", function()
        local opt = make_optimizer(case)
        local sched = make_scheduler(case.scheduler, opt, case.options)
        local half = case.steps // 2
        for _ = 1, half do sched:step() end
        local sd, osd = sched:state_dict(), opt:state_dict()
        -- a fresh run: its own optimizer and scheduler, then the saved state
        local opt2 = make_optimizer(case)
        local sched2 = make_scheduler(case.scheduler, opt2, case.options)
        opt2:load_state_dict(osd)
        local differ = sched2:load_state_dict(sd)
        assert.same({}, differ)
        check_epoch(name .. " (loaded)", case, opt2, sched2, half)
        for epoch = half + 1, case.steps do
          sched2:step()
          check_epoch(name .. " (loaded)", case, opt2, sched2, epoch)
        end
      end)
    end
  end

  it("SequentialLR's child in force shows its own epoch and rates", function()
    local case = fixture.sequential_warmup_cosine
    local opt = make_optimizer(case)
    local sched = make_scheduler(case.scheduler, opt, case.options)
    local cosine = sched.children[2]
    for _ = 1, 5 do sched:step() end
    assert.equal(2, cosine.last_epoch) -- milestone 3: epoch 5 is the cosine's 2
    assert.same(sched:get_last_lr(), cosine:get_last_lr())
    local sd = sched:state_dict()
    assert.same({ 3 }, sd.milestones)
    assert.equal(5, sd.last_epoch)
    assert.equal(2, #sd.schedulers)
    assert.equal(6, sd.schedulers[2].T_max)
    assert.is_nil(sd.base_lrs)
  end)

  it("LambdaLR takes its function as lr_lambda too, and saves no function", function()
    local p = lt.zeros(1):requires_grad_()
    local opt = optim.SGD({ p }, { lr = 1.0 })
    local sched = S.LambdaLR(opt, { lr_lambda = function(e) return 1 / (e + 1) end })
    sched:step()
    assert.equal(0.5, opt.param_groups[1].lr)
    local sd = sched:state_dict()
    assert.is_nil(sd.lr_lambda)
    assert.same({ last_epoch = 1, base_lrs = { 1.0 } }, sd)
  end)

  it("OneCycleLR with epochs and steps_per_epoch equals the same total_steps", function()
    local function run(options)
      local opt = optim.SGD({ lt.zeros(1):requires_grad_() }, { lr = 0.1, momentum = 0.9 })
      local sched = S.OneCycleLR(opt, options)
      local lrs = { sched:get_last_lr()[1] }
      for _ = 1, 12 do
        sched:step()
        lrs[#lrs + 1] = sched:get_last_lr()[1]
      end
      return lrs, sched
    end
    local a, sched = run({ max_lr = 0.5, epochs = 3, steps_per_epoch = 4 })
    local b = run({ max_lr = 0.5, total_steps = 12 })
    assert.same(b, a)
    assert.equal(12, sched.total_steps)
    assert.equal(12, sched:state_dict().total_steps)
    assert.same(run({ max_lr = 0.5, total_steps = 12, epochs = 3, steps_per_epoch = 4 }), a)
  end)
end)

-- Everything a refused call could have changed: the groups' options (not
-- their parameters) and the scheduler's epoch, rates and children.
local function snapshot(opt, sched)
  local groups = {}
  for i, g in ipairs(opt.param_groups) do
    local c = {}
    for k, v in pairs(g) do
      if k ~= "params" then c[k] = copy(v) end
    end
    groups[i] = c
  end
  local s = nil
  if sched then
    s = { last_epoch = sched.last_epoch, last_lr = copy(sched.last_lr), sd = sched:state_dict() }
    for i, child in ipairs(sched.children or {}) do
      s[i] = { last_epoch = child.last_epoch, last_lr = copy(child.last_lr) }
    end
  end
  return { groups = groups, sched = s }
end

-- fn must fail with every given text in its message, placed at this file's
-- line (the user's), and leave opt and sched as they were.
local function refused(opt, sched, fn, ...)
  local before = snapshot(opt, sched)
  local err = h.fails_cleanly(fn, ...)
  assert(err:find("lr_scheduler_spec.lua:%d+: "), "the error is not placed at the caller's line: " .. err)
  assert.same(before, snapshot(opt, sched))
  return err
end

local function sgd(groups)
  local params = {}
  for i = 1, groups or 1 do params[i] = { params = { lt.zeros(2):requires_grad_() }, lr = 0.1 * i } end
  return optim.SGD(params, { lr = 0.1, momentum = 0.9 })
end

local function adam(groups)
  local params = {}
  for i = 1, groups or 1 do params[i] = { params = { lt.zeros(2):requires_grad_() } } end
  return optim.Adam(params, { lr = 0.01 })
end

describe("schedulers refuse bad input, naming themselves and the values", function()
  it("LinearLR", function()
    local opt = sgd()
    refused(opt, nil, function() S.LinearLR(opt, { start_factor = -0.5 }) end,
      "LinearLR: invalid start_factor: -0.5 (a number in (0, 1])")
    refused(opt, nil, function() S.LinearLR(opt, { start_factor = 0 }) end, "LinearLR: invalid start_factor: 0")
    refused(opt, nil, function() S.LinearLR(opt, { start_factor = 1.5 }) end, "LinearLR: invalid start_factor: 1.5")
    refused(opt, nil, function() S.LinearLR(opt, { end_factor = -0.1 }) end,
      "LinearLR: invalid end_factor: -0.1 (a number in [0, 1])")
    refused(opt, nil, function() S.LinearLR(opt, { end_factor = 2 }) end, "LinearLR: invalid end_factor: 2")
    refused(opt, nil, function() S.LinearLR(opt, { total_iters = 0 }) end,
      "LinearLR: invalid total_iters: 0 (a positive integer)")
    refused(opt, nil, function() S.LinearLR(opt, { total_iters = 2.5 }) end, "LinearLR: invalid total_iters: 2.5")
    refused(opt, nil, function() S.LinearLR(opt, { start_factor = "0.5" }) end,
      'LinearLR: invalid start_factor: "0.5"')
    refused(opt, nil, function() S.LinearLR(opt, { warmup = 3 }) end, "LinearLR: unknown option 'warmup'")
    refused(opt, nil, function() S.LinearLR(5) end, "LinearLR: expected an optimizer, got number")
    assert.is_nil(opt.param_groups[1].initial_lr) -- no refused constructor attached itself
  end)

  it("LinearLR's load_state_dict", function()
    local opt = sgd(2)
    local sched = S.LinearLR(opt, { total_iters = 4 })
    sched:step()
    local sd = sched:state_dict()
    sd.total_iters = -1
    refused(opt, sched, function() sched:load_state_dict(sd) end,
      "LinearLR: load_state_dict: invalid total_iters: -1 (a positive integer)")
    sd.total_iters, sd.base_lrs = 4, { 0.1 }
    refused(opt, sched, function() sched:load_state_dict(sd) end,
      "LinearLR: load_state_dict: base_lrs must list 2 rates, one per parameter group")
    refused(opt, sched, function() sched:load_state_dict({ last_epoch = -2 }) end,
      "LinearLR: load_state_dict: last_epoch must be a non-negative integer, got -2")
  end)

  it("LambdaLR", function()
    local opt = sgd(2)
    local f = function() return 1 end
    refused(opt, nil, function() S.LambdaLR(opt, { f, f, f }) end,
      "LambdaLR: expected 2 lr_lambdas (one per parameter group), got 3")
    refused(opt, nil, function() S.LambdaLR(opt, 5) end,
      "LambdaLR: invalid lr_lambda: 5 (a function of the epoch, or a list of them")
    refused(opt, nil, function() S.LambdaLR(opt, { f, "x" }) end, "LambdaLR: invalid lr_lambda: {function")
    refused(opt, nil, function() S.LambdaLR(opt) end, "LambdaLR: option 'lr_lambda' is required")
    -- failing at epoch 0, inside the constructor: no group keeps an initial_lr
    refused(opt, nil, function() S.LambdaLR(opt, { f, function() return nil end }) end,
      "LambdaLR: lr_lambda of parameter group 2 returned nil at epoch 0 (expected a finite number)")
    assert.is_nil(opt.param_groups[1].initial_lr)
    local sched = S.LambdaLR(opt, function(e)
      if e == 2 then error("no rate for epoch 2", 0) end
      if e == 4 then return 0 / 0 end
      return 0.5 ^ e
    end)
    sched:step()
    refused(opt, sched, function() sched:step() end,
      "LambdaLR: lr_lambda of parameter group 1 failed at epoch 2: no rate for epoch 2")
    assert.equal(1, sched.last_epoch)
    assert.equal(0.05, opt.param_groups[1].lr)
    sched:load_state_dict({ last_epoch = 3, base_lrs = { 0.1, 0.2 } }) -- past the failing epoch
    assert.equal(0.1 * 0.5 ^ 3, opt.param_groups[1].lr)
    refused(opt, sched, function() sched:step() end,
      "LambdaLR: lr_lambda of parameter group 1 returned", "at epoch 4 (expected a finite number)")
    refused(opt, sched, function() sched:load_state_dict({ lr_lambda = f }) end,
      "LambdaLR: load_state_dict: unknown key 'lr_lambda'")
  end)

  it("OneCycleLR's options", function()
    local opt = sgd(2)
    refused(opt, nil, function() S.OneCycleLR(opt, { total_steps = 10 }) end, "OneCycleLR: option 'max_lr' is required")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1 }) end,
      "OneCycleLR: give total_steps, or epochs and steps_per_epoch")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1, epochs = 3 }) end,
      "OneCycleLR: give total_steps, or epochs and steps_per_epoch")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1, total_steps = 0 }) end,
      "OneCycleLR: invalid total_steps: 0 (a positive integer)")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1, epochs = 2.5, steps_per_epoch = 4 }) end,
      "OneCycleLR: invalid epochs: 2.5")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1, total_steps = 10, epochs = 3, steps_per_epoch = 4 }) end,
      "OneCycleLR: total_steps 10 disagrees with epochs * steps_per_epoch = 3 * 4 = 12")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = -1, total_steps = 10 }) end,
      "OneCycleLR: invalid max_lr: -1 (a non-negative number or a list of them")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = { 0.1, 0.2, 0.3 }, total_steps = 10 }) end,
      "OneCycleLR: max_lr lists 3 values, the optimizer has 2 parameter groups")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1, total_steps = 10, max_momentum = { 0.9 } }) end,
      "OneCycleLR: max_momentum lists 1 values, the optimizer has 2 parameter groups")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1, total_steps = 10, pct_start = 1.5 }) end,
      "OneCycleLR: invalid pct_start: 1.5 (a number in [0, 1])")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1, total_steps = 10, anneal_strategy = "exp" }) end,
      'OneCycleLR: invalid anneal_strategy: "exp" ("cos" or "linear")')
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1, total_steps = 10, div_factor = 0 }) end,
      "OneCycleLR: invalid div_factor: 0 (a positive number)")
    refused(opt, nil, function() S.OneCycleLR(opt, { max_lr = 0.1, total_steps = 10, three_phase = 1 }) end,
      "OneCycleLR: invalid three_phase: 1 (a boolean)")
    local a = adam()
    refused(a, nil, function() S.OneCycleLR(a, { max_lr = 0.1, total_steps = 10, max_momentum = 1.0 }) end,
      "OneCycleLR: max_momentum 1.0 for parameter group 1 is beta1 of Adam, which must be below 1")
    -- an optimizer without momentum or betas (lt has none; PyTorch's Adagrad is one)
    local bare = { name = "Bare", defaults = { lr = 0.1 }, param_groups = { { lr = 0.1, params = {} } } }
    refused(bare, nil, function() S.OneCycleLR(bare, { max_lr = 0.1, total_steps = 10 }) end,
      "OneCycleLR: cycle_momentum needs an optimizer with momentum or betas, Bare has neither")
    S.OneCycleLR(bare, { max_lr = 0.1, total_steps = 10, cycle_momentum = false })
    for _, group in ipairs(opt.param_groups) do
      assert.is_nil(group.initial_lr)
      assert.is_nil(group.max_lr)
      assert.equal(0.9, group.momentum)
    end
  end)

  it("OneCycleLR stepped past total_steps, and a phase of no length", function()
    local opt = sgd(2)
    local sched = S.OneCycleLR(opt, { max_lr = { 1.0, 0.5 }, total_steps = 4 })
    for _ = 1, 4 do sched:step() end -- PyTorch allows step total_steps itself
    local err = refused(opt, sched, function() sched:step() end,
      "OneCycleLR: tried to step 5 times, but total_steps is 4")
    assert(err:find("cover every batch", 1, true), err)
    assert.equal(4, sched.last_epoch)
    local sd = sched:state_dict()
    sd.last_epoch = 9
    refused(opt, sched, function() sched:load_state_dict(sd) end,
      "OneCycleLR: tried to step 9 times, but total_steps is 4")
    sd.last_epoch, sd.anneal_strategy = 1, "square"
    refused(opt, sched, function() sched:load_state_dict(sd) end,
      'OneCycleLR: load_state_dict: invalid anneal_strategy: "square"')
    sd.anneal_strategy, sd.max_lr = "cos", { 1.0 }
    refused(opt, sched, function() sched:load_state_dict(sd) end,
      "OneCycleLR: load_state_dict: max_lr lists 1 values, the optimizer has 2 parameter groups")
    sd.max_lr, sd.epochs = 1.0, 2
    refused(opt, sched, function() sched:load_state_dict(sd) end, "OneCycleLR: load_state_dict: unknown key 'epochs'")

    -- pct_start 1: the first phase takes every step; PyTorch divides by zero at step total_steps
    local opt2 = adam()
    local whole = S.OneCycleLR(opt2, { max_lr = 0.1, total_steps = 4, pct_start = 1.0 })
    for _ = 1, 3 do whole:step() end
    close(0.1, opt2.param_groups[1].lr, "pct_start 1, step 3")
    refused(opt2, whole, function() whole:step() end,
      "OneCycleLR: step 4 falls in a phase of no length (pct_start 1.0, total_steps 4)")
  end)

  it("SequentialLR", function()
    local opt = sgd(2)
    local warm = S.LinearLR(opt, { start_factor = 0.1, total_iters = 3 })
    local cosine = S.CosineAnnealingLR(opt, { T_max = 10 })
    local before = { warm = snapshot(opt, warm), cosine = snapshot(opt, cosine) }
    refused(opt, nil, function() S.SequentialLR(opt, { schedulers = { warm, cosine }, milestones = { 3, 6 } }) end,
      "SequentialLR: 2 schedulers need 1 milestone, got 2: {3, 6}")
    refused(opt, nil, function() S.SequentialLR(opt, { schedulers = { warm, cosine }, milestones = {} }) end,
      "SequentialLR: 2 schedulers need 1 milestone, got 0: {}")
    refused(opt, nil, function() S.SequentialLR(opt, { schedulers = { warm, cosine, warm }, milestones = { 5, 3 } }) end,
      "SequentialLR: milestones must increase, got {5, 3}")
    refused(opt, nil, function() S.SequentialLR(opt, { schedulers = { warm, cosine }, milestones = { -1 } }) end,
      "SequentialLR: invalid milestones: {-1} (a list of non-negative integers)")
    refused(opt, nil, function() S.SequentialLR(opt, { schedulers = { warm, cosine }, milestones = { 2.5 } }) end,
      "SequentialLR: invalid milestones: {2.5}")
    refused(opt, nil, function() S.SequentialLR(opt, { schedulers = {}, milestones = {} }) end,
      "SequentialLR: expected at least one scheduler, got none")
    refused(opt, nil, function() S.SequentialLR(opt, { schedulers = { warm, 5 }, milestones = { 3 } }) end,
      "SequentialLR: invalid schedulers: {")
    refused(opt, nil, function() S.SequentialLR(opt, { milestones = { 3 } }) end,
      "SequentialLR: option 'schedulers' is required")
    local other = sgd()
    local foreign = S.StepLR(other, { step_size = 2 })
    refused(opt, nil, function() S.SequentialLR(opt, { schedulers = { warm, foreign }, milestones = { 3 } }) end,
      "SequentialLR: schedulers[2] (StepLR) belongs to another optimizer")
    -- the children were not touched by any refusal
    assert.same(before.warm, snapshot(opt, warm))
    assert.same(before.cosine, snapshot(opt, cosine))

    local seq = S.SequentialLR(opt, { schedulers = { warm, cosine }, milestones = { 3 } })
    refused(opt, nil, function() S.SequentialLR(opt, { schedulers = { seq, cosine }, milestones = { 3 } }) end,
      "SequentialLR: schedulers[1] is a SequentialLR; nesting them is not supported")
    for _ = 1, 4 do seq:step() end
    local sd = seq:state_dict()
    sd.schedulers[2].T_max = 0
    refused(opt, seq, function() seq:load_state_dict(sd) end,
      "SequentialLR: load_state_dict: schedulers[2] (CosineAnnealingLR): invalid T_max: 0")
    sd.schedulers[2].T_max = 10
    sd.schedulers[3] = sd.schedulers[2]
    refused(opt, seq, function() seq:load_state_dict(sd) end,
      "SequentialLR: load_state_dict: schedulers must list the state of 2 schedulers")
    sd.schedulers[3] = nil
    sd.milestones = { 3, 5 }
    refused(opt, seq, function() seq:load_state_dict(sd) end,
      "SequentialLR: load_state_dict: 2 schedulers need 1 milestone, got 2: {3, 5}")
  end)

  it("a step that fails in the middle of the groups changes none", function()
    local opt = sgd(2)
    local sched = S.StepLR(opt, { step_size = 1, gamma = 0.5 })
    sched.base_lrs[2] = nil -- as for a group added after the scheduler
    refused(opt, sched, function() sched:step() end, "StepLR: parameter group 2 has no base learning rate")
  end)
end)

describe("load_state_dict with keep_options", function()
  it("keeps this run's options and reports the saved ones that differ", function()
    local opt = sgd()
    local old = S.SequentialLR(opt, {
      schedulers = { S.LinearLR(opt, { total_iters = 2 }), S.CosineAnnealingLR(opt, { T_max = 4 }) },
      milestones = { 2 } })
    for _ = 1, 3 do old:step() end
    local sd = old:state_dict()
    local opt2 = sgd()
    local new = S.SequentialLR(opt2, {
      schedulers = { S.LinearLR(opt2, { total_iters = 2 }), S.CosineAnnealingLR(opt2, { T_max = 8 }) },
      milestones = { 2 } })
    assert.same({}, new:load_state_dict(sd, { keep_options = true }))
    assert.equal(8, new.children[2].T_max)
    assert.equal(3, new.last_epoch)
    close(0.1 * (1 + math.cos(math.pi / 8)) / 2, opt2.param_groups[1].lr, "cosine of T_max 8 at its epoch 1")

    local a = adam()
    local cycle = S.OneCycleLR(a, { max_lr = 0.1, total_steps = 10, three_phase = false })
    cycle:step()
    local saved = cycle:state_dict()
    saved.three_phase, saved.total_steps = true, 20
    local differ = cycle:load_state_dict(saved, { keep_options = true })
    assert.same({ three_phase = true, total_steps = 20 }, differ)
    assert.is_false(cycle.three_phase) -- false is kept as any other value
    assert.equal(10, cycle.total_steps)
  end)
end)

describe("new schedulers with the rest of lt", function()
  local function warm_cycle(opt)
    return S.SequentialLR(opt, { schedulers = { S.LinearLR(opt, { total_iters = 2 }),
      S.OneCycleLR(opt, { max_lr = 0.1, total_steps = 6 }) }, milestones = { 2 } })
  end

  it("lt.memory.estimate puts back the epoch, rates, betas and children", function()
    local opt = adam()
    local seq = warm_cycle(opt)
    for _ = 1, 3 do seq:step() end
    local before = snapshot(opt, seq)
    lt.memory.estimate(function() seq:step(); seq:step() end)
    assert.same(before, snapshot(opt, seq))
    assert.equal(3, seq.last_epoch)
  end)

  it("a training checkpoint resumes SequentialLR and OneCycleLR exactly", function()
    local training = require "lt.recipes.training"
    local model = lt.nn.Linear(2, 2)
    local opt = optim.Adam(model:parameters(), { lr = 0.01 })
    local seq = warm_cycle(opt)
    for _ = 1, 3 do seq:step() end
    local path = os.tmpname()
    training.save_checkpoint(path, { model = model, optimizer = opt, scheduler = seq, epoch = 3 })
    local model2 = lt.nn.Linear(2, 2)
    local opt2 = optim.Adam(model2:parameters(), { lr = 0.01 })
    local seq2 = warm_cycle(opt2)
    local epoch = training.load_checkpoint(path, { model = model2, optimizer = opt2, scheduler = seq2 })
    os.remove(path)
    assert.equal(3, epoch)
    -- the groups and the schedule's state (an inactive child's last_lr,
    -- which no state_dict holds, may differ)
    local function state(o, sched)
      local snap = snapshot(o, sched)
      for i in ipairs(sched.children) do snap.sched[i] = nil end
      return snap
    end
    for _ = 1, 5 do
      seq:step()
      seq2:step()
      assert.same(state(opt, seq), state(opt2, seq2))
    end
  end)
end)

describe("optimizers over frozen parameters (requires_grad false)", function()
  local case = fixture.frozen_adamw
  local REL32, FLOOR32 = 1e-6, 1.2e-7

  local function make_params()
    local params = {}
    for i, spec in ipairs(case.params) do
      params[i] = h.fixture_tensor(spec)
      if case.requires_grad[i] then params[i]:requires_grad_() end
    end
    return params
  end

  local function set_grads(params, step)
    for i, p in ipairs(params) do
      local g = case.grads[step][i]
      if g then p.grad = h.fixture_tensor(g) end
    end
  end

  local function check_step(opt, params, step, what)
    local after = case.after[step]
    for i, p in ipairs(params) do
      local label = string.format("%s step %d param %d", what, step, i)
      h.fixture_close(after.params[i], p, label, REL32, FLOOR32)
      local expected, state = after.state[i], opt.state[p]
      if next(expected) == nil then
        assert.is_nil(state, label .. ": a frozen parameter has no state")
      else
        assert.equal(expected.step, state.step, label .. " step")
        h.fixture_close(expected.exp_avg, state.exp_avg, label .. " exp_avg", REL32, FLOOR32)
        h.fixture_close(expected.exp_avg_sq, state.exp_avg_sq, label .. " exp_avg_sq", REL32, FLOOR32)
      end
    end
  end

  it("AdamW skips the frozen parameter as PyTorch does: no update, no decay, no state", function()
    local params = make_params()
    local opt = optim.AdamW(params, copy(case.options))
    for step = 1, #case.after do
      set_grads(params, step)
      opt:step()
      check_step(opt, params, step, "AdamW")
      assert.is_nil(params[2].grad)
    end
    h.fixture_close(case.params[2], params[2], "the frozen parameter", 0, 0)
    -- state for the two trainable ones only: 2 buffers x (12 + 2) float32
    assert.equal(2 * (12 + 2) * 4, opt:state_bytes())
  end)

  it("state_dict keeps the frozen parameter's position and round-trips", function()
    local params = make_params()
    local opt = optim.AdamW(params, copy(case.options))
    set_grads(params, 1)
    opt:step()
    local sd = opt:state_dict()
    assert.same(case.group_positions, sd.param_groups[1].params)
    local positions = h.sorted_keys(sd.state)
    assert.same(case.state_positions, positions)
    local copies = {}
    for i, p in ipairs(params) do
      copies[i] = p:detach():clone()
      if case.requires_grad[i] then copies[i]:requires_grad_() end
    end
    local fresh = optim.AdamW(copies, copy(case.options))
    fresh:load_state_dict(sd)
    assert.equal(opt:state_bytes(), fresh:state_bytes())
    for step = 2, #case.after do
      set_grads(copies, step)
      fresh:step()
      check_step(fresh, copies, step, "AdamW (loaded)")
    end
  end)

  it("a frozen embedding trains once unfrozen; zero_grad leaves it without a gradient", function()
    lt.manual_seed(7)
    local emb, lin = lt.nn.Embedding(6, 3), lt.nn.Linear(3, 2)
    emb.weight:requires_grad_(false)
    local params = { emb.weight }
    for _, p in ipairs(lin:parameters()) do params[#params + 1] = p end
    local opt = optim.AdamW(params, { lr = 0.1 })
    local ids = lt.tensor({ 1, 4, 2 }, { dtype = "int64" })
    local frozen = emb.weight:clone()
    local w = lin.weight:clone()
    lin(emb(ids)):sum():backward()
    assert.is_nil(emb.weight.grad)
    opt:step()
    assert.same(frozen:totable(), emb.weight:totable())
    assert.is_nil(opt.state[emb.weight])
    assert.are_not.same(w:totable(), lin.weight:totable())
    assert.equal(2 * (6 + 2) * 4, opt:state_bytes())
    opt:zero_grad({ set_to_none = false })
    assert.is_nil(emb.weight.grad)
    assert.equal(0, lin.weight.grad:abs():sum():item())
    -- unfrozen, as in PyTorch the same optimizer now trains it
    emb.weight:requires_grad_(true)
    opt:zero_grad()
    lin(emb(ids)):sum():backward()
    opt:step()
    assert.are_not.same(frozen:totable(), emb.weight:totable())
    assert.equal(1, opt.state[emb.weight].step)
    assert.equal(2, opt.state[lin.weight].step)
  end)

  it("an all-frozen group and SGD with momentum: no buffers, the step is a no-op for them", function()
    local a, b = lt.ones(4):requires_grad_(), lt.ones(3)
    local opt = optim.SGD({ { params = { a } }, { params = { b }, lr = 1.0 } }, { lr = 0.5, momentum = 0.9 })
    a.grad = lt.ones(4)
    opt:step()
    opt:step()
    assert.same({ 1, 1, 1 }, b:totable())
    assert.is_nil(opt.state[b])
    assert.equal(4 * 4, opt:state_bytes())
    h.near({ -0.45, -0.45, -0.45, -0.45 }, a:totable(), 1e-6) -- 1 - 0.5 - 0.5 * 1.9
  end)

  it("non-leaf tensors and duplicates are still refused", function()
    local a = lt.ones(2):requires_grad_()
    h.fails_cleanly(function() optim.AdamW({ lt.ones(2), a * 3 }) end,
      "AdamW: parameter 2 is not a leaf tensor")
    h.fails_cleanly(function() optim.AdamW({ { params = { a } }, { params = { lt.ones(1), a } } }) end,
      "AdamW: parameter 3 appears in more than one parameter group")
    h.fails_cleanly(function() optim.SGD({ lt.ones(2), "w" }, { lr = 0.1 }) end, "SGD: parameter 2 is not a tensor")
  end)
end)
