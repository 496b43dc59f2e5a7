-- The multi-tensor optimizer kernels (lt.core._optim.sgd_many, adam_many,
-- unscale_many): bit-identical to the single-tensor steps over mixed shapes,
-- dtypes and step counts, checked before anything is written, and the
-- GradScaler on top of unscale_many. On a machine with CUDA the same checks
-- run on the device against the CPU.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local optim = lt.optim
local O = require("lt.core")._optim

-- Mixed shapes and dtypes, one list entry each; sizes cross the CPU's
-- thread grain (32768) and the CUDA chunk (65536) in places.
local SPECS = {
  { shape = { 3, 4 }, dtype = "float32" },
  { shape = { 7 }, dtype = "float64" },
  { shape = { 2, 3, 5 }, dtype = "bfloat16" },
  { shape = { 70001 }, dtype = "float32" },
  { shape = { 1 }, dtype = "float32" },
  { shape = { 0 }, dtype = "float32" },
  { shape = { 33000 }, dtype = "bfloat16" },
  { shape = { 5, 5 }, dtype = "float64" },
}

local function values(t)
  if t.dtype == "bfloat16" or t.dtype == "float16" then t = t:float() end
  return t:reshape(-1):totable()
end

-- Element-for-element equality (NaN equal to NaN).
local function same(expected, actual, what)
  local e, a = values(expected), values(actual)
  assert.equal(#e, #a, what .. ": element count")
  for i = 1, #e do
    if not (e[i] == a[i] or (e[i] ~= e[i] and a[i] ~= a[i])) then
      error(string.format("%s[%d]: expected %.17g, got %.17g", what, i, e[i], a[i]), 2)
    end
  end
end

-- Two identical sets of tensors: params, gradients for `steps` steps, and
-- zeroed state buffers.
local function make_sets(device, nsteps, seed)
  lt.manual_seed(seed)
  local sets = { {}, {} }
  for i, spec in ipairs(SPECS) do
    local p = lt.randn(table.unpack(spec.shape)):to(spec.dtype)
    local grads = {}
    for s = 1, nsteps do grads[s] = (lt.randn(table.unpack(spec.shape)) * 0.1 * s):to(spec.dtype) end
    for k = 1, 2 do
      local function copy(t) return t:clone():to(device) end
      local function zeros() return lt.zeros(spec.shape, { dtype = spec.dtype, device = device }) end
      local gs = {}
      for s = 1, nsteps do gs[s] = copy(grads[s]) end
      sets[k][i] = { p = copy(p), grads = gs, buf = zeros(), m = zeros(), v = zeros(), vmax = zeros() }
    end
  end
  return sets
end

local function column(set, key, step)
  local list = {}
  for i, e in ipairs(set) do list[i] = step and e[key][step] or e[key] end
  return list
end

local function check_sets(a, b, keys)
  for i = 1, #a do
    for _, key in ipairs(keys) do same(a[i][key], b[i][key], string.format("%s %d (%s)", key, i, a[i].p.dtype)) end
  end
end

local SGD_CASES = {
  { lr = 0.1, momentum = 0, dampening = 0, weight_decay = 0 },
  { lr = 0.05, momentum = 0.9, dampening = 0, weight_decay = 0.01, nesterov = true },
  { lr = 0.02, momentum = 0.5, dampening = 0.25, weight_decay = 0.1, maximize = true },
}

local ADAM_CASES = {
  { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0 },
  { lr = 1e-2, betas = { 0.8, 0.99 }, eps = 1e-6, weight_decay = 0.1, amsgrad = true },
  { lr = 1e-2, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0.01, decoupled = true, amsgrad = true },
  { lr = 3e-3, betas = { 0.9, 0.9 }, eps = 1e-8, weight_decay = 0.02, maximize = true },
}

local function sgd_equal(device)
  for ci, o in ipairs(SGD_CASES) do
    local a, b = table.unpack(make_sets(device, 3, 20 + ci))
    for step = 1, 3 do
      local init = step == 1
      local mom = o.momentum ~= 0
      for _, e in ipairs(a) do
        O.sgd_step("SGD", e.p, e.grads[step], mom and e.buf or nil, init, o.lr, o.momentum, o.dampening,
          o.weight_decay, o.nesterov, o.maximize)
      end
      local inits = {}
      for i = 1, #b do inits[i] = init end
      O.sgd_many("SGD", column(b, "p"), column(b, "grads", step), mom and column(b, "buf") or nil, inits, o.lr,
        o.momentum, o.dampening, o.weight_decay, o.nesterov, o.maximize)
    end
    check_sets(a, b, { "p", "buf" })
  end
end

local function adam_equal(device)
  for ci, o in ipairs(ADAM_CASES) do
    local a, b = table.unpack(make_sets(device, 3, 40 + ci))
    -- Step counts differ per parameter (as when some had no gradient).
    local steps = {}
    for i = 1, #a do steps[i] = i % 3 end
    local name = o.decoupled and "AdamW" or "Adam"
    for step = 1, 3 do
      local now = {}
      for i, e in ipairs(a) do
        now[i] = steps[i] + step
        O.adam_step(name, e.p, e.grads[step], e.m, e.v, o.amsgrad and e.vmax or nil, now[i], o.lr, o.betas[1],
          o.betas[2], o.eps, o.weight_decay, o.amsgrad, o.decoupled, o.maximize)
      end
      O.adam_many(name, column(b, "p"), column(b, "grads", step), column(b, "m"), column(b, "v"),
        o.amsgrad and column(b, "vmax") or nil, now, o.lr, o.betas[1], o.betas[2], o.eps, o.weight_decay, o.amsgrad,
        o.decoupled, o.maximize)
    end
    check_sets(a, b, { "p", "m", "v", "vmax" })
  end
end

describe("multi-tensor optimizer steps", function()
  it("sgd_many equals sgd_step element for element (float32, float64, bfloat16)", function()
    sgd_equal("cpu")
  end)

  it("adam_many equals adam_step element for element, with per-parameter step counts", function()
    adam_equal("cpu")
  end)

  it("the optimizers give the results of one single-tensor step per parameter", function()
    -- Parameters that get gradients in different steps (so their step counts
    -- differ) in one Adam, against one optimizer per parameter.
    lt.manual_seed(3)
    local shapes = { { 4, 3 }, { 5 }, { 2, 2, 2 } }
    local together, alone, opts = {}, {}, {}
    for i, shape in ipairs(shapes) do
      local p = lt.randn(table.unpack(shape))
      together[i] = p:clone():requires_grad_()
      alone[i] = p:clone():requires_grad_()
      opts[i] = optim.AdamW({ alone[i] }, { lr = 0.01, amsgrad = true })
    end
    local opt = optim.AdamW(together, { lr = 0.01, amsgrad = true })
    for step = 1, 4 do
      for i, shape in ipairs(shapes) do
        together[i].grad, alone[i].grad = nil, nil
        if (step + i) % 3 ~= 0 then
          local g = lt.randn(table.unpack(shape))
          together[i].grad, alone[i].grad = g:clone(), g:clone()
        end
      end
      opt:step()
      for i = 1, #opts do opts[i]:step() end
    end
    for i = 1, #shapes do
      same(alone[i], together[i], "param " .. i)
      assert.equal(opts[i].state[alone[i]].step, opt.state[together[i]].step)
      same(opts[i].state[alone[i]].exp_avg, opt.state[together[i]].exp_avg, "exp_avg " .. i)
    end
    assert.is_true(opt.state[together[1]].step ~= opt.state[together[2]].step)
  end)

  it("a group on mixed dtypes steps each parameter as its own dtype", function()
    local a = lt.tensor({ 1.0, 2.0 }):requires_grad_()
    local b = lt.tensor({ 1.0, 2.0 }, { dtype = "float64" }):requires_grad_()
    local c = lt.tensor({ 1.0, 2.0 }, { dtype = "bfloat16" }):requires_grad_()
    local opt = optim.SGD({ a, b, c }, { lr = 0.5, momentum = 0.9 })
    a.grad, b.grad, c.grad = lt.ones(2), lt.ones(2, { dtype = "float64" }), lt.ones(2, { dtype = "bfloat16" })
    opt:step()
    h.near({ 0.5, 1.5 }, a:totable())
    h.near({ 0.5, 1.5 }, b:totable())
    h.near({ 0.5, 1.5 }, c:float():totable())
    assert.equal("bfloat16", opt.state[c].momentum_buffer.dtype)
    assert.equal(2 * 4 + 2 * 8 + 2 * 2, opt:state_bytes())
  end)
end)

describe("multi-tensor step errors", function()
  local function lists()
    local p = { lt.zeros(2), lt.zeros(3), lt.zeros(4) }
    local g = { lt.ones(2), lt.ones(3), lt.ones(4) }
    return p, g
  end

  local function unchanged(list)
    for i, t in ipairs(list) do
      for _, v in ipairs(t:totable()) do assert.equal(0, v, "tensor " .. i .. " was modified") end
    end
  end

  local function sgd(p, g, bufs, lr)
    O.sgd_many("SGD", p, g, bufs, nil, lr or 0.1, bufs and 0.9 or 0, 0, 0, false, false)
  end

  local function adam(p, g, m, v, steps)
    O.adam_many("Adam", p, g, m, v, nil, steps, 0.1, 0.9, 0.999, 1e-8, 0, false, false, false)
  end

  it("name the op and the index of a mismatched shape or dtype, and modify nothing", function()
    local p, g = lists()
    g[2] = lt.ones(5)
    h.fails_cleanly(function() sgd(p, g) end,
      "SGD: parameter 2: the gradient has shape [5] but the parameter has shape [3]")
    unchanged(p)
    g[2] = lt.ones(3, { dtype = "float64" })
    h.fails_cleanly(function() sgd(p, g) end,
      "SGD: parameter 2: the gradient has dtype float64 but the parameter has dtype float32")
    unchanged(p)
    g[2] = lt.ones(3)
    local bufs = { lt.zeros(2), lt.zeros(3), lt.zeros(2) }
    h.fails_cleanly(function() sgd(p, g, bufs) end,
      "SGD: parameter 3: the momentum buffer has shape [2] but the parameter has shape [4]")
    unchanged(p)
    unchanged(bufs)
    local m, v = { lt.zeros(2), lt.zeros(3), lt.zeros(4) }, { lt.zeros(2), lt.zeros(3), lt.zeros(4) }
    v[3] = lt.zeros(4, { dtype = "bfloat16" })
    h.fails_cleanly(function() adam(p, g, m, v, { 1, 1, 1 }) end,
      "Adam: parameter 3: exp_avg_sq has dtype bfloat16 but the parameter has dtype float32")
    v[3] = lt.zeros(4)
    h.fails_cleanly(function() adam(p, g, m, v, { 1, 0, 1 }) end,
      "Adam: parameter 2: invalid step count 0 (steps count from 1)")
    unchanged(p)
    unchanged(m)
    unchanged(v)
    local ints = { lt.zeros(2), lt.zeros(3, { dtype = "int64" }) }
    h.fails_cleanly(function() sgd(ints, { lt.ones(2), lt.ones(3, { dtype = "int64" }) }) end,
      "SGD: parameter 2: parameters must be floating point, got int64")
    unchanged(ints)
  end)

  it("refuse empty lists, non-tensors, lists of other lengths and bad options", function()
    local p, g = lists()
    h.fails_cleanly(function() sgd({}, {}) end, "SGD: expected at least one tensor, got an empty list")
    h.fails_cleanly(function() sgd({ p[1], 5 }, g) end, "SGD: params[2] is not a tensor (got number)")
    h.fails_cleanly(function() sgd(p, { g[1], g[2], "x" }) end, "SGD: grads[3] is not a tensor (got string)")
    h.fails_cleanly(function() sgd(p, { g[1] }) end, "SGD: grads has 1 entries but there are 3 parameters")
    h.fails_cleanly(function() sgd(p, g, nil, -1) end, "SGD: invalid learning rate: -1")
    h.fails_cleanly(function() sgd(p, true) end, "SGD: parameter 1 has no gradient")
    h.fails_cleanly(function() sgd(p, g, { lt.zeros(2) }) end, "SGD: momentum_buffers has 1 entries")
    h.fails_cleanly(function() adam(p, g, { lt.zeros(2), lt.zeros(3), lt.zeros(4) },
      { lt.zeros(2), lt.zeros(3), lt.zeros(4) }, { 1, 1 }) end, "Adam: steps has 2 entries but there are 3")
    h.fails_cleanly(function() O.unscale_many({}, lt.zeros(1), 0.5) end,
      "unscale_many: expected at least one tensor, got an empty list")
    unchanged(p)
  end)

  it("refuse a parameter listed twice or sharing memory with a buffer", function()
    local p, g = lists()
    h.fails_cleanly(function() sgd({ p[1], p[2], p[1] }, { g[1], g[2], lt.ones(2) }) end,
      "SGD: parameter 3 (the parameter) and parameter 1 (the parameter) share memory")
    local bufs = { lt.zeros(2), p[2], lt.zeros(4) }
    h.fails_cleanly(function() sgd(p, g, bufs) end, "SGD: parameter 2 (the parameter) and parameter 2 (its momentum buffer) share memory")
    local flat = lt.zeros(10)
    local views = { flat:narrow(1, 1, 4), flat:narrow(1, 4, 3) } -- overlap at element 4
    h.fails(function() sgd(views, { lt.ones(4), lt.ones(3) }) end, "share memory")
    unchanged({ flat })
    local apart = { flat:narrow(1, 1, 4), flat:narrow(1, 5, 3) }
    sgd(apart, { lt.ones(4), lt.ones(3) })
    h.near({ -0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1, 0, 0, 0 }, flat:totable())
    local g1 = lt.ones(3)
    h.fails(function() O.unscale_many({ g1, g1 }, lt.zeros(1), 0.5) end,
      "unscale_many: gradient 2 (a gradient) and gradient 1 (a gradient) share memory")
    assert.same({ 1, 1, 1 }, g1:totable())
  end)

  it("unscale_many checks found_inf and the gradients' dtypes", function()
    local g = lt.ones(3)
    h.fails_cleanly(function() O.unscale_many({ g }, lt.zeros(2), 0.5) end,
      "unscale_many: found_inf must be a one-element float32 tensor, got 2 elements of float32")
    h.fails_cleanly(function() O.unscale_many({ g }, lt.zeros(1, { dtype = "float64" }), 0.5) end,
      "found_inf must be a one-element float32 tensor, got 1 element of float64")
    h.fails_cleanly(function() O.unscale_many({ g, lt.ones(2, { dtype = "int64" }) }, lt.zeros(1), 0.5) end,
      "unscale_many: gradient 2: gradients must be floating point, got int64")
    h.fails_cleanly(function() O.unscale_many({ g, lt.ones(1):expand(3) }, lt.zeros(1), 0.5) end,
      "unscale_many: gradient 2: unsupported operation: more than one element")
    assert.same({ 1, 1, 1 }, g:totable())
  end)
end)

describe("unscale_many", function()
  it("multiplies by inv_scale as mul_ does, for every floating dtype", function()
    lt.manual_seed(5)
    local inv = 1 / 65536
    for _, dtype in ipairs { "float32", "float64", "bfloat16", "float16" } do
      local base = (lt.randn(40001) * 1000):to(dtype)
      local a, b = base:clone(), base:clone()
      a:mul_(inv)
      local found = lt.zeros(1)
      O.unscale_many({ b }, found, inv)
      same(a, b, dtype)
      assert.equal(0, found:item())
    end
  end)

  it("sets found_inf for inf, -inf and NaN, and never resets it", function()
    for _, bad in ipairs { math.huge, -math.huge, 0 / 0 } do
      for _, dtype in ipairs { "float32", "float64", "bfloat16" } do
        local big = lt.ones(50000, { dtype = dtype })
        big[40000] = bad
        local found = lt.zeros(1)
        O.unscale_many({ lt.ones(3, { dtype = dtype }), big }, found, 0.5)
        assert.equal(1, found:item(), tostring(bad) .. " " .. dtype)
        assert.equal(0.5, big[1]:item())
      end
    end
    local found = lt.ones(1)
    local g = lt.tensor({ 1.0, 4.0 })
    O.unscale_many({ g }, found, 0.25)
    assert.equal(1, found:item())
    assert.same({ 0.25, 1.0 }, g:totable())
  end)

  it("unscales a strided gradient in place", function()
    local base = lt.tensor({ { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } })
    local t = base:t()
    local found = lt.zeros(1)
    O.unscale_many({ t }, found, 0.5)
    assert.same({ { 0.5, 1.0, 1.5 }, { 2.0, 2.5, 3.0 } }, base:totable())
    assert.equal(0, found:item())
  end)
end)

describe("GradScaler over unscale_many", function()
  local function params(n)
    local ps = {}
    for i = 1, n do ps[i] = lt.tensor({ 1.0, 2.0, 3.0 }):requires_grad_() end
    return ps
  end

  it("skips the step when one gradient of many is not finite, and backs off", function()
    local ps = params(4)
    local opt = optim.SGD(ps, { lr = 0.1 })
    local scaler = lt.amp.GradScaler { init_scale = 4.0 }
    for i, p in ipairs(ps) do p.grad = lt.full({ 3 }, i == 3 and math.huge or 8.0) end
    assert.is_false(scaler:step(opt))
    scaler:update()
    assert.equal(2.0, scaler:get_scale())
    for _, p in ipairs(ps) do assert.same({ 1, 2, 3 }, p:totable()) end
    for _, p in ipairs(ps) do p.grad = lt.full({ 3 }, 2.0) end
    assert.is_true(scaler:step(opt))
    scaler:update()
    for _, p in ipairs(ps) do h.near({ 0.9, 1.9, 2.9 }, p:totable()) end
  end)

  it("ignores parameters without gradients and checks every optimizer on update", function()
    local a, b = params(2), params(1)
    local oa, ob = optim.SGD(a, { lr = 0.1 }), optim.Adam(b)
    local scaler = lt.amp.GradScaler { init_scale = 2.0 }
    a[2].grad = lt.full({ 3 }, 2.0)
    b[1].grad = lt.tensor({ 1.0, 0 / 0, 1.0 })
    scaler:unscale_(oa)
    scaler:unscale_(ob)
    h.near({ 1, 1, 1 }, a[2].grad:totable())
    assert.is_true(scaler:step(oa))
    assert.is_false(scaler:step(ob))
    scaler:update()
    assert.equal(1.0, scaler:get_scale())
    assert.is_nil(a[1].grad)
    -- unscale_ then update with no step still sees the inf
    b[1].grad = lt.tensor({ math.huge, 1.0, 1.0 })
    scaler:unscale_(ob)
    scaler:update()
    assert.equal(0.5, scaler:get_scale())
  end)

  it("refuses float16 gradients before unscaling anything", function()
    local p = lt.tensor({ 2.0 }):requires_grad_()
    local q = lt.tensor({ 1.0 }, { dtype = "float16" }):requires_grad_()
    local opt = optim.SGD({ p, q }, { lr = 0.1 })
    p.grad, q.grad = lt.tensor({ 8.0 }), lt.tensor({ 1.0 }, { dtype = "float16" })
    local scaler = lt.amp.GradScaler { init_scale = 8.0 }
    h.fails(function() scaler:unscale_(opt) end, "GradScaler:unscale_: Attempting to unscale FP16 gradients.")
    assert.same({ 8.0 }, p.grad:totable())
  end)
end)

describe("multi-tensor steps on CUDA", function()
  if not lt.cuda.is_available() then return end

  -- The same lists stepped on the CPU and on the device: equal bits.
  local function device_equal(run_cpu, run_cuda, keys)
    local cpu_sets, cuda_sets = run_cpu(), run_cuda()
    for i = 1, #cpu_sets do
      for _, key in ipairs(keys) do
        same(cpu_sets[i][key], cuda_sets[i][key]:to("cpu"), string.format("%s %d", key, i))
      end
    end
  end

  it("sgd_many and adam_many on CUDA equal the CPU's results", function()
    for ci, o in ipairs(SGD_CASES) do
      local function run(device)
        local set = make_sets(device, 3, 60 + ci)[1]
        for step = 1, 3 do
          local inits = {}
          for i = 1, #set do inits[i] = step == 1 end
          O.sgd_many("SGD", column(set, "p"), column(set, "grads", step), o.momentum ~= 0 and column(set, "buf") or nil,
            inits, o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.maximize)
        end
        return set
      end
      device_equal(function() return run("cpu") end, function() return run("cuda") end, { "p", "buf" })
    end
    for ci, o in ipairs(ADAM_CASES) do
      local function run(device)
        local set = make_sets(device, 3, 80 + ci)[1]
        for step = 1, 3 do
          local now = {}
          for i = 1, #set do now[i] = i % 3 + step end
          O.adam_many(o.decoupled and "AdamW" or "Adam", column(set, "p"), column(set, "grads", step),
            column(set, "m"), column(set, "v"), o.amsgrad and column(set, "vmax") or nil, now, o.lr, o.betas[1],
            o.betas[2], o.eps, o.weight_decay, o.amsgrad, o.decoupled, o.maximize)
        end
        return set
      end
      device_equal(function() return run("cpu") end, function() return run("cuda") end, { "p", "m", "v", "vmax" })
    end
  end)

  it("unscale_many on CUDA scales as the CPU and sets found_inf on the device", function()
    for _, dtype in ipairs { "float32", "float64", "bfloat16", "float16" } do
      lt.manual_seed(7)
      -- more tensors than one launch holds, and one bigger than a launch's chunks
      local cpu, dev = {}, {}
      for i = 1, 130 do
        local t = (lt.randn(i == 5 and 256 * 65536 + 3 or i * 7) * 100):to(dtype)
        cpu[i], dev[i] = t, t:to("cuda")
      end
      local fc, fd = lt.zeros(1), lt.zeros(1, { device = "cuda" })
      O.unscale_many(cpu, fc, 1 / 1024)
      O.unscale_many(dev, fd, 1 / 1024)
      for i = 1, #cpu do same(cpu[i], dev[i]:to("cpu"), dtype .. " grad " .. i) end
      assert.equal(0, fd:item())
      dev[130][3] = 0 / 0
      O.unscale_many(dev, fd, 1.0)
      assert.equal(1, fd:item())
    end
  end)

  it("a GradScaler step on CUDA parameters skips on inf", function()
    local p = lt.tensor({ 1.0, 2.0 }, { device = "cuda" }):requires_grad_()
    local opt = optim.Adam({ p }, { lr = 0.1 })
    local scaler = lt.amp.GradScaler { init_scale = 4.0 }
    p.grad = lt.tensor({ 1.0, math.huge }, { device = "cuda" })
    assert.is_false(scaler:step(opt))
    scaler:update()
    assert.same({ 1.0, 2.0 }, p:to("cpu"):totable())
    p.grad = lt.tensor({ 4.0, 4.0 }, { device = "cuda" })
    assert.is_true(scaler:step(opt))
    scaler:update()
    h.near({ 0.9, 1.9 }, p:to("cpu"):totable(), 1e-5)
  end)
end)
