-- lt.checkpoint and nn.checkpoint_sequential: the same gradients as a plain
-- run, a fraction of the activation memory, the forward's random numbers
-- and BatchNorm statistics reproduced (not doubled) by the recomputation.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn, F = lt.nn, lt.nn.functional

-- Largest element-wise difference relative to the largest magnitude of a.
local function rel_diff(a, b)
  local scale = math.max(1, a:abs():max():item())
  return (a - b):abs():max():item() / scale
end

local function grads_of(model)
  local out = {}
  for name, p in model:named_parameters() do out[name] = p.grad and p.grad:clone() end
  return out
end

local function assert_same_grads(expected, actual, tol)
  for name, g in pairs(expected) do
    assert(actual[name] ~= nil, "no gradient for " .. name)
    local d = rel_diff(g, actual[name])
    assert(d <= tol, string.format("%s: gradients differ by %g", name, d))
  end
end

-- Runs step(model, x) (returning a loss) and returns the parameters' and x's gradients.
local function gradients(model, x, step)
  model:zero_grad()
  x.grad = nil
  step(model, x):backward()
  return grads_of(model), x.grad:clone()
end

local function mlp(layers, width)
  local list = {}
  for i = 1, layers do
    list[#list + 1] = nn.Linear(width, width)
    list[#list + 1] = nn.ReLU()
  end
  return nn.Sequential(list)
end

local function fashion_cnn()
  local function block(cin, cout)
    return nn.Sequential(nn.Conv2d(cin, cout, 3, {padding = 1}), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))
  end
  return nn.Sequential(block(1, 32), block(32, 64), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
end

describe("lt.checkpoint", function()
  it("gives a 16-layer MLP the gradients of the plain run", function()
    lt.manual_seed(3)
    local model, x = mlp(16, 32), lt.randn(8, 32, {requires_grad = true})
    local plain, plain_x = gradients(model, x, function(m, input) return m(input):pow(2):mean() end)
    for _, segments in ipairs {1, 2, 4, 5, 16, 32} do
      local ck, ck_x = gradients(model, x, function(m, input)
        return nn.checkpoint_sequential(m, segments, input):pow(2):mean()
      end)
      assert_same_grads(plain, ck, 1e-6)
      assert.is_true(rel_diff(plain_x, ck_x) <= 1e-6)
    end
  end)

  it("gives the Fashion CNN the gradients of the plain run, BatchNorm included", function()
    lt.manual_seed(5)
    local model = fashion_cnn()
    local x = lt.randn(16, 1, 28, 28, {requires_grad = true})
    local target = lt.randint(1, 10, {16})
    local loss = function(m, input) return F.cross_entropy(m(input), target) end
    local plain, plain_x = gradients(model, x, loss)
    local ck, ck_x = gradients(model, x, function(m, input)
      return F.cross_entropy(nn.checkpoint_sequential(m, 3, input), target)
    end)
    assert_same_grads(plain, ck, 1e-6)
    assert.is_true(rel_diff(plain_x, ck_x) <= 1e-6)
  end)

  it("at least halves the activation peak of a 16-layer MLP with 4 segments", function()
    lt.manual_seed(1)
    local model, x = mlp(16, 256), lt.randn(128, 256, {requires_grad = true})
    local function activation_peak(segments)
      model:zero_grad()
      x.grad = nil
      lt.gc()
      lt.memory.reset_peak()
      local before = lt.memory.stats().by_category.activation.current
      local allocated_before = lt.memory.allocated()
      local y = segments and nn.checkpoint_sequential(model, segments, x) or model(x)
      y:sum():backward()
      local peak = lt.memory.stats().by_category.activation.peak - before
      return peak, lt.memory.max_allocated() - allocated_before
    end
    activation_peak(nil) -- the first run creates the gradients
    local plain = activation_peak(nil)
    local four = activation_peak(4)
    assert.is_true(four <= plain / 2,
      string.format("activation peak %d bytes with 4 segments, %d without", four, plain))
  end)

  it("reproduces the forward's dropout masks and leaves the generator as a plain run does", function()
    local model = nn.Sequential(nn.Linear(16, 64), nn.Dropout(0.5), nn.ReLU(), nn.Linear(64, 16), nn.Dropout(0.3))
    local x = lt.randn(32, 16, {requires_grad = true})
    lt.manual_seed(11)
    local plain, plain_x = gradients(model, x, function(m, input) return m(input):sum() end)
    local after_plain = lt.rand(4)
    lt.manual_seed(11)
    local ck, ck_x = gradients(model, x, function(m, input) return lt.checkpoint(m, input):sum() end)
    local after_ck = lt.rand(4)
    assert_same_grads(plain, ck, 1e-6)
    assert.is_true(rel_diff(plain_x, ck_x) <= 1e-6)
    assert.same(after_plain:totable(), after_ck:totable())
  end)

  it("updates BatchNorm's running statistics once", function()
    lt.manual_seed(2)
    local bn = nn.BatchNorm2d(3)
    local plain_bn = nn.BatchNorm2d(3)
    local x = lt.randn(4, 3, 5, 5, {requires_grad = true})
    plain_bn(x):sum():backward()
    lt.checkpoint(bn, x):sum():backward()
    h.near(plain_bn.running_mean:totable(), bn.running_mean:totable(), 1e-6)
    h.near(plain_bn.running_var:totable(), bn.running_var:totable(), 1e-6)
    assert.equal(1, bn.num_batches_tracked:item())
  end)

  it("gives parameters gradients when no input requires grad", function()
    lt.manual_seed(4)
    local model = mlp(3, 8)
    local x = lt.randn(2, 8)
    model(x):sum():backward()
    local plain = grads_of(model)
    model:zero_grad()
    local y = lt.checkpoint(model, x)
    assert.is_true(y.requires_grad)
    y:sum():backward()
    assert_same_grads(plain, grads_of(model), 1e-6)
  end)

  it("nests", function()
    lt.manual_seed(6)
    local a, b, c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
    local function inner(x) return b(x):tanh() end
    local function outer(x) return c(lt.checkpoint(inner, a(x):tanh())) end
    local x = lt.randn(4, 8, {requires_grad = true})
    outer(x):sum():backward()
    local plain = {a.weight.grad:clone(), b.weight.grad:clone(), c.weight.grad:clone(), x.grad:clone()}
    for _, m in ipairs {a, b, c} do m:zero_grad() end
    x.grad = nil
    lt.checkpoint(outer, x):sum():backward()
    local got = {a.weight.grad, b.weight.grad, c.weight.grad, x.grad}
    for i = 1, 4 do assert.is_true(rel_diff(plain[i], got[i]) <= 1e-6) end
  end)

  it("handles several outputs, non-tensor arguments and an argument returned as it is", function()
    local w = lt.randn(3, 3, {requires_grad = true})
    local x = lt.randn(2, 3, {requires_grad = true})
    local function fn(input, scale, bias)
      return input:matmul(w) * scale, input, (input + bias):exp()
    end
    local y1, y2, y3 = fn(x, 2, 0.5)
    ;(y1:sum() + (y2 * 3):sum() + y3:sum()):backward()
    local plain_w, plain_x = w.grad:clone(), x.grad:clone()
    w.grad, x.grad = nil, nil
    local c1, c2, c3 = lt.checkpoint(fn, x, 2, 0.5)
    ;(c1:sum() + (c2 * 3):sum() + c3:sum()):backward()
    assert.is_true(rel_diff(plain_w, w.grad) <= 1e-6)
    assert.is_true(rel_diff(plain_x, x.grad) <= 1e-6)
  end)

  it("runs fn plainly without grad mode", function()
    local m = nn.Linear(4, 4)
    local y = lt.no_grad(function() return lt.checkpoint(m, lt.randn(2, 4)) end)
    assert.is_false(y.requires_grad)
  end)

  it("says when the recomputation's output shapes differ from the forward's", function()
    local calls = 0
    local w = lt.randn(16, 16, {requires_grad = true})
    local function unstable(x)
      calls = calls + 1
      local y = x:matmul(w)
      if calls > 1 then y = y:narrow(2, 1, 8) end
      return y
    end
    local y = lt.checkpoint(unstable, lt.randn(4, 16))
    h.fails(function() y:sum():backward() end,
      "checkpoint: recomputed output 1 has shape [4, 8], the forward's was [4, 16]")
    assert.is_true((lt.ones(2) + 1):sum():item() == 4)
  end)

  it("rejects bad arguments", function()
    h.fails(function() lt.checkpoint(42, lt.ones(2)) end, "checkpoint: expected a function or a module, got number")
    h.fails(function() nn.checkpoint_sequential(mlp(2, 4), 5, lt.ones(1, 4)) end,
      "checkpoint_sequential: segments must be an integer between 1 and 4")
  end)
end)
