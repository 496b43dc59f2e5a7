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

  it("records nothing for autograd", function()
    local p = lt.zeros(2):requires_grad_(true)
    p.grad = lt.ones(2):requires_grad_(true)
    local total = nn.utils.clip_grad_norm_(p, 1.0)
    assert.is_false(total.requires_grad)
  end)
end)
