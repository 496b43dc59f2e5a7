-- remainder (%) and floor_divide (//), Python's operators as PyTorch has
-- them: against PyTorch's values bit for bit (tests/fixtures/remainder,
-- written by tests/fixtures/gen_remainder_fixture.py), remainder's gradient
-- against PyTorch's and by float64 finite differences, and the errors.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local cases = dofile("tests/fixtures/remainder/cases.lua")

local function operand(v, requires_grad)
  if type(v) == "number" then return v end
  local t = lt.tensor(v.data, { dtype = v.dtype }):view(v.shape)
  if requires_grad and v.dtype ~= "int64" then t:requires_grad_(true) end
  return t
end

-- Bit for bit: NaN where NaN is expected, the sign of zeros and infinities.
local function assert_exact(spec, actual, what)
  assert.equal(spec.dtype, actual.dtype, what .. ": dtype")
  assert.same(spec.shape, actual.shape, what .. ": shape")
  local got = actual:reshape(-1):totable()
  for i, e in ipairs(spec.data) do
    local g = got[i]
    local same = (e ~= e and g ~= g) or (e == g and (e ~= 0 or 1 / e == 1 / g))
    if not same then
      error(string.format("%s[%d]: expected %.17g, got %.17g", what, i, e, g), 2)
    end
  end
end

local OPERATORS = {
  remainder = function(a, b) return a % b end,
  floor_divide = function(a, b) return a // b end,
}

describe("remainder and floor_divide against PyTorch", function()
  for _, c in ipairs(cases) do
    it(c.name, function()
      local a, b = operand(c.a), operand(c.b)
      assert_exact(c.out, OPERATORS[c.op](a, b), "operator")
      assert_exact(c.out, lt[c.op](a, b), "lt." .. c.op)
      if type(c.a) == "table" then
        assert_exact(c.out, a[c.op](a, b), "method")
        if c.a.dtype == c.out.dtype then -- in place keeps a's dtype
          local t = a:clone()
          t[c.op .. "_"](t, b)
          assert_exact(c.out, t, "in place")
        end
      end
      if c.grads then
        local ga, gb = operand(c.a, true), operand(c.b, true)
        lt[c.op](ga, gb):sum():backward()
        assert_exact(c.grads.a, ga.grad, "grad a")
        if c.grads.b then assert_exact(c.grads.b, gb.grad, "grad b") end
      end
    end)
  end
end)

describe("remainder and floor_divide", function()
  it("remainder's gradient agrees with finite differences, a number on either side", function()
    -- Values away from the jumps of the floor (a / b not near an integer).
    local a = lt.tensor({5.3, -5.3, 2.2, -0.7}, { dtype = "float64", requires_grad = true })
    local b = lt.tensor({2.1, 2.1, -1.5, 0.9}, { dtype = "float64", requires_grad = true })
    assert.is_true(lt.autograd.gradcheck(function(x, y) return x % y end, { a, b }))
    assert.is_true(lt.autograd.gradcheck(function(x) return x % 1.7 end, { a }))
    -- PyTorch 1.13 has no derivative for a number % a tensor; it is -floor(s / b).
    assert.is_true(lt.autograd.gradcheck(function(y) return 7.3 % y end, { b }))
  end)

  it("integer division by zero is an error on the CPU, as PyTorch's ZeroDivisionError", function()
    local i = lt.tensor({7, -7})
    h.fails_cleanly(function() return i % lt.tensor({1, 0}) end, "remainder: integer division by zero")
    h.fails_cleanly(function() return i // 0 end, "floor_divide: integer division by zero")
    h.fails_cleanly(function() return 3 % lt.tensor({0}) end, "remainder: integer division by zero")
    h.fails_cleanly(function() return i:remainder_(0) end, "remainder_: integer division by zero")
    h.fails_cleanly(function() return i:floor_divide_(lt.tensor({0, 1})) end, "floor_divide_: integer division by zero")
    assert.same({7, -7}, i:totable()) -- the refused in-place ops wrote nothing
    -- A float divisor of 0 gives NaN and infinities, as PyTorch.
    local f = lt.tensor({1.0, -1.0, 0.0}) // 0.0
    assert.same({math.huge, -math.huge}, {f[1]:item(), f[2]:item()})
    assert.is_true(f[3]:item() ~= f[3]:item())
  end)

  it("INT64_MIN by -1 wraps instead of trapping", function()
    local m = lt.tensor({math.mininteger})
    assert.equal(math.mininteger, (m // -1):item())
    assert.equal(0, (m % -1):item())
  end)

  it("bool tensors, floor_divide's backward and bad operands are errors", function()
    h.fails_cleanly(function() return lt.tensor({true}) % lt.tensor({true}) end, "remainder: not implemented for bool tensors")
    local x = lt.tensor({5.5}, { requires_grad = true })
    local y = x // 2
    h.fails_cleanly(function() y:sum():backward() end, "the derivative of floor_divide is not implemented")
    h.fails_cleanly(function() return lt.ones(2) % "x" end, "remainder: expected a tensor or a number, got string")
    h.fails_cleanly(function() return lt.ones(2) // lt.ones(3) end, "floor_divide")
  end)
end)
