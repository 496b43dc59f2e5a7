-- Updates that either complete or change nothing: optimizer steps,
-- GradScaler's unscale_ and step, gradient clipping, loading state and
-- converting modules, run under memory limits swept from "no new memory" up
-- to what the update needs. After each failure every parameter, gradient,
-- state buffer and step count is checked bit for bit against a snapshot
-- taken before; with the limit lifted one call must equal a reference that
-- never failed.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local optim, nn = lt.optim, lt.nn

local MiB = 2 ^ 20

local function same(a, b, what)
  assert(a ~= nil and b ~= nil, what .. ": missing")
  assert.equal(a.dtype, b.dtype, what .. ": dtype")
  assert.same(a.shape, b.shape, what .. ": shape")
  assert(a:ne(b):sum():item() == 0, what .. ": values differ")
end

-- Parameters of several sizes (each under 1 MiB: the small pool's 2 MiB
-- segments hold one to a dozen of them, so the limits fail at many points),
-- one float64, one whose gradient is a strided view (the engine makes a
-- contiguous copy of it), one that gets no gradient in the first step.
local SHAPES = {
  { shape = { 175000 } },
  { shape = { 300, 250 }, strided = true },
  { shape = { 225000 } },
  { shape = { 25000 }, dtype = "float64" },
  { shape = { 40, 30 }, late = true },
}

local function make_params()
  lt.manual_seed(7)
  local params = {}
  for i, spec in ipairs(SHAPES) do
    params[i] = lt.randn(table.unpack(spec.shape)):to(spec.dtype or "float32"):requires_grad_()
  end
  return params
end

local function set_grads(params, step)
  lt.manual_seed(100 + step)
  for i, spec in ipairs(SHAPES) do
    local p = params[i]
    if spec.late and step == 1 then
      p.grad = nil
    elseif spec.strided then
      p.grad = lt.randn(spec.shape[2], spec.shape[1]):t()
    else
      p.grad = lt.randn(table.unpack(spec.shape)):to(p.dtype)
    end
  end
end

-- Two groups with different options.
local function groups(params, options)
  local second = {}
  for k, v in pairs(options) do second[k] = v end
  second.params = { params[3], params[4], params[5] }
  second.lr = (options.lr or 1e-3) * 0.5
  return { { params = { params[1], params[2] } }, second }
end

local function snapshot(opt, params)
  local snap = { params = {}, grads = {}, state = {} }
  for i, p in ipairs(params) do
    snap.params[i] = p:detach():clone()
    snap.grads[i] = p.grad and p.grad:clone() or false
    local s = opt.state[p]
    if s then
      local copy = { step = s.step }
      for key, t in pairs(s) do
        if key ~= "step" then copy[key] = t:clone() end
      end
      snap.state[i] = copy
    end
  end
  return snap
end

local function check_state(expected, opt, params, what)
  for i, p in ipairs(params) do
    local s, e = opt.state[p], expected[i]
    if e == nil then
      assert(s == nil, string.format("%s: parameter %d got state", what, i))
    else
      assert(s ~= nil, string.format("%s: parameter %d lost its state", what, i))
      assert.equal(e.step, s.step, what .. ": step count")
      for key, t in pairs(s) do
        if key ~= "step" then same(e[key], t, string.format("%s: parameter %d %s", what, i, key)) end
      end
      for key in pairs(e) do assert(s[key] ~= nil, what .. ": lost " .. key) end
    end
  end
end

local function check_snapshot(snap, opt, params, what)
  for i, p in ipairs(params) do
    same(snap.params[i], p:detach(), string.format("%s: parameter %d", what, i))
    if snap.grads[i] then
      same(snap.grads[i], p.grad, string.format("%s: gradient %d", what, i))
    else
      assert(p.grad == nil, what .. ": a gradient appeared")
    end
  end
  check_state(snap.state, opt, params, what)
end

local function settle()
  lt.gc()
  lt.memory.empty_cache()
end

-- Fills the free bytes of the segments reserved now with ballast, so that
-- any allocation of the call under test needs a new segment.
local function ballast(base)
  local held = {}
  lt.memory.set_limit(base)
  local size = 64 * MiB
  while size >= 512 do
    local ok, t = pcall(lt.empty, size, { dtype = "uint8" })
    if ok then held[#held + 1] = t else size = size // 2 end
  end
  lt.memory.set_limit(nil)
  return held
end

-- Calls fn under limits from the reserved bytes now (their free space
-- filled) upwards in steps of 2 MiB, the small pool's segment, until it
-- succeeds; after each failure check(err) runs with the limit lifted.
-- Returns the number of failures.
local function sweep(fn, check)
  settle()
  local base = lt.memory.reserved()
  local held = ballast(base)
  local failures = 0
  for extra = 0, 128 * MiB, 2 * MiB do
    settle()
    local allocated = lt.memory.allocated()
    lt.memory.set_limit(base + extra)
    local ok, err = pcall(fn)
    lt.memory.set_limit(nil)
    if ok then
      for _, t in ipairs(held) do t:free() end
      return failures
    end
    failures = failures + 1
    assert(tostring(err):find("out of memory on cpu", 1, true), tostring(err))
    check(tostring(err))
    -- The buffers the failed call made are freed at once.
    lt.gc()
    assert.equal(allocated, lt.memory.allocated(), "bytes left behind by the failed call")
  end
  error("the call never succeeded under the limits swept")
end

local CASES = {
  { "SGD", optim.SGD, { lr = 0.1 } },
  { "SGD", optim.SGD, { lr = 0.1, momentum = 0.9 } },
  { "SGD", optim.SGD, { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.01 } },
  { "SGD", optim.SGD, { lr = 0.1, momentum = 0.5, dampening = 0.1, weight_decay = 0.1, maximize = true } },
  { "Adam", optim.Adam, { lr = 0.01 } },
  { "Adam", optim.Adam, { lr = 0.01, weight_decay = 0.1, amsgrad = true } },
  { "AdamW", optim.AdamW, { lr = 0.01 } },
  { "AdamW", optim.AdamW, { lr = 0.01, amsgrad = true, maximize = true } },
  { "RMSprop", optim.RMSprop, { lr = 0.01 } },
  { "RMSprop", optim.RMSprop, { lr = 0.01, momentum = 0.9, centered = true, weight_decay = 0.1 } },
  { "Adagrad", optim.Adagrad, { lr = 0.1, lr_decay = 0.1, initial_accumulator_value = 0.1 } },
}

describe("an optimizer step that runs out of memory", function()
  after_each(function() lt.memory.set_limit(nil) end)

  for _, case in ipairs(CASES) do
    local name, cls, options = case[1], case[2], case[3]
    local label = name
    for k, v in pairs(options) do label = label .. " " .. k .. "=" .. tostring(v) end
    for _, before in ipairs { 0, 1 } do
      it(("changes nothing and a retry equals one step: %s, after %d steps"):format(label, before), function()
        local params, ref_params = make_params(), make_params()
        local opt, ref = cls(groups(params, options), options), cls(groups(ref_params, options), options)
        for step = 1, before do
          set_grads(params, step)
          opt:step()
          set_grads(ref_params, step)
          ref:step()
        end
        set_grads(params, before + 1)
        set_grads(ref_params, before + 1)
        ref:step()
        local snap = snapshot(opt, params)
        local failures = sweep(function() opt:step() end, function(err)
          assert(err:find(name .. ": step: out of memory on cpu", 1, true), err)
          assert(err:find("; the step was not applied (no parameter or state changed)", 1, true), err)
          check_snapshot(snap, opt, params, label)
        end)
        -- At least the strided gradient's contiguous copy fails (in the engine).
        assert.is_true(failures >= 1)
        -- New state fails at more points (after some buffers were made).
        if before == 0 and (options.momentum or name ~= "SGD") then
          -- (one buffer per parameter: SGD's momentum, Adagrad's sum,
          -- plain RMSprop's square_avg)
          local one_buffer = name == "SGD" or name == "Adagrad"
            or (name == "RMSprop" and not options.momentum and not options.centered)
          assert.is_true(failures >= (one_buffer and 2 or 3), "only " .. failures .. " failures")
        end
        local expected = snapshot(ref, ref_params)
        check_snapshot(expected, opt, params, label .. " after the retry")
        -- and the next step goes on from the same state
        set_grads(params, before + 2)
        set_grads(ref_params, before + 2)
        opt:step()
        ref:step()
        check_snapshot(snapshot(ref, ref_params), opt, params, label .. " one step later")
      end)
    end
  end

  it("a bad option in a later group steps no group", function()
    local params = make_params()
    local opt = optim.Adam(groups(params, { lr = 0.01 }), { lr = 0.01 })
    set_grads(params, 2)
    local snap = snapshot(opt, params)
    opt.param_groups[2].lr = -1
    h.fails_cleanly(function() opt:step() end, "Adam: invalid learning rate: -1")
    check_snapshot(snap, opt, params, "bad lr")
  end)
end)

describe("GradScaler and clipping under memory limits", function()
  after_each(function() lt.memory.set_limit(nil) end)

  local function setup()
    local params = make_params()
    local opt = optim.Adam(groups(params, { lr = 0.01 }), { lr = 0.01 })
    set_grads(params, 2)
    return params, opt, lt.amp.GradScaler({ init_scale = 1024 })
  end

  it("a failed unscale_ leaves every gradient scaled and can be called again", function()
    local params, opt, scaler = setup()
    local ref_params, ref_opt, ref_scaler = setup()
    ref_scaler:unscale_(ref_opt)
    local snap = snapshot(opt, params)
    local failures = sweep(function() scaler:unscale_(opt) end, function(err)
      assert(err:find("GradScaler:unscale_: out of memory on cpu", 1, true), err)
      assert(err:find("; no gradient was unscaled", 1, true), err)
      check_snapshot(snap, opt, params, "unscale_")
    end)
    assert.is_true(failures >= 1)
    check_snapshot(snapshot(ref_opt, ref_params), opt, params, "unscale_ after the retry")
  end)

  it("a failed scaler:step steps nothing, and a retry steps once", function()
    local params, opt, scaler = setup()
    local ref_params, ref_opt, ref_scaler = setup()
    assert.is_true(ref_scaler:step(ref_opt))
    ref_scaler:update()
    local snap = snapshot(opt, params)
    local unscaled = snapshot(ref_opt, ref_params).grads
    local failures = sweep(function() assert.is_true(scaler:step(opt)) end, function()
      -- the gradients are as they were or unscaled once (unscale_ went through)
      for i, p in ipairs(params) do
        same(snap.params[i], p:detach(), "parameter " .. i)
        if p.grad:ne(snap.grads[i]):sum():item() ~= 0 then same(unscaled[i], p.grad, "gradient " .. i) end
      end
      check_state(snap.state, opt, params, "scaler:step")
    end)
    assert.is_true(failures >= 3)
    scaler:update()
    check_snapshot(snapshot(ref_opt, ref_params), opt, params, "scaler:step after the retry")
    assert.equal(ref_scaler:get_scale(), scaler:get_scale())
  end)

  it("clip_grad_norm_ scales every gradient or none", function()
    local function make()
      local params = make_params()
      set_grads(params, 2)
      return params
    end
    local params, ref_params = make(), make()
    local ref_norm = nn.utils.clip_grad_norm_(ref_params, 1.0)
    local snap = { params = {}, grads = {} }
    for i, p in ipairs(params) do snap.params[i], snap.grads[i] = p:detach():clone(), p.grad:clone() end
    local norm
    local failures = sweep(function() norm = nn.utils.clip_grad_norm_(params, 1.0) end, function(err)
      assert(err:find("clip_grad_norm_: out of memory on cpu", 1, true), err)
      assert(err:find("; no gradient was scaled", 1, true), err)
      for i, p in ipairs(params) do same(snap.grads[i], p.grad, "gradient " .. i) end
    end)
    assert.is_true(failures >= 1)
    same(ref_norm, norm, "the total norm")
    for i, p in ipairs(params) do same(ref_params[i].grad, p.grad, "clipped gradient " .. i) end
    -- clip_grad_value_ allocates nothing: with no free byte it works at once.
    assert.equal(0, sweep(function() nn.utils.clip_grad_value_(params, 1e-3) end, error))
    assert.is_true(params[1].grad:abs():max():item() <= 1.0001e-3)
  end)
end)

describe("loading and converting change nothing when they fail", function()
  after_each(function() lt.memory.set_limit(nil) end)

  it("optimizer load_state_dict out of memory keeps the old groups and state", function()
    local params = make_params()
    local source = optim.Adam(groups(params, { lr = 0.01, amsgrad = true }), { lr = 0.01, amsgrad = true })
    set_grads(params, 2)
    source:step()
    local sd = source:state_dict()
    local opt = optim.Adam(groups(params, { lr = 0.5, amsgrad = true }), { lr = 0.5, amsgrad = true })
    local failures = sweep(function() opt:load_state_dict(sd) end, function(err)
      assert(err:find("Adam: load_state_dict: out of memory on cpu", 1, true), err)
      assert(err:find("; nothing was loaded", 1, true), err)
      assert.equal(0.5, opt.param_groups[1].lr)
      assert.equal(0.25, opt.param_groups[2].lr)
      assert.is_nil(next(opt.state))
    end)
    assert.is_true(failures >= 3)
    assert.equal(0.01, opt.param_groups[1].lr)
    check_state(snapshot(source, params).state, opt, params, "loaded")
  end)

  it("optimizer load_state_dict checks the loaded options before taking any", function()
    local params = make_params()
    local opt = optim.SGD(groups(params, { lr = 0.1 }), { lr = 0.1 })
    local sd = opt:state_dict()
    sd.param_groups[1].lr = 0.3
    sd.param_groups[2].momentum = -1
    h.fails_cleanly(function() opt:load_state_dict(sd) end,
      "SGD: load_state_dict: parameter group 2: invalid momentum value: -1")
    assert.equal(0.1, opt.param_groups[1].lr)
    sd.param_groups[2] = 5
    h.fails_cleanly(function() opt:load_state_dict(sd) end,
      "SGD: load_state_dict: parameter group 2 must be a table, got number")
  end)

  it("a scheduler's step and load_state_dict change no group when they fail", function()
    local a, b = lt.zeros(2):requires_grad_(), lt.zeros(2):requires_grad_()
    local opt = optim.SGD({ a }, { lr = 1.0 })
    local sched = optim.lr_scheduler.StepLR(opt, { step_size = 1, gamma = 0.5 })
    opt:add_param_group({ params = { b }, lr = 2.0 })
    h.fails_cleanly(function() sched:step() end, "StepLR: parameter group 2 has no base learning rate")
    assert.equal(0, sched.last_epoch)
    assert.equal(1.0, opt.param_groups[1].lr)
    assert.equal(2.0, opt.param_groups[2].lr)
    local sd = sched:state_dict()
    sd.base_lrs = { 1.0, 2.0 }
    sd.last_epoch = 2
    sd.step_size = 0
    h.fails_cleanly(function() sched:load_state_dict(sd) end, "StepLR: load_state_dict: invalid step_size: 0")
    h.fails_cleanly(function() sched:load_state_dict({ last_epoch = 1, bogus = 1 }) end,
      "StepLR: load_state_dict: unknown key 'bogus'")
    assert.equal(0, sched.last_epoch)
    assert.equal(1, sched.step_size)
    sd.step_size = 1
    sched:load_state_dict(sd)
    assert.equal(0.25, opt.param_groups[1].lr)
    assert.equal(0.5, opt.param_groups[2].lr)
  end)

  local function model()
    lt.manual_seed(1)
    return nn.Sequential(nn.Linear(300, 400), nn.ReLU(), nn.Linear(400, 300), nn.BatchNorm1d(300))
  end

  local function tensors(m)
    local out = {}
    for name, t in pairs(m:state_dict()) do out[name] = t:clone() end
    return out
  end

  it("module load_state_dict converting values out of memory copies none", function()
    local m = model()
    local before = tensors(m)
    lt.manual_seed(2)
    local sd = {}
    for name, t in pairs(before) do sd[name] = (lt.randn(table.unpack(t.shape)) * 3):to(t.dtype == "float32" and "float64" or t.dtype) end
    local failures = sweep(function() m:load_state_dict(sd) end, function(err)
      assert(err:find("load_state_dict: out of memory on cpu", 1, true), err)
      assert(err:find("; nothing was loaded", 1, true), err)
      for name, t in pairs(m:state_dict()) do same(before[name], t, name) end
    end)
    assert.is_true(failures >= 1)
    for name, t in pairs(m:state_dict()) do same(sd[name]:to(t.dtype), t, name) end
  end)

  it("module:to out of memory leaves every parameter, gradient and buffer as it was", function()
    local m = model()
    local ps = m:parameters()
    for _, p in ipairs(ps) do p.grad = lt.ones(table.unpack(p.shape)) end
    local before = tensors(m)
    local failures = sweep(function() m:double() end, function(err)
      assert(err:find("to: out of memory on cpu", 1, true), err)
      assert(err:find("; the module was not changed", 1, true), err)
      for name, t in pairs(m:state_dict()) do same(before[name], t, name) end
      for i, p in ipairs(m:parameters()) do
        assert.is_true(rawequal(ps[i], p))
        assert.equal("float32", p.grad.dtype)
      end
    end)
    assert.is_true(failures >= 2)
    for name, t in pairs(m:state_dict()) do
      if before[name].dtype == "float32" then same(before[name]:double(), t, name) end
    end
    for _, p in ipairs(ps) do assert.equal("float64", p.grad.dtype) end
  end)
end)
