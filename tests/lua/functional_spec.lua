-- lt.nn.functional: every F function against PyTorch's values and input
-- gradients (tests/fixtures/functional/cases.lua, float32, 1e-5), a float64
-- finite-difference check of its gradients, and its bad-input messages.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local F = lt.nn.functional

local cases = dofile("tests/fixtures/functional/cases.lua")

-- A fixture tensor T as an lt tensor (of dtype, when given).
local function make(T, dtype)
  local t = lt.tensor(T.values, { dtype = dtype or T.dtype })
  t = t:reshape(T.shape)
  if T.requires_grad then t:requires_grad_(true) end
  return t
end

local function flat(t) return t:reshape(-1):totable() end

local function expect_tensor(T, t, what)
  assert.same(T.shape, t.shape, what .. ": shape")
  h.near(T.values, flat(t), 1e-5)
end

-- How each op is called with a case's inputs (i) and params (p).
local calls = {
  linear = function(i) return F.linear(i.x, i.w, i.b) end,
  conv2d = function(i, p) return F.conv2d(i.x, i.w, i.b, p.opts) end,
  max_pool2d = function(i, p) return F.max_pool2d(i.x, p.kernel, p.opts) end,
  avg_pool2d = function(i, p) return F.avg_pool2d(i.x, p.kernel, p.opts) end,
  batch_norm = function(i, p) return F.batch_norm(i.x, i.running_mean, i.running_var, i.w, i.b, p.opts) end,
  layer_norm = function(i, p) return F.layer_norm(i.x, p.shape, i.w, i.b, p.opts) end,
  relu = function(i) return F.relu(i.x) end,
  tanh = function(i) return F.tanh(i.x) end,
  sigmoid = function(i) return F.sigmoid(i.x) end,
  gelu = function(i, p) return F.gelu(i.x, p.opts) end,
  softmax = function(i, p) return F.softmax(i.x, p.dim) end,
  log_softmax = function(i, p) return F.log_softmax(i.x, p.dim) end,
  dropout = function(i, p) return F.dropout(i.x, p.p, p.training) end,
  flatten = function(i, p) return F.flatten(i.x, p.s, p.e) end,
  embedding = function(i, p) return F.embedding(i.idx, i.w, p.opts) end,
  cross_entropy = function(i, p)
    local opts = {}
    for k, v in pairs(p.opts) do opts[k] = v end
    opts.weight = i.class_weight
    return F.cross_entropy(i.x, i.target, opts)
  end,
  nll_loss = function(i, p)
    local opts = {}
    for k, v in pairs(p.opts) do opts[k] = v end
    opts.weight = i.class_weight
    return F.nll_loss(i.x, i.target, opts)
  end,
  mse_loss = function(i, p) return F.mse_loss(i.a, i.b, p.opts) end,
}

describe("F against PyTorch", function()
  for _, case in ipairs(cases) do
    it(case.name, function()
      local inputs = {}
      for name, T in pairs(case.inputs) do inputs[name] = make(T) end
      local out, indices = calls[case.op](inputs, case.params)
      expect_tensor(case.out, out, "output")
      if case.indices then expect_tensor(case.indices, indices, "indices") end
      for name, T in pairs(case.extra or {}) do expect_tensor(T, inputs[name], name) end
      if out.requires_grad then
        (out * make(case.grad_out)):sum():backward()
      end
      for name, T in pairs(case.grads) do
        assert.is_not_nil(inputs[name].grad, name .. " received no gradient")
        expect_tensor(T, inputs[name].grad, "gradient of " .. name)
      end
    end)
  end
end)

-- padding_idx's row is read by forward but gets no gradient by definition
-- (PyTorch's rule): not a derivative, so not checked against differences.
local not_a_derivative = { ["embedding padding_idx"] = true }

describe("F gradients against finite differences (float64)", function()
  for _, case in ipairs(cases) do
    if not_a_derivative[case.name] then goto continue end
    it(case.name, function()
      local names = h.sorted_keys(case.inputs)
      local args = {}
      for k, name in ipairs(names) do
        local T = case.inputs[name]
        args[k] = make(T, T.dtype == "float32" and "float64" or T.dtype)
      end
      local function fn(...)
        local inputs = {}
        for k, v in ipairs { ... } do inputs[names[k]] = v end
        return (calls[case.op](inputs, case.params))
      end
      assert.is_true(lt.autograd.gradcheck(fn, args, { eps = 1e-6, atol = 1e-6, rtol = 1e-5 }))
    end)
    ::continue::
  end

  it("dropout in training, with the mask drawn from one seed", function()
    local function fn(x)
      lt.manual_seed(5)
      return F.dropout(x, 0.3)
    end
    assert.is_true(lt.autograd.gradcheck(fn, { lt.randn(4, 5, { dtype = "float64", requires_grad = true }) }))
  end)

  it("relu in place on a computed tensor", function()
    local fn = function(x) return F.relu(x * 1, { inplace = true }) end
    assert.is_true(lt.autograd.gradcheck(fn, { lt.tensor({ -1.0, 0.5, 2.0 }, { requires_grad = true }) }))
  end)
end)

describe("F behaviour", function()
  it("softmax, log_softmax and gelu are tensor methods too, with their gradients", function()
    local x = lt.randn(3, 4, { dtype = "float64" })
    for _, case in ipairs { { "softmax", 2 }, { "log_softmax", -1 }, { "gelu", { approximate = "tanh" } } } do
      local name, arg = case[1], case[2]
      local a, b = x:clone():requires_grad_(), x:clone():requires_grad_()
      local by_method, by_function = a[name](a, arg), F[name](b, arg)
      assert.equal(0, (by_method - by_function):abs():max():item(), name)
      by_method:sum():backward()
      by_function:sum():backward()
      assert.equal(0, (a.grad - b.grad):abs():max():item(), name .. " gradient")
    end
    h.fails(function() return x.softmax(2) end, "softmax: expected a tensor, got number as self")
  end)

  -- The float32 2x2 max pool has a four-wide path (cpu_nn_pool.c); float64
  -- takes the scalar one. Both must pick the same values and positions:
  -- the first maximum of equal ones, the last NaN, -inf windows.
  it("max_pool2d's float32 2x2 path agrees with float64's, NaNs, infinities and ties included", function()
    math.randomseed(5)
    for trial = 1, 200 do
      local x = lt.randn(math.random(1, 3), math.random(1, 2), math.random(2, 21), math.random(2, 37))
      local flat = x:reshape(-1)
      for _ = 1, math.random(0, 12) do
        local specials = {0 / 0, math.huge, -math.huge, 0.5, 0.5}
        flat[math.random(flat:numel())] = specials[math.random(#specials)]
      end
      if trial % 7 == 0 then x = lt.full(x.shape, -math.huge) end
      if trial % 11 == 0 then x = lt.zeros(x.shape) end
      local o32, i32 = F.max_pool2d(x, 2, { return_indices = true })
      local o64, i64 = F.max_pool2d(x:double(), 2, { return_indices = true })
      assert.is_true(i32:eq(i64):min():item(), "indices differ in trial " .. trial)
      local a = o32:double()
      assert.is_true(lt.where(a:ne(a), o64:ne(o64), a:eq(o64)):min():item(), "values differ in trial " .. trial)
    end
  end)

  it("records the expected nodes", function()
    local x = lt.randn(2, 3, 4, 4, { requires_grad = true })
    local w = lt.randn(5, 3, 3, 3, { requires_grad = true })
    local y = F.conv2d(x, w, nil, { padding = 1 })
    assert.equal("ConvolutionBackward", y.grad_fn)
    assert.equal("MaxPool2DBackward", F.max_pool2d(y, 2).grad_fn)
    assert.equal("AvgPool2DBackward", F.avg_pool2d(y, 2).grad_fn)
    assert.equal("NativeBatchNormBackward", F.batch_norm(y, nil, nil, nil, nil, { training = true }).grad_fn)
    local logits = F.linear(y:flatten(2), lt.randn(3, 80))
    assert.equal("LinearBackward", logits.grad_fn)
    assert.equal("LogSoftmaxBackward", F.log_softmax(logits, 2).grad_fn)
    assert.equal("NllLossBackward", F.nll_loss(F.log_softmax(logits, 2), lt.tensor { 1, 3 }).grad_fn)
    assert.equal("CrossEntropyLossBackward", F.cross_entropy(logits, lt.tensor { 1, 3 }).grad_fn)
  end)

  it("updates batch_norm's running statistics without recording them", function()
    local rm, rv = lt.zeros(3), lt.ones(3)
    local x = lt.randn(8, 3, { requires_grad = true }) * 2 + 1
    F.batch_norm(x, rm, rv, nil, nil, { training = true, momentum = 0.5 })
    assert.is_true(rm.is_leaf and not rm.requires_grad)
    local mean = x:detach():mean(1):totable()
    h.near({ mean[1] * 0.5, mean[2] * 0.5, mean[3] * 0.5 }, rm:totable(), 1e-5)
  end)

  it("dropout defaults to training and scales what it keeps", function()
    lt.manual_seed(1)
    local y = F.dropout(lt.ones(1000), 0.25)
    local kept = 0
    for _, v in ipairs(y:totable()) do
      assert.is_true(v == 0 or math.abs(v - 4 / 3) < 1e-6)
      if v ~= 0 then kept = kept + 1 end
    end
    assert.is_true(kept > 650 and kept < 850)
    local x = lt.ones(3)
    h.near({ 1, 1, 1 }, F.dropout(x, 0.25, false):totable())
  end)

  it("relu in place writes its input", function()
    local x = lt.tensor { -1.0, 2.0 }
    local y = F.relu(x, { inplace = true })
    h.near({ 0, 2 }, x:totable())
    assert.equal(x, y)
  end)

  it("max_pool2d returns 1-based indices within each plane", function()
    local x = lt.tensor({ { { { 1.0, 5.0 }, { 3.0, 2.0 } } } })
    local y, idx = F.max_pool2d(x, 2, { return_indices = true })
    assert.equal(5.0, y:item())
    assert.equal(2, idx:item())
    assert.equal("int64", idx.dtype)
  end)

  it("nothing is recorded under no_grad", function()
    local x = lt.randn(2, 4, { requires_grad = true })
    local y = lt.no_grad(function() return F.cross_entropy(F.linear(x, lt.randn(3, 4)), lt.tensor { 1, 2 }) end)
    assert.is_nil(y.grad_fn)
    assert.is_false(y.requires_grad)
  end)
end)

describe("F bad input", function()
  it("names both shapes when linear, conv2d or matmul do not fit", function()
    h.fails_cleanly(function() F.linear(lt.zeros(3, 4), lt.zeros(5, 3)) end,
      "linear", "[3, 4]", "[5, 3]")
    h.fails_cleanly(function() F.conv2d(lt.zeros(2, 3, 8, 8), lt.zeros(4, 2, 3, 3)) end,
      "conv2d", "[2, 3, 8, 8]", "[4, 2, 3, 3]")
    h.fails_cleanly(function() lt.matmul(lt.zeros(2, 3), lt.zeros(4, 5)) end,
      "matmul", "[2, 3]", "[4, 5]")
  end)

  it("names a class label out of range and the range", function()
    h.fails_cleanly(function() F.cross_entropy(lt.zeros(2, 10), lt.tensor { 3, 11 }) end,
      "cross_entropy", "target 11", "10 classes", "1 to 10")
    h.fails_cleanly(function() F.nll_loss(lt.zeros(2, 10), lt.tensor { 0, 3 }) end,
      "nll_loss", "target 0", "1 to 10")
    h.fails_cleanly(function() F.embedding(lt.tensor { 7 }, lt.zeros(6, 2)) end,
      "embedding", "index 7", "1 to 6")
  end)

  it("refuses unknown options and bad option values", function()
    h.fails_cleanly(function() F.conv2d(lt.zeros(1, 1, 4, 4), lt.zeros(1, 1, 3, 3), nil, { strides = 2 }) end,
      "conv2d: unknown option 'strides'", "stride")
    h.fails_cleanly(function() F.max_pool2d(lt.zeros(1, 1, 4, 4), { 2, 2, 2 }) end,
      "max_pool2d: kernel_size must be an integer or a pair {h, w}")
    h.fails_cleanly(function() F.cross_entropy(lt.zeros(2, 3), lt.tensor { 1, 2 }, { reduction = "avg" }) end,
      "reduction must be 'mean', 'sum' or 'none', got avg")
    h.fails_cleanly(function() F.gelu(lt.zeros(2), { approximate = "fast" }) end,
      "approximate must be 'none' or 'tanh'")
    h.fails_cleanly(function() F.softmax(lt.zeros(2, 3)) end, "softmax: expected the dimension")
    h.fails_cleanly(function() F.softmax(lt.zeros(2, 3), 3) end, "softmax", "out of range")
    h.fails_cleanly(function() F.relu(lt.zeros(2), { in_place = true }) end, "relu: unknown option 'in_place'")
  end)
end)
