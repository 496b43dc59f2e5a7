-- Mixed precision: 16-bit modules, lt.autocast (per-op dtypes, values against
-- PyTorch's torch.autocast("cpu", bfloat16) in tests/fixtures/amp, written by
-- tests/fixtures/gen_amp_fixture.py; the parameter cast cache; float32
-- gradients) and lt.amp.GradScaler (PyTorch's update rule and messages).
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn, F, optim = lt.nn, lt.nn.functional, lt.optim

local fixture = dofile("tests/fixtures/amp/amp_fixture.lua")

local function from_fixture(t, opts)
  opts = opts or {}
  local v = lt.tensor(t.data, {dtype = opts.dtype}):view(t.shape)
  if opts.requires_grad then
    v = v:detach()
    v:requires_grad_(true)
  end
  return v
end

-- Largest element-wise difference relative to the largest magnitude of expected.
local function rel_diff(expected, actual)
  expected, actual = expected:double(), actual:double()
  local scale = math.max(1e-12, expected:abs():max():item())
  return (expected - actual):abs():max():item() / scale
end

local function assert_close(expected, actual, tol, what)
  local d = rel_diff(expected, actual)
  assert(d <= tol, string.format("%s: relative difference %g (tolerance %g)", what or "values", d, tol))
end

local BF16_TOL, FP16_TOL = 1.6e-2, 2e-3

describe("16-bit modules", function()
  for _, dtype in ipairs { "float16", "bfloat16" } do
    it("train a CNN in " .. dtype .. " with finite gradients of the parameters' dtype", function()
      lt.manual_seed(1)
      local model = nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(4 * 4 * 4, 16), nn.LayerNorm(16), nn.GELU(), nn.Dropout(0.1), nn.Linear(16, 3))
      if dtype == "float16" then model:half() else model:bfloat16() end
      local x = lt.randn(5, 1, 8, 8):to(dtype)
      local logits = model(x)
      assert.equal(dtype, logits.dtype)
      local loss = F.cross_entropy(logits, lt.tensor({1, 2, 3, 1, 2}))
      loss:backward()
      for name, p in model:named_parameters() do
        assert.equal(dtype, p.grad.dtype, name)
        local m = p.grad:float():abs():max():item()
        assert(m == m and m < math.huge, name .. " has a non-finite gradient")
      end
    end)
  end

  it("Adam on float16 parameters with eps 1e-8 keeps the update in float32 (no NaN)", function()
    local p = lt.tensor({0.5, -0.25, 1.0}, {dtype = "float16", requires_grad = true})
    local opt = optim.Adam({p}, {lr = 1e-3, eps = 1e-8})
    for _ = 1, 5 do
      p.grad = lt.tensor({1e-4, -1e-4, 0}, {dtype = "float16"})
      opt:step()
    end
    for _, v in ipairs(p:float():totable()) do assert(v == v, "NaN in the parameter") end
    assert.is_true(p:float():totable()[1] < 0.5)
  end)
end)

describe("lt.autocast", function()
  local x, w, b
  before_each(function()
    lt.manual_seed(2)
    x, w, b = lt.randn(4, 8), lt.randn(6, 8, {requires_grad = true}), lt.randn(6, {requires_grad = true})
  end)

  for _, dtype in ipairs { "bfloat16", "float16" } do
    it("picks each op's dtype in a " .. dtype .. " region", function()
      lt.autocast({dtype = dtype}, function()
        assert.is_true(lt.is_autocast_enabled())
        local y = F.linear(x, w, b)
        assert.equal(dtype, y.dtype)
        assert.equal(dtype, x:matmul(w:t()).dtype)
        assert.equal(dtype, F.conv2d(lt.randn(1, 2, 5, 5), lt.randn(3, 2, 3, 3)).dtype)
        -- torch.autocast("cpu")'s lists: the losses and prod in float32; softmax, exp, log,
        -- pow, sum and layer_norm (float32 in a CUDA region) in their input's dtype
        for name, r in pairs {
          cross_entropy = F.cross_entropy(y, lt.tensor({1, 2, 3, 4})), prod = y:prod(),
          nll_loss = F.nll_loss(y, lt.tensor({1, 2, 3, 4})), mse_loss = F.mse_loss(y, lt.zeros(4, 6)),
        } do
          assert.equal("float32", r.dtype, name)
        end
        for name, r in pairs {
          softmax = F.softmax(y, 2), log_softmax = F.log_softmax(y, 2), exp = y:exp(), log = y:abs():log(),
          pow = y:pow(2), pow_tensor = y:pow(lt.full({6}, 2.0, {dtype = dtype})), sum = y:sum(), sum_dim = y:sum(1),
          layer_norm = F.layer_norm(y, {6}),
        } do
          assert.equal(dtype, r.dtype, name)
        end
        -- the rest keeps its input's dtype, mixed inputs promote to the widest
        assert.equal(dtype, y:relu().dtype)
        assert.equal(dtype, y:mean().dtype)
        assert.equal(dtype, F.batch_norm(y, nil, nil, nil, nil, {training = true}).dtype)
        assert.equal("float32", (y + lt.ones(4, 6)).dtype)
        assert.equal("float32", lt.cat({y, lt.ones(4, 6)}, 1).dtype)
        assert.equal("float32", lt.stack({y, lt.ones(4, 6)}, 1).dtype)
        -- in place: never autocast
        local acc = lt.zeros(4, 6)
        acc:add_(y)
        assert.equal("float32", acc.dtype)
        assert.equal("float32", x:clone():exp_().dtype)
        -- float64 is left alone
        assert.equal("float64", x:double():matmul(w:t():double()).dtype)
      end)
      assert.is_false(lt.is_autocast_enabled())
      assert.equal("float32", F.linear(x, w, b).dtype)
    end)
  end

  it("defaults to bfloat16 on the CPU and float16 on CUDA", function()
    assert.equal("bfloat16", lt.get_autocast_dtype("cpu"))
    assert.equal("float16", lt.get_autocast_dtype("cuda"))
    assert.equal("bfloat16", lt.autocast({}, function() return F.linear(x, w, b).dtype end))
  end)

  it("works as a to-be-closed guard, nests, and can be switched off inside", function()
    do
      local g <close> = lt.autocast {dtype = "bfloat16"}
      assert.equal("bfloat16", F.linear(x, w).dtype)
      lt.autocast({enabled = false}, function()
        assert.is_false(lt.is_autocast_enabled())
        assert.equal("float32", F.linear(x, w).dtype)
      end)
      lt.autocast({dtype = "float16"}, function() assert.equal("float16", F.linear(x, w).dtype) end)
      assert.equal("bfloat16", F.linear(x, w).dtype)
    end
    assert.equal("float32", F.linear(x, w).dtype)
    -- an error inside still ends the region
    assert.is_false(pcall(lt.autocast, {}, function() error("boom") end))
    assert.is_false(lt.is_autocast_enabled())
  end)

  it("matches PyTorch's bfloat16 autocast (linear, conv2d, matmul, softmax, cross_entropy)", function()
    for name, case in pairs(fixture) do
      local inputs = {}
      for key, t in pairs(case.inputs) do inputs[key] = from_fixture(t, {requires_grad = true}) end
      local out = lt.autocast({dtype = "bfloat16"}, function()
        if name == "linear" then return F.linear(inputs.x, inputs.w, inputs.b)
        elseif name == "conv2d" then return F.conv2d(inputs.x, inputs.w, inputs.b, {padding = 1})
        elseif name == "matmul" then return inputs.a:matmul(inputs.b)
        elseif name == "softmax" then return F.softmax(F.linear(inputs.x, inputs.w), 2)
        else return F.cross_entropy(F.linear(inputs.x, inputs.w, inputs.b), lt.tensor(case.target)) end
      end)
      -- in a CPU region lt follows torch.autocast("cpu")'s lists, so every dtype is PyTorch's
      -- (softmax stays in bfloat16 there; a CUDA region would run it in float32)
      assert.equal(case.dtype, out.dtype, name)
      assert_close(from_fixture(case.output, {dtype = "float64"}), out, BF16_TOL, name)
      if case.grads then
        local root = name == "linear" and out:float():pow(2):sum() or (out:dim() > 0 and out:float():sum() or out)
        root:backward()
        for key, g in pairs(case.grads) do
          assert.equal(g.dtype, inputs[key].grad.dtype, name .. " grad " .. key)
          assert_close(from_fixture(g.value, {dtype = "float64"}), inputs[key].grad, 2 * BF16_TOL,
            name .. " grad " .. key)
        end
      end
    end
  end)

  it("stays within float16 precision of float32 (PyTorch autocasts only to bfloat16 on the CPU)", function()
    local reference = F.linear(x, w, b)
    local conv_x, conv_w = lt.randn(2, 3, 6, 6), lt.randn(4, 3, 3, 3)
    local conv_ref = F.conv2d(conv_x, conv_w, nil, {padding = 1})
    lt.autocast({dtype = "float16"}, function()
      assert_close(reference, F.linear(x, w, b), FP16_TOL, "linear")
      assert_close(conv_ref, F.conv2d(conv_x, conv_w, nil, {padding = 1}), FP16_TOL, "conv2d")
      assert_close(x:matmul(w:t()):float(), lt.autocast({enabled = false}, function() return x:matmul(w:t()) end),
        FP16_TOL, "matmul")
    end)
  end)

  it("casts a float32 parameter once per region and drops the copies at its end", function()
    local allocations = function() return lt.memory.stats().allocation.all.allocated end
    lt.autocast({}, function()
      F.linear(x, w, b)
      assert.equal(2, lt._autocast_cache_size()) -- w and b
      local before = allocations()
      F.linear(x, w, b)
      -- the second call casts only x (plus the result): the parameters come from the cache
      local second = allocations() - before
      before = allocations()
      F.linear(x, w:detach(), b:detach()) -- not parameters: cast every time
      local uncached = allocations() - before
      assert.equal(2, uncached - second)
      -- not cached without grad mode (the copy would lack its link to the parameter)
      lt.no_grad(function() F.linear(x, lt.randn(6, 8, {requires_grad = true})) end)
      assert.equal(2, lt._autocast_cache_size())
    end)
    assert.equal(0, lt._autocast_cache_size())
  end)

  it("gives float32 parameters float32 gradients equal to the sum over uses of the cached copy", function()
    local loss = lt.autocast({}, function()
      return F.linear(x, w, b):float():sum() + F.linear(x * 2, w, b):float():sum()
    end)
    loss:backward()
    assert.equal("float32", w.grad.dtype)
    assert.equal("float32", b.grad.dtype)
    h.near(lt.full({6}, 8.0):totable(), b.grad:totable(), 1e-6)
  end)

  it("is re-entered by lt.checkpoint's recomputation", function()
    local model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4))
    local function run(segments)
      model:zero_grad()
      local out = lt.autocast({}, function()
        local y = segments and nn.checkpoint_sequential(model, segments, x) or model(x)
        assert.equal("bfloat16", y.dtype)
        return F.cross_entropy(y, lt.tensor({1, 2, 3, 4}))
      end)
      out:backward()
      local grads = {}
      for name, p in model:named_parameters() do grads[name] = p.grad:clone() end
      return grads
    end
    local plain, checkpointed = run(nil), run(2)
    for name, g in pairs(plain) do
      assert.equal("float32", checkpointed[name].dtype)
      assert_close(g, checkpointed[name], 1e-6, name)
    end
  end)

  it("rejects bad options", function()
    h.fails(function() lt.autocast({dtype = "float32"}, function() end) end,
      "autocast: dtype must be \"bfloat16\" or \"float16\", got float32")
    h.fails(function() lt.autocast({precision = 16}) end, "autocast: unknown option 'precision'")
    h.fails(function() lt.autocast({device_type = "tpu"}) end, "device_type must be \"cpu\" or \"cuda\"")
    h.fails(function() lt.autocast({}, 42) end, "autocast: expected a function")
  end)
end)

describe("lt.amp.GradScaler", function()
  local function setup(init)
    local p = lt.tensor({1.0, 2.0, 3.0}, {requires_grad = true})
    local opt = optim.SGD({p}, {lr = 0.1})
    local scaler = lt.amp.GradScaler(init)
    return p, opt, scaler
  end

  -- One iteration whose loss is sum(p * factor): an infinite factor gives inf gradients.
  local function iteration(p, opt, scaler, factor)
    opt:zero_grad()
    scaler:scale((p * factor):sum()):backward()
    local stepped = scaler:step(opt)
    scaler:update()
    return stepped
  end

  it("has PyTorch's defaults", function()
    local scaler = lt.amp.GradScaler()
    assert.equal(65536.0, scaler:get_scale())
    assert.same({scale = 65536.0, growth_factor = 2.0, backoff_factor = 0.5, growth_interval = 2000,
      _growth_tracker = 0}, scaler:state_dict())
  end)

  it("follows the update rule over a run with injected inf and NaN steps", function()
    -- Expected sequence derived by hand from the rule (PyTorch's torch._amp_update_scale_):
    -- a step with inf/NaN multiplies the scale by backoff (0.5) and resets the counter; each
    -- finite step counts, and growth_interval (3) of them in a row multiply it by growth (2).
    -- PyTorch's GradScaler needs CUDA, so this is not a recorded fixture.
    local p, opt, scaler = setup {init_scale = 1024.0, growth_interval = 3}
    local factors = {1, 1, 1, 1, math.huge, 1, 1, 1, 0 / 0, math.huge, 1, 1, 1, 1, 1, 1}
    local expected_scales = {1024, 1024, 2048, 2048, 1024, 1024, 1024, 2048, 1024, 512, 512, 512, 1024, 1024, 1024, 2048}
    local expected_steps = {true, true, true, true, false, true, true, true, false, false, true, true, true, true, true, true}
    for i, factor in ipairs(factors) do
      local stepped = iteration(p, opt, scaler, factor)
      assert.equal(expected_steps[i], stepped, "step " .. i)
      assert.equal(expected_scales[i], scaler:get_scale(), "scale after step " .. i)
    end
  end)

  it("unscales with 1/scale so the optimizer sees the true gradients", function()
    local p, opt, scaler = setup {init_scale = 8.0}
    scaler:scale((p * 3):sum()):backward()
    h.near({24, 24, 24}, p.grad:totable())
    scaler:unscale_(opt)
    h.near({3, 3, 3}, p.grad:totable())
    assert.is_true(scaler:step(opt)) -- does not unscale again
    h.near({0.7, 1.7, 2.7}, p:totable(), 1e-6)
    scaler:update()
  end)

  it("scales a 16-bit loss in float32, as PyTorch's float32 scale tensor does", function()
    local _, _, scaler = setup {}
    local loss = lt.tensor(2.0):half()
    local scaled = scaler:scale(loss)
    assert.equal("float32", scaled.dtype)
    assert.equal(131072.0, scaled:item()) -- float16 would give inf
    assert.equal("float32", scaler:scale(lt.tensor(2.0):bfloat16()).dtype)
    assert.equal("float64", scaler:scale(lt.tensor(2.0, {dtype = "float64"})).dtype)
  end)

  it("skips the step on inf gradients, leaving the parameters unchanged", function()
    local p, opt, scaler = setup()
    local before = p:totable()
    assert.is_false(iteration(p, opt, scaler, math.huge))
    assert.same(before, p:totable())
    assert.equal(32768.0, scaler:get_scale())
  end)

  it("stops growing where float32 would overflow", function()
    local p, opt, scaler = setup {init_scale = 2.0 ^ 127, growth_interval = 1}
    iteration(p, opt, scaler, 1)
    assert.equal(2.0 ^ 127, scaler:get_scale())
  end)

  it("refuses a second unscale_, a second step and float16 gradients with PyTorch's messages", function()
    local p, opt, scaler = setup()
    scaler:scale(p:sum()):backward()
    scaler:unscale_(opt)
    h.fails(function() scaler:unscale_(opt) end,
      "unscale_() has already been called on this optimizer since the last update().")
    scaler:step(opt)
    h.fails(function() scaler:step(opt) end, "step() has already been called since the last update().")
    h.fails(function() scaler:unscale_(opt) end, "unscale_() is being called after step().")
    scaler:update()

    local q = lt.tensor({1.0, 2.0}, {dtype = "float16", requires_grad = true})
    local opt16 = optim.SGD({q}, {lr = 0.1})
    scaler:scale(q:sum()):backward()
    h.fails(function() scaler:unscale_(opt16) end, "Attempting to unscale FP16 gradients.")

    local fresh = lt.amp.GradScaler()
    h.fails(function() fresh:update() end, "No inf checks were recorded prior to update.")
    h.fails(function() lt.amp.GradScaler {growth_factor = 0.5} end, "The growth factor must be > 1.0.")
    h.fails(function() lt.amp.GradScaler {backoff_factor = 2} end, "The backoff factor must be < 1.0.")
    h.fails(function() lt.amp.GradScaler {init = 1} end, "GradScaler: unknown option 'init'")
  end)

  it("does nothing when disabled", function()
    local p, opt, scaler = setup {enabled = false}
    local loss = p:sum()
    assert.equal(loss, scaler:scale(loss))
    assert.equal(1.0, scaler:get_scale())
    loss:backward()
    assert.is_true(scaler:step(opt))
    scaler:update()
    assert.same({}, scaler:state_dict())
  end)

  it("round-trips its state", function()
    local p, opt, scaler = setup {init_scale = 16.0, growth_interval = 5}
    iteration(p, opt, scaler, 1)
    iteration(p, opt, scaler, 1)
    local other = lt.amp.GradScaler()
    other:load_state_dict(scaler:state_dict())
    assert.same(scaler:state_dict(), other:state_dict())
    h.fails(function() other:load_state_dict({}) end, "The source state dict is empty")
  end)

  it("with accumulation steps and updates only at the boundary, as the full batch would", function()
    lt.manual_seed(9)
    local xs, ys = lt.randn(8, 4), lt.randn(8, 2)
    local function make()
      lt.manual_seed(10)
      return nn.Linear(4, 2)
    end
    local full = make()
    local full_opt = optim.SGD(full:parameters(), {lr = 0.1})
    F.mse_loss(full(xs), ys):backward()
    full_opt:step()

    local model = make()
    local opt = optim.SGD(model:parameters(), {lr = 0.1})
    local scaler = lt.amp.GradScaler {init_scale = 256.0, growth_interval = 1}
    local K = 4
    local steps = 0
    for k = 1, K do
      local xb, yb = xs:narrow(1, 2 * k - 1, 2), ys:narrow(1, 2 * k - 1, 2)
      scaler:scale(F.mse_loss(model(xb), yb) / K):backward()
      if k % K == 0 then
        if scaler:step(opt) then steps = steps + 1 end
        scaler:update()
        opt:zero_grad()
      end
      assert.equal(k < K and 256.0 or 512.0, scaler:get_scale())
    end
    assert.equal(1, steps)
    h.near(full.weight:totable(), model.weight:totable(), 1e-5)
    h.near(full.bias:totable(), model.bias:totable(), 1e-5)
  end)
end)
