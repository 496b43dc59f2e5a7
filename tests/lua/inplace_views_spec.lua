-- In-place writes through views of tensors that require grad: the write is
-- recorded on the base (CopySlices) and every view of the base follows its
-- new history. Against PyTorch's numbers (tests/fixtures/inplace_views,
-- written by tests/fixtures/gen_inplace_views_fixture.py), by float64 finite
-- differences, and the writes that stay refused.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local cases = dofile("tests/fixtures/inplace_views/cases.lua")

local function to_tensor(spec) return h.fixture_tensor(spec, "float64") end

local function assert_close(spec, actual, what) h.fixture_close(spec, actual, what, 0, 1e-6) end

-- The functions of the generator, 1-based.
local fns = {
  narrow_mul = function(x)
    local y = x * 2
    y:narrow(2, 2, 2):mul_(3)
    return y
  end,
  select_add = function(x, b)
    local y = x * 1
    y:select(1, 2):add_(b)
    return y:sigmoid()
  end,
  copy_rows = function(r0, r2, x)
    local buf = lt.zeros(4, 3, { dtype = "float64" })
    buf:narrow(1, 1, 1):copy_(r0)
    buf[3]:copy_(r2 * r2)
    return buf * x
  end,
  transpose_mul = function(x, b)
    local y = x:sin()
    y:transpose(1, 2):mul_(b)
    return y
  end,
  two_writes = function(x, b)
    local y = x * 1
    local v1, v2 = y:narrow(1, 1, 3), y:narrow(1, 2, 3)
    v1:mul_(b)
    v2:tanh_()
    return v1 * v2
  end,
  view_of_view = function(x, b)
    local y = x * 1
    local v = y[2]:narrow(1, 2, 2)
    v:mul_(b)
    v:clamp_(nil, 1.2)
    return y
  end,
  zero_select = function(x)
    local y = x:sin()
    y:select(2, 1):zero_()
    return y * y
  end,
}

describe("in-place writes through views against PyTorch (float64)", function()
  for _, case in ipairs(cases) do
    it(case.name, function()
      local fn = assert(fns[case.name], "no lt function for " .. case.name)
      local inputs = {}
      for i = 1, #case.inputs - 1 do
        inputs[i] = to_tensor(case.inputs[i]):requires_grad_()
      end
      local w = to_tensor(case.inputs[#case.inputs])
      local out = fn(table.unpack(inputs))
      assert_close(case.out, out, case.name .. " out")
      local loss = (out * w):sum()
      loss:backward()
      for i, g in ipairs(case.grads) do
        local got = inputs[i].grad or lt.zeros(inputs[i].shape, { dtype = "float64" })
        assert_close(g, got, case.name .. " grad " .. i)
      end
    end)
  end
end)

describe("in-place writes through views by finite differences", function()
  for name, fn in pairs(fns) do
    it(name, function()
      local spec
      for _, c in ipairs(cases) do if c.name == name then spec = c end end
      local inputs = {}
      for i = 1, #spec.inputs - 1 do
        inputs[i] = lt.rand(spec.inputs[i].shape, { dtype = "float64" }) + 0.5
        inputs[i]:requires_grad_()
      end
      assert.is_true(lt.autograd.gradcheck(fn, inputs))
    end)
  end
end)

describe("in-place writes through views", function()
  it("records the write on the base and regenerates the views", function()
    local x = lt.randn(3, 4, { requires_grad = true })
    local y = x * 2
    local col = y:select(2, 2)
    local row = y[1]
    row:mul_(3)
    assert.equal("CopySlices", y.grad_fn)
    assert.equal("AsStridedBackward", row.grad_fn)
    assert.equal("AsStridedBackward", col.grad_fn) -- a view made before the write
    col:sum():backward()
    -- d col / d x: 2 on column 2, times 3 on row 1
    assert.same({ { 0, 6, 0, 0 }, { 0, 2, 0, 0 }, { 0, 2, 0, 0 } }, x.grad:totable())
  end)

  it("t[i] = v builds a tensor from rows that require grad", function()
    local rows = lt.randn(2, 3, { requires_grad = true })
    local buf = lt.zeros(3, 3)
    buf[1] = rows[1]
    buf[3] = rows[2] * 2
    assert.is_true(buf.requires_grad)
    buf:sum():backward()
    assert.same({ { 1, 1, 1 }, { 2, 2, 2 } }, rows.grad:totable())
  end)

  it("refuses a view of a leaf that requires grad, naming the op; no_grad allows it", function()
    local w = lt.ones(2, 3, { requires_grad = true })
    h.fails_cleanly(function() w:narrow(2, 1, 2):add_(1) end,
      "add_", "a view of a leaf tensor that requires grad is used in an in-place operation")
    assert.same({ { 1, 1, 1 }, { 1, 1, 1 } }, w:totable())
    lt.no_grad(function() w[1]:zero_() end)
    assert.same({ { 0, 0, 0 }, { 1, 1, 1 } }, w:totable())
    assert.is_true(w.is_leaf)
  end)

  it("refuses a write with grad into a view made under no_grad", function()
    local buf = lt.zeros(2, 3)
    local row = lt.no_grad(function() return buf[1] end)
    local src = lt.randn(3, { requires_grad = true })
    h.fails_cleanly(function() row:copy_(src) end, "copy_", "view made under no_grad")
    assert.is_false(buf.requires_grad)
  end)

  it("a tensor saved before a write through its view makes backward fail", function()
    local x = lt.randn(3, 4, { requires_grad = true })
    local s = x:sigmoid() -- SigmoidBackward keeps its result
    s:narrow(1, 1, 1):mul_(2)
    h.fails(function() s:sum():backward() end, "SigmoidBackward", "(mul_)",
      "modified by an in-place operation")
    local y = x * 1
    local z = y * x -- keeps y
    y[2]:zero_()
    h.fails(function() z:sum():backward() end, "MulBackward", "(zero_)",
      "modified by an in-place operation")
  end)
end)
