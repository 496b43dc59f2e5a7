-- Optimizers against PyTorch's own steps (tests/fixtures/optim, written by
-- tests/fixtures/gen_optim_fixture.py), their state accounting, zero_grad,
-- state_dict round trips, schedules and errors. Gradients are set by hand:
-- no autograd needed.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local fixture = dofile("tests/fixtures/optim/optim_fixture.lua")
local optim = lt.optim

-- float32 agreement: relative 1e-6, with a floor of one float32 ulp at 1
-- for values that cancel to near zero.
local REL, FLOOR = 1e-6, 1.2e-7

local function flat(t)
  return t:reshape(-1):totable()
end

local function assert_close(expected, actual, what)
  assert.equal(#expected, #actual, what .. ": element count")
  for i = 1, #expected do
    local e, a = expected[i], actual[i]
    assert(math.abs(e - a) <= REL * math.abs(e) + FLOOR,
      string.format("%s[%d]: expected %.9g, got %.9g", what, i, e, a))
  end
end

local function make(spec, opts)
  local t = lt.tensor(spec.data, opts):view(spec.shape)
  return t
end

local function make_params(case)
  local params = {}
  for i, spec in ipairs(case.params) do params[i] = make(spec):requires_grad_() end
  return params
end

local function constructor_options(case)
  local o = {}
  for k, v in pairs(case.options) do o[k] = v end
  return o
end

local function make_optimizer(case, params)
  if case.groups then
    local groups = {}
    for i, g in ipairs(case.groups) do
      local group = { params = { params[i] } }
      for k, v in pairs(g) do group[k] = v end
      groups[i] = group
    end
    return optim[case.optimizer](groups, constructor_options(case))
  end
  return optim[case.optimizer](params, constructor_options(case))
end

local function set_grads(case, params, step)
  for i, p in ipairs(params) do p.grad = make(case.grads[step][i]) end
end

local function check_step(name, case, opt, params, step)
  local after = case.after[step]
  for i, p in ipairs(params) do
    assert_close(after.params[i].data, flat(p), string.format("%s step %d param %d", name, step, i))
    local expected_state, state = after.state[i], opt.state[p]
    for key, spec in pairs(expected_state) do
      if key == "step" then
        assert.equal(spec, state.step)
      else
        assert.is_not_nil(state[key], name .. ": missing state " .. key)
        assert_close(spec.data, flat(state[key]), string.format("%s step %d %s %d", name, step, key, i))
      end
    end
  end
end

local CASES = { "sgd_plain", "sgd_momentum", "sgd_nesterov", "adam", "adam_amsgrad", "adamw",
  "adamw_amsgrad", "adam_maximize", "sgd_groups", "adam_groups" }

describe("optimizers match PyTorch 1.13 step by step", function()
  for _, name in ipairs(CASES) do
    it(name, function()
      local case = fixture[name]
      local params = make_params(case)
      local opt = make_optimizer(case, params)
      for step = 1, #case.after do
        set_grads(case, params, step)
        opt:step()
        check_step(name, case, opt, params, step)
      end
    end)
  end

  it("a state_dict loaded into a fresh optimizer continues identically", function()
    for _, name in ipairs { "sgd_momentum", "adam_amsgrad", "adam_groups" } do
      local case = fixture[name]
      local params = make_params(case)
      local opt = make_optimizer(case, params)
      set_grads(case, params, 1)
      opt:step()
      local sd = opt:state_dict()
      -- A fresh optimizer over fresh copies of the parameters after step 1.
      local copies = {}
      for i, p in ipairs(params) do copies[i] = p:detach():clone():requires_grad_() end
      local fresh = make_optimizer(case, copies)
      fresh:load_state_dict(sd)
      for step = 2, #case.after do
        set_grads(case, copies, step)
        fresh:step()
        check_step(name .. " (loaded)", case, fresh, copies, step)
      end
    end
  end)

  it("state_dict has PyTorch's layout and holds copies", function()
    local case = fixture.adam_groups
    local params = make_params(case)
    local opt = make_optimizer(case, params)
    set_grads(case, params, 1)
    opt:step()
    local sd = opt:state_dict()
    assert.same({ 1 }, sd.param_groups[1].params)
    assert.same({ 2 }, sd.param_groups[2].params)
    assert.equal(0.1, sd.param_groups[1].lr)
    assert.equal(0.001, sd.param_groups[2].lr)
    assert.same({ 0.5, 0.9 }, sd.param_groups[2].betas)
    assert.equal(1, sd.state[1].step)
    assert.same(params[2].shape, sd.state[2].exp_avg.shape)
    -- copies: a later step does not change the saved buffers
    local saved = flat(sd.state[1].exp_avg)
    set_grads(case, params, 2)
    opt:step()
    assert.same(saved, flat(sd.state[1].exp_avg))
  end)

  it("skips parameters whose grad is nil", function()
    local a, b = lt.ones(3):requires_grad_(), lt.ones(3):requires_grad_()
    local opt = optim.Adam({ a, b }, { lr = 0.1 })
    a.grad = lt.ones(3)
    opt:step()
    assert.same({ 1, 1, 1 }, b:totable())
    assert.is_nil(opt.state[b])
    assert.is_true(a:totable()[1] < 1)
  end)
end)

describe("learning-rate schedules match PyTorch", function()
  local function run(make_scheduler, case, epochs)
    local p = lt.zeros(1):requires_grad_()
    local opt = optim.SGD({ p }, { lr = case.lr })
    local sched = make_scheduler(opt)
    local lrs = { sched:get_last_lr()[1] }
    for _ = 1, epochs do
      opt:step()
      sched:step()
      lrs[#lrs + 1] = sched:get_last_lr()[1]
      assert.equal(lrs[#lrs], opt.param_groups[1].lr)
    end
    return lrs
  end

  it("StepLR", function()
    local case = fixture.step_lr
    local lrs = run(function(opt)
      return optim.lr_scheduler.StepLR(opt, { step_size = case.step_size, gamma = case.gamma })
    end, case, #case.lrs - 1)
    h.near(case.lrs, lrs, 1e-12)
  end)

  it("CosineAnnealingLR (also past T_max)", function()
    local case = fixture.cosine_lr
    local lrs = run(function(opt)
      return optim.lr_scheduler.CosineAnnealingLR(opt, { T_max = case.T_max, eta_min = case.eta_min })
    end, case, #case.lrs - 1)
    h.near(case.lrs, lrs, 1e-12)
  end)

  it("schedules every group from its own initial lr", function()
    local a, b = lt.zeros(1):requires_grad_(), lt.zeros(1):requires_grad_()
    local opt = optim.SGD({ { params = { a }, lr = 1.0 }, { params = { b } } }, { lr = 0.1 })
    local sched = optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 })
    sched:step()
    h.near({ 0.5, 0.05 }, sched:get_last_lr(), 1e-12)
    h.fails(function() optim.lr_scheduler.StepLR(opt, {}) end, "StepLR: option 'step_size' is required")
    h.fails(function() optim.lr_scheduler.StepLR(opt, { step_size = 0 }) end, "StepLR: invalid step_size: 0")
  end)
end)

describe("optimizer state memory", function()
  local function settled()
    lt.gc()
    return lt.memory.allocated()
  end

  local function params_of(n)
    return { lt.zeros(n, 4):requires_grad_(), lt.zeros(n):requires_grad_() }
  end

  local function step_with_grads(opt, params)
    for _, p in ipairs(params) do p.grad = lt.ones(p.shape) end
    opt:step()
  end

  local param_bytes = (1000 * 4 + 1000) * 4

  it("SGD 0x, SGD with momentum 1x, Adam 2x, amsgrad 3x the parameter bytes", function()
    local cases = {
      { optim.SGD, { lr = 0.1 }, 0 },
      { optim.SGD, { lr = 0.1, momentum = 0.9 }, 1 },
      { optim.Adam, {}, 2 },
      { optim.AdamW, {}, 2 },
      { optim.Adam, { amsgrad = true }, 3 },
    }
    for _, c in ipairs(cases) do
      local params = params_of(1000)
      local opt = c[1](params, c[2])
      assert.equal(0, opt:state_bytes()) -- lazy: nothing before the first step
      step_with_grads(opt, params)
      assert.equal(c[3] * param_bytes, opt:state_bytes())
    end
  end)

  it("state tensors are counted as optimizer memory", function()
    local params = params_of(1000)
    local opt = optim.Adam(params)
    for _, p in ipairs(params) do p.grad = lt.ones(p.shape) end
    lt.gc()
    local before = lt.memory.stats().by_category.optimizer.current
    opt:step()
    -- 16000 and 4000 bytes round up to 16384 and 4096 in the allocator
    assert.equal(before + 2 * (16384 + 4096), lt.memory.stats().by_category.optimizer.current)
    assert.equal("optimizer", lt.memory.category(opt.state[params[1]].exp_avg))
  end)

  it("zero_grad sets grads to nil and gives their memory back", function()
    local params = params_of(1000)
    local opt = optim.SGD(params, { lr = 0.1 })
    local function fill()
      for _, p in ipairs(params) do p.grad = lt.ones(p.shape) end
    end
    fill()
    local with_grads = settled()
    opt:zero_grad()
    assert.is_nil(params[1].grad)
    assert.is_nil(params[2].grad)
    assert.equal(with_grads - (16384 + 4096), settled())
  end)

  it("zero_grad{set_to_none=false} fills zeros and keeps the memory", function()
    local params = params_of(10)
    local opt = optim.SGD(params, { lr = 0.1 })
    for _, p in ipairs(params) do p.grad = lt.ones(p.shape) end
    local before = settled()
    opt:zero_grad({ set_to_none = false })
    assert.equal(before, settled())
    assert.equal(0, params[1].grad:sum():item())
    h.fails(function() opt:zero_grad({ to_none = true }) end, "SGD: zero_grad: unknown option 'to_none'")
  end)
end)

describe("16-bit parameters", function()
  it("float16 Adam with eps 1e-8 stays finite on tiny gradients (the update runs in float32)", function()
    local p = lt.ones(64, { dtype = "float16" }):requires_grad_()
    local opt = optim.Adam({ p }, { lr = 1e-3, eps = 1e-8 })
    for _ = 1, 5 do
      p.grad = lt.full({ 64 }, 1e-4, { dtype = "float16" })
      opt:step()
    end
    for _, v in ipairs(p:float():totable()) do
      assert(v == v and math.abs(v) < 2, "non-finite or exploded value " .. tostring(v))
      assert(v < 1, "the parameter did not move")
    end
    assert.equal("float16", opt.state[p].exp_avg.dtype)
    assert.equal(2 * 64 * 2, opt:state_bytes())
  end)

  it("bfloat16 SGD with momentum agrees with the float32 step rounded once", function()
    local p32 = lt.tensor({ 0.5, -1.25, 2.0 }):requires_grad_()
    local p16 = p32:detach():bfloat16():requires_grad_()
    local o32 = optim.SGD({ p32 }, { lr = 0.125, momentum = 0.5 })
    local o16 = optim.SGD({ p16 }, { lr = 0.125, momentum = 0.5 })
    p32.grad = lt.tensor({ 1.0, 2.0, -4.0 })
    p16.grad = p32.grad:bfloat16()
    o32:step()
    o16:step()
    h.near(p32:totable(), p16:float():totable(), 1e-2)
  end)
end)

describe("big parameters (split over threads, 16-bit in chunks)", function()
  -- Every row of a big parameter holds the same values as one small
  -- parameter: after identical steps every row must equal the small result,
  -- whichever thread or chunk updated it.
  local function check_rows(make_opt, dtype)
    local threads = lt.get_num_threads()
    lt.set_num_threads(2)
    local row = lt.tensor({ 0.5, -1.5, 2.0, 0.25, -0.75, 1.0, 3.0 }, { dtype = dtype })
    local grow = lt.tensor({ 0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7 }, { dtype = dtype })
    local rows = 10007 -- 70049 elements: several tasks, and chunks that end mid-row
    local big = row:view(1, 7):expand(rows, 7):contiguous():requires_grad_()
    local small = row:clone():requires_grad_()
    local ob, os = make_opt({ big }), make_opt({ small })
    for _ = 1, 3 do
      big.grad = grow:view(1, 7):expand(rows, 7):contiguous()
      small.grad = grow:clone()
      ob:step()
      os:step()
    end
    lt.set_num_threads(threads)
    local expected = small:float():totable()
    local got = big:float():totable()
    for r = 1, rows, 997 do
      assert.same(expected, got[r], "row " .. r)
    end
    assert.same(expected, got[rows])
  end

  it("Adam float32", function()
    check_rows(function(p) return optim.Adam(p, { lr = 0.01, amsgrad = true, weight_decay = 0.1 }) end, "float32")
  end)

  it("SGD nesterov float16", function()
    check_rows(function(p) return optim.SGD(p, { lr = 0.1, momentum = 0.9, nesterov = true }) end, "float16")
  end)

  it("AdamW bfloat16", function()
    check_rows(function(p) return optim.AdamW(p, { lr = 0.01 }) end, "bfloat16")
  end)

  it("SGD float64", function()
    check_rows(function(p) return optim.SGD(p, { lr = 0.1, momentum = 0.5, dampening = 0.5, weight_decay = 0.01 }) end,
      "float64")
  end)
end)

describe("optimizer errors", function()
  local function p() return lt.zeros(2):requires_grad_() end

  it("refuses bad options, naming the optimizer and the value", function()
    h.fails_cleanly(function() optim.SGD({ p() }, { lr = -1 }) end, "SGD: invalid learning rate: -1")
    h.fails_cleanly(function() optim.Adam({ p() }, { lr = -0.5 }) end, "Adam: invalid learning rate: -0.5")
    h.fails_cleanly(function() optim.SGD({ p() }) end, "SGD: option 'lr' is required")
    h.fails_cleanly(function() optim.SGD({ p() }, { lr = 0.1, momentum = -0.5 }) end,
      "SGD: invalid momentum value: -0.5")
    h.fails_cleanly(function() optim.SGD({ p() }, { lr = 0.1, nesterov = true }) end,
      "SGD: nesterov momentum requires a momentum and zero dampening")
    h.fails_cleanly(function() optim.Adam({ p() }, { betas = { 1.0, 0.999 } }) end,
      "Adam: invalid beta parameter at index 1: 1.0")
    h.fails_cleanly(function() optim.AdamW({ p() }, { betas = { 0.9, -0.1 } }) end,
      "AdamW: invalid beta parameter at index 2: -0.1")
    h.fails_cleanly(function() optim.Adam({ p() }, { eps = -1e-8 }) end, "Adam: invalid epsilon value")
    h.fails_cleanly(function() optim.Adam({ p() }, { lr = 0.1, momentum = 0.9 }) end,
      "Adam: unknown option 'momentum'")
  end)

  it("refuses empty lists, non-leaf tensors and duplicates (frozen tensors are kept: lr_scheduler_spec)", function()
    h.fails_cleanly(function() optim.SGD({}, { lr = 0.1 }) end, "SGD: optimizer got an empty parameter list")
    h.fails_cleanly(function() optim.Adam({ p(), p() * 2 }) end,
      "Adam: parameter 2 is not a leaf tensor: it is computed from other tensors and never gets a .grad")
    local q = p()
    h.fails_cleanly(function() optim.Adam({ { params = { q } }, { params = { q } } }) end,
      "Adam: parameter 2 appears in more than one parameter group")
    h.fails_cleanly(function() optim.Adam({ p(), 5 }) end, "Adam: parameter 2 is not a tensor")
  end)

  it("a gradient of another shape is refused", function()
    local q = p()
    h.fails_cleanly(function() q.grad = lt.zeros(3) end, "grad: the assigned gradient has shape [3]")
  end)

  it("a bad learning rate set later fails the step with the optimizer's name", function()
    local q = p()
    local opt = optim.SGD({ q }, { lr = 0.1 })
    opt.param_groups[1].lr = -2
    q.grad = lt.ones(2)
    h.fails_cleanly(function() opt:step() end, "SGD: invalid learning rate: -2")
    opt.param_groups[1].lr = 0.1
    opt:step()
    h.near({ -0.1, -0.1 }, q:totable())
  end)

  it("load_state_dict checks groups, positions and buffer shapes before changing anything", function()
    local a, b = lt.zeros(2, 3):requires_grad_(), lt.zeros(4):requires_grad_()
    local opt = optim.SGD({ a, b }, { lr = 0.1, momentum = 0.9 })
    a.grad, b.grad = lt.ones(2, 3), lt.ones(4)
    opt:step()
    local sd = opt:state_dict()
    local two = optim.SGD({ { params = { a } }, { params = { b } } }, { lr = 0.1, momentum = 0.9 })
    h.fails_cleanly(function() two:load_state_dict(sd) end,
      "SGD: load_state_dict: the state dict has 1 parameter groups, the optimizer has 2")
    local one = optim.SGD({ a }, { lr = 0.1, momentum = 0.9 })
    h.fails_cleanly(function() one:load_state_dict(sd) end,
      "SGD: load_state_dict: parameter group 1 has 2 parameters in the state dict, 1 in the optimizer")
    local swapped = optim.SGD({ b, a }, { lr = 0.1, momentum = 0.9 })
    h.fails_cleanly(function() swapped:load_state_dict(sd) end,
      "SGD: load_state_dict: momentum_buffer of parameter 1 has shape [2, 3], expected [4]")
    assert.same({}, swapped.state)
    sd.state[1].exp_avg = lt.zeros(2, 3)
    h.fails_cleanly(function() opt:load_state_dict(sd) end, "SGD: load_state_dict: unknown state 'exp_avg' for parameter 1")
  end)
end)
