-- In-place ops whose input shares memory with the written tensor. PyTorch
-- refuses a provable partial overlap ("some elements of the input tensor and
-- the written-to tensor refer to a single memory location"); lt refuses the
-- same arithmetic, computes copy_ and slice assignment through a copy of the
-- source, and computes the views it cannot prove disjoint (strided ones
-- whose spans overlap) through a copy too. The same view (x:add_(x)) and
-- disjoint views (interleaved columns) stay legal and copy nothing.
local lt = require "lt"

local OVERLAP = "some elements of the input tensor and the written%-to tensor refer to a single memory location"

local function arange(n, dtype) return lt.arange(1, n + 1):to(dtype or "float32") end

local function assert_equal(actual, want) assert.same(want:totable(), actual:totable()) end

-- What the op means: the source read completely before anything is written.
local function expected(x, write)
  local y = x:clone()
  write(y, function(v) return v:clone() end)
  return y
end

describe("in-place ops over overlapping memory", function()
  local binary = { "add_", "sub_", "mul_", "div_", "pow_", "remainder_", "floor_divide_", "maximum_",
    "minimum_", "eq_", "ne_", "lt_", "le_", "gt_", "ge_" }

  for _, op in ipairs(binary) do
    it(op .. " refuses a shifted view of its own tensor and leaves it unchanged", function()
      local x = arange(5)
      local before = x:clone()
      local ok, err = pcall(function() x:narrow(1, 2, 4)[op](x:narrow(1, 2, 4), x:narrow(1, 1, 4)) end)
      assert.is_false(ok)
      assert.matches(op .. ": unsupported operation: " .. OVERLAP, err)
      assert.matches("overlap_spec.lua", err) -- positioned at the caller's line
      assert_equal(x, before)
    end)
  end

  it("refuses x:add_(x:t()) and a broadcast row of x itself", function()
    local x = arange(4):view(2, 2)
    local ok, err = pcall(function() x:add_(x:t()) end)
    assert.is_false(ok)
    assert.matches("add_: unsupported operation: " .. OVERLAP, err)
    local y = arange(9):view(3, 3)
    ok, err = pcall(function() y:mul_(y[1]) end)
    assert.is_false(ok)
    assert.matches("mul_: unsupported operation: " .. OVERLAP, err)
    assert_equal(x, arange(4):view(2, 2))
    assert_equal(y, arange(9):view(3, 3))
  end)

  it("keeps the same view legal: x:add_(x), x:mul_(x), x:copy_(x)", function()
    local x = arange(4)
    x:add_(x)
    assert.same({ 2, 4, 6, 8 }, x:totable())
    x:mul_(x)
    assert.same({ 4, 16, 36, 64 }, x:totable())
    x:copy_(x)
    assert.same({ 4, 16, 36, 64 }, x:totable())
    local m = arange(6):view(2, 3)
    m:t():add_(m:t())
    assert.same({ { 2, 4, 6 }, { 8, 10, 12 } }, m:totable())
  end)

  it("computes with disjoint interleaved columns of one tensor", function()
    local x = arange(6):view(2, 3)
    x:select(2, 1):add_(x:select(2, 2))
    assert.same({ { 3, 2, 3 }, { 9, 5, 6 } }, x:totable())
    x:select(2, 3):mul_(x:select(2, 1))
    assert.same({ { 3, 2, 9 }, { 9, 5, 54 } }, x:totable())
  end)

  it("copy_ of a shifted view reads the source first, in both directions", function()
    for _, dtype in ipairs({ "float32", "float64", "int64" }) do
      local right = arange(5, dtype)
      right:narrow(1, 2, 4):copy_(right:narrow(1, 1, 4))
      assert.same({ 1, 1, 2, 3, 4 }, right:totable())
      local left = arange(5, dtype)
      left:narrow(1, 1, 4):copy_(left:narrow(1, 2, 4))
      assert.same({ 2, 3, 4, 5, 5 }, left:totable())
    end
  end)

  it("copy_ of its own transpose transposes", function()
    local x = arange(4):view(2, 2)
    x:copy_(x:t())
    assert.same({ { 1, 3 }, { 2, 4 } }, x:totable())
    local y = arange(12):view(3, 4)
    local want = y:t():contiguous():view(3, 4)
    y:view(4, 3):copy_(y:t())
    assert_equal(y, want)
  end)

  it("slice assignment between overlapping rows and columns", function()
    local x = arange(9):view(3, 3)
    x[2] = x[1]
    assert.same({ { 1, 2, 3 }, { 1, 2, 3 }, { 7, 8, 9 } }, x:totable())
    local y = arange(9):view(3, 3)
    local want = expected(y, function(v, src) v:select(2, 1):copy_(src(v[1])) end)
    y:select(2, 1):copy_(y[1]) -- the column shares element (1, 1) with the row
    assert_equal(y, want)
    local z = arange(9):view(3, 3)
    local function top_left(v) return v:narrow(1, 1, 2):narrow(2, 1, 2) end
    local function bottom_right(v) return v:narrow(1, 2, 2):narrow(2, 2, 2) end
    want = expected(z, function(v, src) top_left(v):copy_(src(bottom_right(v))) end)
    top_left(z):copy_(bottom_right(z)) -- both share element (2, 2)
    assert_equal(z, want)
    assert.same({ { 5, 6, 3 }, { 8, 9, 6 }, { 7, 8, 9 } }, z:totable())
  end)

  it("computes strided views it cannot prove disjoint through a copy", function()
    -- Column 1 of a 4x3 tensor (elements 1, 4, 7, 10) and every other element
    -- (1, 3, 5, 7): neither view is dense, their spans overlap, and they
    -- share elements 1 and 7.
    local x = arange(12):view(4, 3)
    local function column(v) return v:select(2, 1) end
    local function odd(v) return v:view(6, 2):select(2, 1):narrow(1, 1, 4) end
    local want = expected(x, function(v, src) column(v):add_(src(odd(v))) end)
    column(x):add_(odd(x))
    assert_equal(x, want)
    assert.same({ 2, 2, 3, 7, 5, 6, 12, 8, 9, 17, 11, 12 }, x:view(12):totable())
  end)

  it("gradients flow through the copy made for an overlapping source", function()
    local x = arange(9, "float64"):view(3, 3):requires_grad_()
    local y = x * 1
    y:narrow(1, 2, 2):copy_(y:narrow(1, 1, 2))
    y:sum():backward()
    assert.same({ { 2, 2, 2 }, { 1, 1, 1 }, { 0, 0, 0 } }, x.grad:totable())
  end)

  it("batch_norm refuses running statistics that share memory with its operands", function()
    local buf = lt.zeros(6)
    local x = lt.randn(4, 3)
    local ok, err = pcall(function()
      lt.nn.functional.batch_norm(x, buf:narrow(1, 1, 3), buf:narrow(1, 2, 3), nil, nil, { training = true })
    end)
    assert.is_false(ok)
    assert.matches("batch_norm: unsupported operation: running_mean %(written%) and running_var %(read%) share memory", err)
    local rm = lt.zeros(3)
    ok, err = pcall(function()
      lt.nn.functional.batch_norm(x, rm, lt.ones(3), rm, nil, { training = true })
    end)
    assert.is_false(ok)
    assert.matches("running_mean %(written%) and weight %(read%) share memory", err)
    assert.same({ 0, 0, 0 }, rm:totable())
  end)

  it("optimizer steps refuse a gradient that shares memory with what they write", function()
    for _, make in ipairs({
      function(ps) return lt.optim.SGD(ps, { lr = 0.1 }) end,
      function(ps) return lt.optim.SGD(ps, { lr = 0.1, momentum = 0.9 }) end,
      function(ps) return lt.optim.Adam(ps, { lr = 0.1 }) end,
    }) do
      local p, q = lt.nn.Parameter(lt.randn(4)), lt.nn.Parameter(lt.randn(4))
      p.grad = q:detach() -- a view of the other parameter
      q.grad = lt.ones(4)
      local opt = make({ p, q })
      local before_p, before_q = p:clone(), q:clone()
      local ok, err = pcall(opt.step, opt)
      assert.is_false(ok)
      assert.matches("parameter 1 %(its gradient%) and parameter 2 %(the parameter%) share memory", err)
      assert_equal(p:detach(), before_p)
      assert_equal(q:detach(), before_q)
      p.grad = lt.ones(4) -- disjoint again: the step runs
      opt:step()
      assert.is_true((p - before_p):abs():max():item() > 0)
    end
  end)
end)
