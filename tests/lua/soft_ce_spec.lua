-- F.cross_entropy and nn.CrossEntropyLoss with class-probability targets
-- (a floating target of the input's shape), beyond the PyTorch fixture cases
-- in functional_spec: how the rule relates to class labels, dtypes, the
-- module, and the bad-input messages. The class-label path is unchanged.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn, F = lt.nn, lt.nn.functional

-- One-hot rows (float32) for 1-based labels over c classes.
local function one_hot(labels, c)
  local rows = {}
  for i, label in ipairs(labels) do
    rows[i] = {}
    for k = 1, c do rows[i][k] = k == label and 1.0 or 0.0 end
  end
  return lt.tensor(rows)
end

local function flat(t) return t:reshape(-1):totable() end

-- Loss and input gradient of F.cross_entropy(x, target, opts) for a fresh
-- copy of x.
local function loss_and_grad(x, target, opts)
  local leaf = x:clone():requires_grad_(true)
  local loss = F.cross_entropy(leaf, target, opts)
  loss:sum():backward()
  return flat(loss:detach()), flat(leaf.grad)
end

describe("cross_entropy with class probabilities", function()
  local labels = { 3, 1, 5, 2 }
  local x = lt.randn(4, 5)
  local w = lt.tensor { 0.5, 2.0, 1.0, 1.5, 0.25 }

  it("gives the class-label loss and gradient for one-hot targets", function()
    for _, opts in ipairs {
      {}, { reduction = "sum", weight = w }, { reduction = "none", weight = w },
      { label_smoothing = 0.2 }, { reduction = "none", label_smoothing = 0.1 },
    } do
      local hard_loss, hard_grad = loss_and_grad(x, lt.tensor(labels), opts)
      local soft_loss, soft_grad = loss_and_grad(x, one_hot(labels, 5), opts)
      h.near(hard_loss, soft_loss, 1e-5)
      h.near(hard_grad, soft_grad, 1e-5)
    end
  end)

  it("divides the mean by the number of samples, not by the weights", function()
    local soft = one_hot(labels, 5)
    local sum = F.cross_entropy(x, soft, { weight = w, reduction = "sum" }):item()
    h.near(sum / 4, F.cross_entropy(x, soft, { weight = w }):item(), 1e-6)
    -- Class labels divide by the weights of the targets: 1.0 + 0.5 + 0.25 + 2.0.
    h.near(sum / 3.75, F.cross_entropy(x, lt.tensor(labels), { weight = w }):item(), 1e-5)
    -- Over [N, C, h, w] the samples are N * h * w.
    local x4, t4 = lt.randn(2, 3, 2, 4), lt.rand(2, 3, 2, 4)
    h.near(F.cross_entropy(x4, t4, { reduction = "sum" }):item() / 16, F.cross_entropy(x4, t4):item(), 1e-6)
    assert.same({ 2, 2, 4 }, F.cross_entropy(x4, t4, { reduction = "none" }).shape)
  end)

  it("takes an unbatched [C] input with a [C] target", function()
    local t = lt.tensor { 0.1, 0.6, 0.3 }
    local v = lt.tensor { 1.0, -0.5, 2.0 }
    local none = F.cross_entropy(v, t, { reduction = "none" })
    assert.same({}, none.shape)
    local expected = -(F.log_softmax(v, 1) * t):sum():item()
    h.near(expected, none:item(), 1e-6)
    h.near(expected, F.cross_entropy(v, t):item(), 1e-6)
  end)

  it("gives the target a gradient too, and passes a float64 finite-difference check", function()
    local fn = function(input, target, weight)
      return F.cross_entropy(input, target, { weight = weight, label_smoothing = 0.15 })
    end
    assert.is_true(lt.autograd.gradcheck(fn, {
      lt.randn(3, 4, 2, { dtype = "float64", requires_grad = true }),
      lt.rand(3, 4, 2, { dtype = "float64", requires_grad = true }),
      lt.rand(4, { dtype = "float64" }) + 0.5,
    }, { eps = 1e-6, atol = 1e-6, rtol = 1e-5 }))
  end)

  it("promotes dtypes as PyTorch does: float32 input, float64 target -> float64", function()
    local loss = F.cross_entropy(x, one_hot(labels, 5):double())
    assert.equal("float64", loss.dtype)
    assert.equal("float32", F.cross_entropy(x, one_hot(labels, 5)).dtype)
  end)

  it("accepts an ignore_index that no class can have, as PyTorch (negative there)", function()
    local t = one_hot(labels, 5)
    local plain = F.cross_entropy(x, t):item()
    assert.equal(plain, F.cross_entropy(x, t, { ignore_index = -1 }):item())
    assert.equal(plain, F.cross_entropy(x, t, { ignore_index = 0 }):item())
  end)

  it("gives NaN for the mean of an empty batch, as PyTorch", function()
    local loss = F.cross_entropy(lt.zeros(0, 3), lt.zeros(0, 3)):item()
    assert.is_true(loss ~= loss)
  end)

  it("records nothing under no_grad", function()
    local leaf = lt.randn(2, 3, { requires_grad = true })
    local loss = lt.no_grad(function() return F.cross_entropy(leaf, lt.rand(2, 3)) end)
    assert.is_nil(loss.grad_fn)
    assert.is_false(loss.requires_grad)
  end)

  it("nn.CrossEntropyLoss passes its options to the probability path", function()
    local t = lt.rand(4, 5)
    local m = nn.CrossEntropyLoss { weight = w, label_smoothing = 0.1, reduction = "sum" }
    assert.equal(F.cross_entropy(x, t, { weight = w, label_smoothing = 0.1, reduction = "sum" }):item(), m(x, t):item())
    local leaf = x:clone():requires_grad_(true)
    nn.CrossEntropyLoss()(leaf, t):backward()
    assert.same({ 4, 5 }, leaf.grad.shape)
    h.fails(function() nn.CrossEntropyLoss { ignore_index = 2 }(x, t) end,
      "cross_entropy: ignore_index is not supported for probability targets (got 2)")
  end)

  it("runs on CUDA as on the CPU", function()
    if not lt.cuda.is_available() then
      pending("skipped: no CUDA device")
      return
    end
    local x4, t4 = lt.randn(2, 3, 2, 4), lt.rand(2, 3, 2, 4)
    local wc = lt.tensor { 0.5, 1.0, 2.0 }
    local opts = { weight = wc, label_smoothing = 0.1, reduction = "none" }
    local cpu_loss, cpu_grad = loss_and_grad(x4, t4, opts)
    local leaf = x4:cuda():requires_grad_(true)
    local loss = F.cross_entropy(leaf, t4:cuda(), { weight = wc:cuda(), label_smoothing = 0.1, reduction = "none" })
    loss:sum():backward()
    h.near(cpu_loss, flat(loss:detach():cpu()), 1e-5)
    h.near(cpu_grad, flat(leaf.grad:cpu()), 1e-5)
  end)
end)

describe("cross_entropy with class probabilities: bad input", function()
  it("names both shapes when the target does not match the input", function()
    h.fails_cleanly(function() F.cross_entropy(lt.zeros(4, 6), lt.rand(4, 5)) end,
      "cross_entropy: probability target of shape [4, 5] must match input [4, 6]")
    h.fails_cleanly(function() F.cross_entropy(lt.zeros(2, 3, 4), lt.rand(2, 3)) end,
      "cross_entropy", "[2, 3]", "[2, 3, 4]")
  end)

  it("refuses an integer or bool target of the input's shape, naming the dtype", function()
    h.fails_cleanly(function() F.cross_entropy(lt.zeros(4, 6), lt.zeros(4, 6):long()) end,
      "cross_entropy", "[4, 6]", "must be floating point, got int64")
    h.fails_cleanly(function() F.cross_entropy(lt.zeros(4, 6), lt.zeros(4, 6):gt(0)) end,
      "cross_entropy", "must be floating point, got bool")
  end)

  it("refuses an ignore_index that could be a class", function()
    h.fails_cleanly(function() F.cross_entropy(lt.zeros(4, 6), lt.rand(4, 6), { ignore_index = 1 }) end,
      "cross_entropy: ignore_index is not supported for probability targets (got 1)")
  end)

  it("names the op and the values for bad weights, inputs and options", function()
    local x, t = lt.zeros(4, 6), lt.rand(4, 6)
    h.fails_cleanly(function() F.cross_entropy(x, t, { weight = lt.ones(5) }) end,
      "cross_entropy", "each of the 6 classes", "[5]")
    h.fails_cleanly(function() F.cross_entropy(x, t, { weight = lt.ones(6):long() }) end,
      "cross_entropy", "floating point weight", "int64")
    h.fails_cleanly(function() F.cross_entropy(x, t, { weight = 1 }) end,
      "cross_entropy", "weight must be a tensor", "number")
    h.fails_cleanly(function() F.cross_entropy(x:long(), t) end,
      "cross_entropy", "floating point input", "int64")
    h.fails_cleanly(function() F.cross_entropy(lt.tensor(1.0), lt.tensor(1.0)) end,
      "cross_entropy", "1 or more dimensions")
    h.fails_cleanly(function() F.cross_entropy(x, t, { reduction = "avg" }) end,
      "cross_entropy", "reduction", "avg")
    h.fails_cleanly(function() F.cross_entropy(x, t, { label_smoothing = 1.5 }) end,
      "cross_entropy", "label_smoothing must be between 0 and 1", "1.5")
    h.fails_cleanly(function() F.cross_entropy(x, t, { smoothing = 0.1 }) end,
      "cross_entropy", "unknown option 'smoothing'")
  end)

  it("leaves class-label messages as they were", function()
    h.fails_cleanly(function() F.cross_entropy(lt.zeros(4, 6), lt.tensor { { 1, 2 } }) end,
      "cross_entropy", "expected target of shape [4] for input [4, 6], got [1, 2]")
    h.fails_cleanly(function() F.cross_entropy(lt.zeros(2, 10), lt.tensor { 3, 11 }) end,
      "cross_entropy", "target 11", "1 to 10")
  end)
end)
