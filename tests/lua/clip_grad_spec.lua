-- nn.utils.clip_grad_norm_ and clip_grad_value_ against PyTorch's
-- (tests/fixtures/gen_clip_grad_fixture.py), and their errors.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn = lt.nn
local cases = dofile("tests/fixtures/clip_grad/cases.lua")

-- Parameters holding the case's gradients.
local function parameters(case)
  local params = {}
  for i, g in ipairs(case.grads) do
    params[i] = lt.zeros(g.shape, {dtype = case.dtype}):requires_grad_(true)
    params[i].grad = h.fixture_tensor(g, case.dtype)
  end
  return params
end

describe("nn.utils gradient clipping", function()
  for _, case in ipairs(cases) do
    it("matches PyTorch: " .. case.name, function()
      local params = parameters(case)
      local rel = case.dtype == "float32" and 1e-6 or 1e-13
      if case.kind == "norm" then
        local total = nn.utils.clip_grad_norm_(params, case.max_norm, {norm_type = case.norm_type})
        assert.equal(0, total:dim())
        assert.equal(case.dtype, total.dtype)
        assert.is_true(math.abs(total:item() - case.total) <= rel * case.total,
          string.format("total norm %.17g, PyTorch %.17g", total:item(), case.total))
      else
        assert.is_nil(nn.utils.clip_grad_value_(params, case.clip_value))
      end
      for i, p in ipairs(params) do h.fixture_close(case.clipped[i], p.grad, "grad " .. i, rel, 0) end
    end)
  end

  it("clips a module's gradients after backward, and skips parameters without one", function()
    lt.manual_seed(0)
    local model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
    model(lt.randn(8, 6)):pow(2):sum():backward()
    local params = model:parameters()
    local extra = lt.zeros(3):requires_grad_(true) -- never used: no gradient
    params[#params + 1] = extra
    local total = nn.utils.clip_grad_norm_(params, 0.5)
    assert.is_true(total:item() > 0.5)
    local sq = 0
    for _, p in ipairs(model:parameters()) do sq = sq + (p.grad * p.grad):sum():item() end
    assert.is_true(math.abs(math.sqrt(sq) - 0.5) < 1e-5)
    assert.is_nil(extra.grad)
    -- a single tensor works too, and nothing to clip gives a zero norm
    assert.equal(0, nn.utils.clip_grad_norm_(extra, 1.0):item())
    assert.equal(0, nn.utils.clip_grad_norm_({}, 1.0):item())
  end)

  it("a non-finite norm scales by NaN, or is an error with error_if_nonfinite", function()
    local p = lt.zeros(3):requires_grad_(true)
    p.grad = lt.tensor({1, 0 / 0, 2})
    h.fails_cleanly(function()
      return nn.utils.clip_grad_norm_(p, 1.0, {error_if_nonfinite = true})
    end, "clip_grad_norm_: the total norm of order 2 of the gradients is non-finite (nan)")
    assert.equal(1, p.grad[1]:item()) -- the error leaves the gradients alone
    local total = nn.utils.clip_grad_norm_(p, 1.0)
    assert.is_true(total:item() ~= total:item())
    assert.is_true(p.grad[1]:item() ~= p.grad[1]:item())
    -- the inf-norm too, wherever the NaN is
    local a, b = lt.zeros(2):requires_grad_(true), lt.zeros(2):requires_grad_(true)
    a.grad, b.grad = lt.tensor({5.0, 1.0}), lt.tensor({0 / 0, 1.0})
    total = nn.utils.clip_grad_norm_({a, b}, 1.0, {norm_type = math.huge})
    assert.is_true(total:item() ~= total:item())
  end)

  it("bad arguments are errors that name the function and the value", function()
    local p = lt.zeros(2):requires_grad_(true)
    p.grad = lt.ones(2)
    h.fails_cleanly(function() return nn.utils.clip_grad_norm_(p, "1") end,
      "clip_grad_norm_: max_norm must be a finite number, got 1")
    h.fails_cleanly(function() return nn.utils.clip_grad_norm_(p, 1 / 0) end,
      "clip_grad_norm_: max_norm must be a finite number, got inf")
    h.fails_cleanly(function() return nn.utils.clip_grad_norm_(p, 1, {norm_type = 0}) end,
      "clip_grad_norm_: norm_type must be a positive number or math.huge, got 0")
    h.fails_cleanly(function() return nn.utils.clip_grad_norm_(p, 1, {norm = 2}) end,
      "clip_grad_norm_: unknown option 'norm'")
    h.fails_cleanly(function() return nn.utils.clip_grad_norm_(3, 1) end,
      "clip_grad_norm_: expected a tensor or a table of tensors, got number")
    h.fails_cleanly(function() return nn.utils.clip_grad_norm_({p, "x"}, 1) end,
      "clip_grad_norm_: parameter 2 is a string, not a tensor")
    h.fails_cleanly(function() return nn.utils.clip_grad_value_(p, 0 / 0) end,
      "clip_grad_value_: clip_value must be a finite number, got")
    assert.equal(1, p.grad[1]:item())
  end)

  it("makes no gradient-sized temporary for the 2- and inf-norms", function()
    local params = {}
    for i = 1, 3 do
      params[i] = lt.zeros(1 << 18):requires_grad_(true)
      params[i].grad = lt.randn(1 << 18)
    end
    params[4] = lt.zeros(0):requires_grad_(true)
    params[4].grad = lt.zeros(0)
    for _, norm_type in ipairs {2, math.huge} do
      lt.gc()
      local before = lt.memory.allocated()
      lt.memory.reset_peak()
      nn.utils.clip_grad_norm_(params, 0.01, {norm_type = norm_type})
      -- one gradient is 1 MiB; the scalars take a few 512-byte blocks
      assert.is_true(lt.memory.max_allocated() - before < 64 * 1024,
        string.format("norm %s: peak %d bytes above the start", tostring(norm_type),
          lt.memory.max_allocated() - before))
    end
  end)

  it("sums a 16-bit gradient's squares in float32 (no overflow below its own range)", function()
    local p = lt.zeros(4):half():requires_grad_(true)
    p.grad = lt.full({4}, 300):half() -- norm 600; the squares sum to 360000 > 65504
    local total = nn.utils.clip_grad_norm_(p, 1.0)
    assert.equal("float16", total.dtype)
    assert.equal(600, total:item())
    assert.is_true(math.abs(p.grad[1]:item() - 0.5) < 1e-3)
  end)

  it("takes gradients of mixed dtypes and strides, each parameter once", function()
    local specs = { { { 5, 7 }, "float32" }, { { 70001 }, "float32" }, { { 6 }, "float64" },
      { { 3, 4 }, "bfloat16" }, { { 0 }, "float32" } }
    for _, norm_type in ipairs { 2, 1, 3, math.huge } do
      local params, want = {}, {}
      for i, spec in ipairs(specs) do
        params[i] = lt.zeros(spec[1], { dtype = spec[2] }):requires_grad_(true)
        params[i].grad = lt.randn(spec[1]):to(spec[2])
      end
      params[1].grad = lt.randn(7, 5):t() -- a strided gradient is scaled in place
      local sum, max = 0, 0
      for i, p in ipairs(params) do
        want[i] = p.grad:double():clone() -- a float64 gradient's :double() is itself
        for _, v in ipairs(want[i]:reshape(-1):totable()) do
          sum, max = sum + math.abs(v) ^ norm_type, math.max(max, math.abs(v))
        end
      end
      local expected = norm_type == math.huge and max or sum ^ (1 / norm_type)
      params[#params + 1] = params[2] -- listed twice: counted and scaled once
      local total = nn.utils.clip_grad_norm_(params, 0.5, { norm_type = norm_type })
      assert.equal("float32", total.dtype)
      assert.is_true(math.abs(total:item() - expected) <= 1e-6 * expected,
        string.format("norm %s: %.9g, expected %.9g", tostring(norm_type), total:item(), expected))
      local coef = math.min(0.5 / (total:item() + 1e-6), 1)
      for i = 1, #specs do
        local tol = params[i].dtype == "bfloat16" and 1e-2 or 1e-6
        local err = (params[i].grad:double() - want[i] * coef):abs()
        assert.is_true(err:numel() == 0 or err:max():item() <= tol * coef * 4,
          string.format("norm %s, gradient %d: error %g", tostring(norm_type), i, err:numel() > 0 and err:max():item() or 0))
      end
    end
  end)

  it("the foreach kernels refuse what they cannot take, before writing", function()
    local O = require("lt.core")._optim
    local a = lt.ones(3)
    h.fails_cleanly(function() return O.norm_many({ a, lt.ones(2, { dtype = "int64" }) }, 2) end,
      "foreach_norm: tensor 2 must be floating point, got int64")
    h.fails_cleanly(function() return O.norm_many({ a }, -1) end,
      "foreach_norm: the norm's order must be positive or inf, got -1")
    h.fails_cleanly(function() return O.scale_many({ a }, a[1]) end,
      "foreach_mul_: the scalar shares memory with tensor 1")
    h.fails_cleanly(function() return O.scale_many({ a }, lt.ones(2)) end,
      "foreach_mul_: the scalar must be one floating-point element, got 2 of float32")
    h.fails_cleanly(function() return O.scale_many({ a, lt.ones(1):expand(4) }, lt.tensor(2.0)) end,
      "foreach_mul_: unsupported operation: more than one element")
    assert.same({ 1, 1, 1 }, a:totable())
    assert.is_nil(O.norm_many({ lt.zeros(2):requires_grad_(true) }, 2, true)) -- no gradient: nothing
  end)

  it("records nothing for autograd", function()
    local p = lt.zeros(2):requires_grad_(true)
    p.grad = lt.ones(2):requires_grad_(true)
    local total = nn.utils.clip_grad_norm_(p, 1.0)
    assert.is_false(total.requires_grad)
  end)
end)
