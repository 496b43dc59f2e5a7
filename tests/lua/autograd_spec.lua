-- Autograd from Lua: backward, accumulation, retain_graph, grad mode,
-- detach, lt.autograd.Function, every error with its message (the session
-- going on after each), and graph memory given back by backward.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local F = lt.nn.functional

local function settled()
  lt.gc()
  return lt.memory.allocated()
end

-- The bytes one 0-dim tensor of dtype takes, measured.
local function scalar_bytes(dtype)
  local before = settled()
  local t = lt.zeros({}, { dtype = dtype })
  local bytes = lt.memory.allocated() - before
  lt.del(t)
  return bytes
end

local function leaf(values)
  return lt.tensor(values, { dtype = "float64", requires_grad = true })
end

describe("backward", function()
  it("computes the gradients of a small graph", function()
    local x, w = leaf { 1.0, 2.0, 3.0 }, leaf { 0.5, -1.0, 2.0 }
    local y = ((x * w):exp() + x * x):sum() -- dy/dx = w e^(xw) + 2x, dy/dw = x e^(xw)
    assert.equal("SumBackward", y.grad_fn)
    assert.is_false(y.is_leaf)
    assert.is_true(x.is_leaf)
    assert.is_nil(x.grad_fn)
    y:backward()
    local xs, ws = { 1, 2, 3 }, { 0.5, -1, 2 }
    local gx, gw = {}, {}
    for i = 1, 3 do
      gx[i] = ws[i] * math.exp(xs[i] * ws[i]) + 2 * xs[i]
      gw[i] = xs[i] * math.exp(xs[i] * ws[i])
    end
    h.near(gx, x.grad:totable(), 1e-12)
    h.near(gw, w.grad:totable(), 1e-12)
  end)

  it("takes a gradient for a non-scalar root", function()
    local x = leaf { 1.0, 2.0 }
    local y = x * 3
    y:backward(lt.tensor({ 1.0, -2.0 }, { dtype = "float64" }))
    h.near({ 3, -6 }, x.grad:totable())
  end)

  it("accumulates until the gradient is set to nil", function()
    local x = leaf { 1.0, 2.0 }
    for _ = 1, 2 do (x * x):sum():backward() end
    h.near({ 4, 8 }, x.grad:totable())
    x.grad = nil
    assert.is_nil(x.grad);
    (x * 3):sum():backward()
    h.near({ 3, 3 }, x.grad:totable())
  end)

  it("keeps the graph with retain_graph and frees it otherwise", function()
    local x = leaf { 2.0 }
    local y = (x * x):sum()
    y:backward(nil, { retain_graph = true })
    y:backward({ retain_graph = true }) -- the options may come without a grad
    y:backward()
    h.near({ 12 }, x.grad:totable())
    h.fails_cleanly(function() y:backward() end, "backward through the graph a second time",
      "retain_graph")
  end)

  it("refuses a non-scalar root without a gradient", function()
    h.fails_cleanly(function() (leaf { 1.0, 2.0 } * 2):backward() end,
      "grad can be implicitly created only for scalar outputs", "[2]")
  end)

  it("refuses a tensor that does not require grad", function()
    h.fails_cleanly(function() lt.ones(2):sum():backward() end, "does not require grad")
  end)

  it("refuses bad arguments", function()
    local x = leaf { 1.0 }
    h.fails_cleanly(function() (x * 2):sum():backward(5) end, "backward: expected a tensor or nil as grad, got number")
    h.fails_cleanly(function() (x * 2):sum():backward(nil, { retain = true }) end,
      "unknown option 'retain'")
    h.fails_cleanly(function() (x * 2):backward(lt.ones(3, { dtype = "float64" })) end,
      "mismatch in shape", "[3]", "[1]")
  end)

  it("names both ops when a saved tensor was written in place", function()
    h.fails_cleanly(function()
      local s = F.softmax(leaf { 1.0, 2.0, 3.0 }, 1)
      s:add_(1)
      s:sum():backward()
    end, "SoftmaxBackward", "add_", "modified by an in-place operation")
    h.fails_cleanly(function()
      local y = leaf({ 1.0, 2.0 }):exp()
      local z = y:sum() * 1
      y:mul_(2)
      z:backward()
    end, "ExpBackward", "mul_")
  end)
end)

describe("requires_grad", function()
  it("is set through requires_grad_ and the field", function()
    local t = lt.zeros(2)
    assert.is_false(t.requires_grad)
    assert.equal(t, t:requires_grad_())
    assert.is_true(t.requires_grad)
    t:requires_grad_(false)
    assert.is_false(t.requires_grad)
    t.requires_grad = true
    assert.is_true(t.requires_grad)
  end)

  it("refuses integer tensors", function()
    h.fails_cleanly(function() lt.tensor({ 1, 2 }):requires_grad_(true) end,
      "requires_grad_", "only floating point tensors can require gradients", "int64")
    h.fails_cleanly(function() lt.tensor({ 1, 2 }).requires_grad = true end, "int64")
  end)

  it("cannot be turned off on a computed tensor", function()
    h.fails_cleanly(function() (leaf { 1.0 } * 2):requires_grad_(false) end,
      "only change requires_grad flags of leaf tensors", "detach")
  end)
end)

describe("detach", function()
  it("gives a leaf that shares storage and records nothing", function()
    local x = leaf { 1.0, 2.0 }
    local y = (x * 2):detach()
    assert.is_true(y.is_leaf)
    assert.is_false(y.requires_grad)
    assert.is_nil(y.grad_fn)
    local z = x:detach()
    z:fill_(5)
    h.near({ 5, 5 }, x:totable())
  end)
end)

describe("grad mode", function()
  it("no_grad(fn, ...) records nothing and returns fn's results", function()
    local x = leaf { 1.0 }
    local a, b, c = lt.no_grad(function(p, q) return x * p, q, lt.is_grad_enabled() end, 3, "k")
    assert.is_false(a.requires_grad)
    assert.is_nil(a.grad_fn)
    assert.equal("k", b)
    assert.is_false(c)
    assert.is_true(lt.is_grad_enabled())
  end)

  it("no_grad(fn) restores the mode when fn fails, with fn's error", function()
    local err = h.fails_cleanly(function() lt.no_grad(function() error("inner failure") end) end,
      "inner failure")
    assert.truthy(err)
    assert.is_true(lt.is_grad_enabled())
    local ok, obj = pcall(lt.no_grad, function() error({ code = 7 }) end)
    assert.is_false(ok)
    assert.equal(7, obj.code) -- the error value itself
    assert.is_true(lt.is_grad_enabled())
  end)

  it("a <close> guard turns grad off for its scope, also on error", function()
    do
      local g <close> = lt.no_grad()
      assert.is_false(lt.is_grad_enabled())
      assert.is_false((leaf { 1.0 } * 2).requires_grad)
    end
    assert.is_true(lt.is_grad_enabled())
    local ok = pcall(function()
      local g <close> = lt.no_grad()
      error("fails inside")
    end)
    assert.is_false(ok)
    assert.is_true(lt.is_grad_enabled())
  end)

  it("enable_grad works in both forms inside no_grad", function()
    lt.no_grad(function()
      local y = lt.enable_grad(function() return leaf { 1.0 } * 2 end)
      assert.is_true(y.requires_grad)
      assert.is_false(lt.is_grad_enabled())
      do
        local g <close> = lt.enable_grad()
        assert.is_true(lt.is_grad_enabled())
      end
      assert.is_false(lt.is_grad_enabled())
    end)
    assert.is_true(lt.is_grad_enabled())
  end)

  it("set_grad_enabled returns the previous mode", function()
    assert.is_true(lt.set_grad_enabled(false))
    assert.is_false(lt.is_grad_enabled())
    assert.is_false(lt.set_grad_enabled(true))
    assert.is_true(lt.is_grad_enabled())
    h.fails_cleanly(function() lt.set_grad_enabled(1) end, "set_grad_enabled: expected a boolean")
    h.fails_cleanly(function() lt.no_grad(42) end, "no_grad: expected a function")
  end)
end)

describe("graph memory", function()
  it("is given back by backward and never taken under no_grad", function()
    local x = lt.randn(64, 32, { dtype = "float64", requires_grad = true })
    local w = lt.randn(16, 32, { dtype = "float64", requires_grad = true })
    local loss_bytes = scalar_bytes("float64")
    local before = settled()
    local function forward()
      return F.log_softmax(F.linear(x, w):tanh(), 2):exp():sum()
    end
    local loss = forward()
    assert.is_true(settled() > before + loss_bytes) -- saved tensors outlive their handles
    assert.is_true(lt.memory.stats().by_category.activation.current > 0)
    loss:backward()
    x.grad, w.grad = nil, nil
    assert.equal(before + loss_bytes, settled())
    loss = nil
    assert.equal(before, settled())
    loss = lt.no_grad(forward)
    assert.equal(before + loss_bytes, settled())
    loss = nil
    assert.equal(before, settled())
  end)
end)

describe("lt.autograd.Function", function()
  local Square = lt.autograd.Function:extend("Square")
  function Square.forward(ctx, x)
    ctx:save_for_backward(x)
    return x * x
  end
  function Square.backward(ctx, g)
    local x = ctx:saved_tensors()
    return 2 * x * g
  end

  it("runs forward without recording and backward from Lua", function()
    local x = leaf { 1.0, -2.0, 3.0 }
    local y = Square.apply(x)
    assert.equal("SquareBackward", y.grad_fn)
    h.near({ 1, 4, 9 }, y:totable())
    y:sum():backward()
    h.near({ 2, -4, 6 }, x.grad:totable())
    assert.is_true(lt.autograd.gradcheck(Square.apply, { leaf { 0.3, -1.2 } }))
  end)

  it("records nothing when no input requires grad", function()
    local y = Square.apply(lt.tensor { 1.0, 2.0 })
    assert.is_false(y.requires_grad)
    assert.is_nil(y.grad_fn)
    y = lt.no_grad(Square.apply, leaf { 1.0 })
    assert.is_nil(y.grad_fn)
  end)

  it("takes several inputs and outputs and passes other values through", function()
    local MulAdd = lt.autograd.Function:extend("MulAdd")
    local seen
    function MulAdd.forward(ctx, a, k, b)
      ctx:save_for_backward(a, b)
      ctx.k = k
      seen = ctx.needs_input_grad
      return a * b * k, "tag", a + b
    end
    function MulAdd.backward(ctx, g1, g2)
      local a, b = ctx:saved_tensors()
      return g1 * b * ctx.k + g2, nil, g1 * a * ctx.k + g2
    end
    local a, b = leaf { 1.0, 2.0 }, lt.tensor({ 3.0, 4.0 }, { dtype = "float64" })
    local p, tag, s = MulAdd.apply(a, 2, b)
    assert.equal("tag", tag)
    assert.same({ true, false, false }, seen)
    assert.equal("MulAddBackward", p.grad_fn)
    assert.equal("MulAddBackward", s.grad_fn);
    (p:sum() + s:sum() * 10):backward()
    h.near({ 3 * 2 + 10, 4 * 2 + 10 }, a.grad:totable())
    -- only one output used: the other one's gradient arrives as zeros
    a.grad = nil
    local _, _, s2 = MulAdd.apply(a, 2, b)
    s2:sum():backward()
    h.near({ 1, 1 }, a.grad:totable())
    local function both(x, y) local q, _, r = MulAdd.apply(x, 0.5, y) return q, r end
    assert.is_true(lt.autograd.gradcheck(both, { leaf { 0.3, 0.7 }, leaf { -1.0, 2.0 } }))
  end)

  it("turns an error in backward into a Lua error and goes on", function()
    local Bad = lt.autograd.Function:extend("Bad")
    function Bad.forward(ctx, x) return x * 2 end
    function Bad.backward(ctx, g) error("boom in backward") end
    h.fails_cleanly(function() Bad.apply(leaf { 1.0 }):sum():backward() end,
      "Bad.backward", "boom in backward")
    assert.is_true(lt.is_grad_enabled())
    local Wrong = lt.autograd.Function:extend("Wrong")
    function Wrong.forward(ctx, x) return x * 2 end
    function Wrong.backward(ctx, g) return "not a tensor" end
    h.fails_cleanly(function() Wrong.apply(leaf { 1.0 }):sum():backward() end,
      "Wrong.backward", "expected a tensor or nil as the gradient of input 1, got string")
    local x = leaf { 1.0 }
    Square.apply(x):sum():backward() -- still works
    h.near({ 2 }, x.grad:totable())
  end)

  it("refuses saved tensors written in place and saved_tensors outside backward", function()
    h.fails_cleanly(function()
      local x = leaf { 1.0 }
      local y = x * 1
      local z = Square.apply(y)
      y:add_(1)
      z:sum():backward()
    end, "SquareBackward", "add_", "modified by an in-place operation")
    local Peek = lt.autograd.Function:extend("Peek")
    function Peek.forward(ctx, x)
      ctx:save_for_backward(x)
      return x * 1, ctx
    end
    function Peek.backward(ctx, g) return g end
    local _, ctx = Peek.apply(leaf { 1.0 })
    h.fails(function() ctx:saved_tensors() end, "saved tensors can only be read inside backward")
    h.fails(function() Peek.apply(Peek) end, "save_for_backward: argument 1 is not a tensor (table)")
  end)

  it("keeps no output alive and frees what it saved after backward", function()
    local Exp = lt.autograd.Function:extend("Exp")
    function Exp.forward(ctx, x)
      local y = x:exp()
      ctx:save_for_backward(y) -- an output: no reference cycle
      return y
    end
    function Exp.backward(ctx, g) return ctx:saved_tensors() * g end
    local x = lt.randn(100, { dtype = "float64", requires_grad = true })
    local loss_bytes = scalar_bytes("float64")
    local before = settled()
    local loss = Exp.apply(x * 2):sum()
    assert.is_true(settled() > before + loss_bytes)
    loss:backward()
    x.grad = nil
    assert.equal(before + loss_bytes, settled())
    loss = nil
    assert.equal(before, settled())
    -- a graph dropped without backward goes too
    loss = Exp.apply(x * 2):sum()
    loss = nil
    assert.equal(before, settled())
  end)
end)
