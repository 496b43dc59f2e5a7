-- Every unary elementwise op against PyTorch's values and input gradients
-- (tests/fixtures/unary/cases.lua), in float64 to 1e-12 and float32 to
-- float32's rounding, and against float64 finite differences; the fixture
-- must cover every op lt has (lt/ops.h's LT_UNARY_OPS rows).
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local cases = dofile("tests/fixtures/unary/cases.lua")

local function near(expected, actual, tol, what)
  assert.equal(#expected, #actual, what)
  for i = 1, #expected do
    local e, a = expected[i], actual[i]
    local scale = math.max(1, math.abs(e))
    assert(math.abs(e - a) <= tol * scale, ("%s: element %d is %.17g, PyTorch %.17g"):format(what, i, a, e))
  end
end

describe("unary ops against PyTorch", function()
  for _, c in ipairs(cases) do
    it(c.op .. ": values and gradient (float64, float32)", function()
      local x = lt.tensor(c.x, { dtype = "float64" })
      if type(c.out[1]) == "boolean" then
        assert.same(c.out, x[c.op](x):totable())
        return
      end
      near(c.out, x[c.op](x):totable(), 1e-12, c.op)
      local x32 = lt.tensor(c.x)
      near(c.out, x32[c.op](x32):totable(), 2e-6, c.op .. " float32")
      local leaf = lt.tensor(c.x, { dtype = "float64" }):requires_grad_()
      local out = leaf[c.op](leaf)
      local weighted = out * lt.tensor(c.grad_out, { dtype = "float64" })
      weighted:sum():backward()
      near(c.grad, leaf.grad:totable(), 1e-12, c.op .. " gradient")
    end)
  end

  it("finite differences agree with erf's formula (float64)", function()
    local x = lt.tensor({ -1.7, -0.2, 0.4, 2.1 }, { dtype = "float64" }):requires_grad_()
    assert.is_true(lt.autograd.gradcheck(function(t) return t:erf() end, { x }))
  end)

  it("the fixture covers every unary op, and every op has its in-place form", function()
    local covered = {}
    for _, c in ipairs(cases) do covered[c.op] = true end
    -- The rows of the op table itself, X(ID, name, ...), from the header.
    local header = assert(io.open("engine/include/lt/ops.h")):read("a")
    local rows = header:match("#define LT_UNARY_OPS%(X%)(.-)\n\n")
    local ops = {}
    for name in rows:gmatch("X%(%u[%u_]*, ([%l_]+),") do ops[#ops + 1] = name end
    assert.is_true(#ops >= 19, "read the rows of LT_UNARY_OPS")
    for _, name in ipairs(ops) do
      assert(covered[name], "no PyTorch case for unary op " .. name)
      local t = lt.tensor({ 0.25, 0.5 })
      assert.equal(t, t[name .. "_"](t), name .. "_ returns its tensor")
    end
  end)

  it("erf of an integer tensor is float32, as PyTorch's", function()
    local r = lt.tensor({ 0, 1 }):erf()
    assert.equal("float32", r.dtype)
    h.near({ 0, 0.8427007929497149 }, r:totable())
  end)
end)
