-- RMSprop and Adagrad against PyTorch's own steps
-- (tests/fixtures/optim/rmsprop_adagrad_fixture.lua, written by
-- tests/fixtures/gen_rmsprop_adagrad_fixture.py), their options and errors
-- (each refused step changes nothing), state_dict round trips, state
-- accounting, frozen parameters, lt.memory.estimate and GradScaler.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local fixture = dofile("tests/fixtures/optim/rmsprop_adagrad_fixture.lua")
local optim = lt.optim

-- As optim_spec: float32 agreement, relative 1e-6 with a floor of one
-- float32 ulp at 1 for values that cancel to near zero.
local REL, FLOOR = 1e-6, 1.2e-7

local function flat(t) return t:reshape(-1):totable() end

local function assert_close(expected, actual, what)
  assert.equal(#expected, #actual, what .. ": element count")
  for i = 1, #expected do
    local e, a = expected[i], actual[i]
    assert(math.abs(e - a) <= REL * math.abs(e) + FLOOR,
      string.format("%s[%d]: expected %.9g, got %.9g", what, i, e, a))
  end
end

local function make(spec) return lt.tensor(spec.data):view(spec.shape) end

local function make_params(case)
  local params = {}
  for i, spec in ipairs(case.params) do params[i] = make(spec):requires_grad_() end
  return params
end

local function make_optimizer(case, params)
  local options = {}
  for k, v in pairs(case.options) do options[k] = v end
  if case.groups then
    local groups = {}
    for i, g in ipairs(case.groups) do
      local group = { params = { params[i] } }
      for k, v in pairs(g) do group[k] = v end
      groups[i] = group
    end
    return optim[case.optimizer](groups, options)
  end
  return optim[case.optimizer](params, options)
end

local function set_grads(case, params, step)
  for i, p in ipairs(params) do p.grad = make(case.grads[step][i]) end
end

local function check_step(name, case, opt, params, step)
  local after = case.after[step]
  for i, p in ipairs(params) do
    assert_close(after.params[i].data, flat(p), string.format("%s step %d param %d", name, step, i))
    local expected, state = after.state[i], opt.state[p]
    for key, spec in pairs(expected) do
      if key == "step" then
        assert.equal(spec, state.step, name .. ": step count")
      else
        assert.is_not_nil(state[key], name .. ": missing state " .. key)
        assert_close(spec.data, flat(state[key]), string.format("%s step %d %s %d", name, step, key, i))
      end
    end
    for key in pairs(state) do
      assert(expected[key] ~= nil, string.format("%s: state %s that PyTorch does not keep", name, key))
    end
  end
end

local CASES = {}
for name in pairs(fixture) do CASES[#CASES + 1] = name end
table.sort(CASES)

describe("RMSprop and Adagrad match PyTorch step by step", function()
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
    for _, name in ipairs { "rmsprop_centered_momentum", "rmsprop_groups", "adagrad_lr_decay",
      "adagrad_initial_accumulator" } do
      local case = fixture[name]
      local params = make_params(case)
      local opt = make_optimizer(case, params)
      set_grads(case, params, 1)
      opt:step()
      local sd = opt:state_dict()
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

  it("state_dict has PyTorch's names", function()
    local case = fixture.rmsprop_centered_momentum
    local params = make_params(case)
    local opt = make_optimizer(case, params)
    set_grads(case, params, 1)
    opt:step()
    local sd = opt:state_dict()
    assert.equal(1, sd.state[1].step)
    for _, key in ipairs { "square_avg", "momentum_buffer", "grad_avg" } do
      assert.same(params[1].shape, sd.state[1][key].shape)
    end
    assert.is_true(sd.param_groups[1].centered)
    local a = make_params(fixture.adagrad_plain)
    local ada = optim.Adagrad(a, { lr = 0.1 })
    set_grads(fixture.adagrad_plain, a, 1)
    ada:step()
    sd = ada:state_dict()
    assert.equal(1, sd.state[2].step)
    assert.same(a[2].shape, sd.state[2].sum.shape)
    assert.equal(0, sd.param_groups[1].initial_accumulator_value)
  end)

  it("float64 and 16-bit parameters follow float32 closely", function()
    for _, name in ipairs { "rmsprop_centered_momentum", "adagrad_weight_decay" } do
      local case = fixture[name]
      for _, dtype in ipairs { "float64", "bfloat16", "float16" } do
        local params = make_params(case)
        for i, p in ipairs(params) do params[i] = p:detach():to(dtype):requires_grad_() end
        local opt = make_optimizer(case, params)
        for step = 1, #case.after do
          for i, p in ipairs(params) do p.grad = make(case.grads[step][i]):to(dtype) end
          opt:step()
        end
        -- float64 against PyTorch's float32: the float32 rounding (the
        -- momentum buffer cancels to 1e-2 in step 2) is the difference.
        local tol = dtype == "float64" and 2e-5 or 3e-2
        for i, p in ipairs(params) do
          h.near(case.after[#case.after].params[i].data, flat(p:to("float32")), tol)
        end
      end
    end
  end)
end)

describe("RMSprop and Adagrad options", function()
  it("have PyTorch's defaults", function()
    local p = lt.zeros(2):requires_grad_()
    local r = optim.RMSprop({ p }).param_groups[1]
    assert.same({ 0.01, 0.99, 1e-8, 0, 0, false, false },
      { r.lr, r.alpha, r.eps, r.weight_decay, r.momentum, r.centered, r.maximize })
    local a = optim.Adagrad({ p }).param_groups[1]
    assert.same({ 0.01, 0, 0, 0, 1e-10, false },
      { a.lr, a.lr_decay, a.weight_decay, a.initial_accumulator_value, a.eps, a.maximize })
  end)

  it("refuse bad values with PyTorch's messages", function()
    local p = lt.zeros(2):requires_grad_()
    local bad = {
      { optim.RMSprop, { lr = -1 }, "RMSprop: invalid learning rate: -1" },
      { optim.RMSprop, { eps = -1e-3 }, "RMSprop: invalid epsilon value: -0.001" },
      { optim.RMSprop, { momentum = -0.5 }, "RMSprop: invalid momentum value: -0.5" },
      { optim.RMSprop, { weight_decay = -1 }, "RMSprop: invalid weight_decay value: -1" },
      { optim.RMSprop, { alpha = -0.1 }, "RMSprop: invalid alpha value: -0.1 (expected a number in [0, 1])" },
      { optim.RMSprop, { alpha = 1.5 }, "RMSprop: invalid alpha value: 1.5" },
      { optim.RMSprop, { alpha = "x" }, "RMSprop: option 'alpha' must be a number, got string" },
      { optim.RMSprop, { betas = { 1, 2 } }, "RMSprop: unknown option 'betas'" },
      { optim.Adagrad, { lr = -0.1 }, "Adagrad: invalid learning rate: -0.1" },
      { optim.Adagrad, { lr_decay = -1 }, "Adagrad: invalid lr_decay value: -1" },
      { optim.Adagrad, { weight_decay = -2 }, "Adagrad: invalid weight_decay value: -2" },
      { optim.Adagrad, { initial_accumulator_value = -1 },
        "Adagrad: invalid initial_accumulator_value value: -1" },
      { optim.Adagrad, { eps = -1 }, "Adagrad: invalid epsilon value: -1" },
    }
    for _, b in ipairs(bad) do
      h.fails_cleanly(function() b[1]({ p }, b[2]) end, b[3])
    end
  end)

  -- A group's option changed after construction (as a schedule changes lr)
  -- is checked by the engine before any write: the step changes nothing.
  local function refused(cls, options, key, value, message)
    local params = { lt.randn(4, 3):requires_grad_(), lt.randn(5):requires_grad_() }
    local opt = cls({ { params = { params[1] } }, { params = { params[2] } } }, options)
    for _, p in ipairs(params) do p.grad = lt.randn(p.shape) end
    opt:step()
    for _, p in ipairs(params) do p.grad = lt.randn(p.shape) end
    local before, state = {}, {}
    for i, p in ipairs(params) do
      before[i] = p:detach():clone()
      state[i] = { step = opt.state[p].step }
      for k, t in pairs(opt.state[p]) do
        if k ~= "step" then state[i][k] = t:clone() end
      end
    end
    opt.param_groups[2][key] = value
    h.fails_cleanly(function() opt:step() end, message)
    for i, p in ipairs(params) do
      assert.equal(0, p:detach():ne(before[i]):sum():item(), "parameter changed")
      assert.equal(state[i].step, opt.state[p].step)
      for k, t in pairs(state[i]) do
        if k ~= "step" then assert.equal(0, opt.state[p][k]:ne(t):sum():item(), k .. " changed") end
      end
    end
  end

  it("a bad option in a later group steps no group", function()
    local full = { lr = 0.01, momentum = 0.9, centered = true }
    refused(optim.RMSprop, full, "lr", -1, "RMSprop: invalid learning rate: -1")
    refused(optim.RMSprop, full, "alpha", 2, "RMSprop: invalid alpha value: 2")
    refused(optim.RMSprop, full, "eps", -1, "RMSprop: invalid epsilon value: -1")
    refused(optim.RMSprop, full, "momentum", -1, "RMSprop: invalid momentum value: -1")
    refused(optim.Adagrad, { lr = 0.1 }, "lr", -1, "Adagrad: invalid learning rate: -1")
    refused(optim.Adagrad, { lr = 0.1 }, "lr_decay", -1, "Adagrad: invalid lr_decay value: -1")
    refused(optim.Adagrad, { lr = 0.1 }, "weight_decay", -1, "Adagrad: invalid weight_decay value: -1")
  end)

  it("load_state_dict refuses bad options and unknown state, loading nothing", function()
    local p = lt.randn(3):requires_grad_()
    local opt = optim.RMSprop({ p }, { momentum = 0.5 })
    p.grad = lt.randn(3)
    opt:step()
    local sd = opt:state_dict()
    sd.param_groups[1].alpha = 3
    h.fails(function() opt:load_state_dict(sd) end, "RMSprop: load_state_dict: parameter group 1: invalid alpha value: 3")
    assert.equal(0.99, opt.param_groups[1].alpha)
    sd = opt:state_dict()
    sd.state[1].exp_avg = lt.zeros(3)
    h.fails(function() opt:load_state_dict(sd) end, "unknown state 'exp_avg' for parameter 1")
  end)
end)

describe("RMSprop and Adagrad state", function()
  it("is allocated lazily, counted as optimizer memory, and skips frozen parameters", function()
    local cases = {
      { optim.RMSprop, {}, 1 },
      { optim.RMSprop, { momentum = 0.9 }, 2 },
      { optim.RMSprop, { momentum = 0.9, centered = true }, 3 },
      { optim.Adagrad, {}, 1 },
      { optim.Adagrad, { initial_accumulator_value = 0.5 }, 1 },
    }
    for _, c in ipairs(cases) do
      local a, frozen = lt.randn(8, 8):requires_grad_(), lt.randn(16)
      local opt = c[1]({ a, frozen }, c[2])
      assert.equal(0, opt:state_bytes())
      a.grad = lt.randn(8, 8)
      opt:step()
      assert.equal(c[3] * 64 * 4, opt:state_bytes())
      assert.is_nil(opt.state[frozen])
      assert.equal(1, opt.state[a].step)
    end
  end)

  it("Adagrad's sum starts at initial_accumulator_value", function()
    local p = lt.zeros(3):requires_grad_()
    local opt = optim.Adagrad({ p }, { lr = 1, initial_accumulator_value = 3 })
    p.grad = lt.tensor({ 1, 0, -1 }, { dtype = "float32" })
    opt:step()
    assert.same({ 4, 3, 4 }, flat(opt.state[p].sum))
    h.near({ -0.5, 0, 0.5 }, flat(p:detach()), 1e-6)
  end)

  it("a parameter without a gradient keeps its step count; lr_decay reads each one's own", function()
    local a, b = lt.ones(2):requires_grad_(), lt.ones(2):requires_grad_()
    local opt = optim.Adagrad({ a, b }, { lr = 1, lr_decay = 1 })
    a.grad = lt.ones(2)
    opt:step()
    a.grad, b.grad = lt.ones(2), lt.ones(2)
    opt:step()
    assert.equal(2, opt.state[a].step)
    assert.equal(1, opt.state[b].step)
    -- b's first step: clr = 1, sum = 1: b = 1 - 1 / (1 + 1e-10)
    h.near({ 0, 0 }, flat(b:detach()), 1e-6)
    -- a: 1 - 1 then - 0.5 / sqrt(2)
    h.near({ -0.5 / math.sqrt(2), -0.5 / math.sqrt(2) }, flat(a:detach()), 1e-6)
  end)

  it("lt.memory.estimate counts the state and changes nothing", function()
    for _, cls in ipairs { optim.RMSprop, optim.Adagrad } do
      local p = lt.randn(256, 256):requires_grad_()
      local opt = cls({ p }, cls == optim.RMSprop and { momentum = 0.9, centered = true } or {})
      p.grad = lt.randn(256, 256)
      local before = p:detach():clone()
      local est = lt.memory.estimate(function() opt:step() end)
      local per = 256 * 256 * 4
      assert(est.peak - est.baseline >= (cls == optim.RMSprop and 3 or 1) * per, cls.name .. ": state not counted")
      assert.equal(0, p:detach():ne(before):sum():item())
      assert.equal(0, opt:state_bytes())
      opt:step()
      assert.is_true(p:detach():ne(before):sum():item() > 0)
    end
  end)

  it("step under GradScaler: unscaled, and skipped on an infinite gradient", function()
    for _, cls in ipairs { optim.RMSprop, optim.Adagrad } do
      local p, q = lt.ones(4):requires_grad_(), lt.ones(4):requires_grad_()
      local opt, ref = cls({ p }, { lr = 0.1 }), cls({ q }, { lr = 0.1 })
      local scaler = lt.amp.GradScaler({ init_scale = 1024 })
      p.grad = lt.tensor({ 1, 2, 3, 4 }, { dtype = "float32" }) * 1024
      q.grad = lt.tensor({ 1, 2, 3, 4 }, { dtype = "float32" })
      scaler:step(opt)
      scaler:update()
      ref:step()
      h.near(flat(q:detach()), flat(p:detach()), 1e-6)
      local before = p:detach():clone()
      p.grad = lt.tensor({ 1, math.huge, 3, 4 }, { dtype = "float32" })
      scaler:step(opt)
      scaler:update()
      assert.equal(0, p:detach():ne(before):sum():item())
      assert.equal(1, opt.state[p].step)
    end
  end)
end)
