-- Torch7's slices: t[{ {}, -1, {2, 4} }] as PyTorch's t[:, -1, 1:4], read as
-- a view and written through one, with autograd, and their bad keys.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

describe("t[{ ... }]", function()
  it("reads views: {} whole, {a, b} inclusive ranges, numbers select", function()
    local t = lt.arange(1, 25):view(2, 3, 4)
    assert.same({ { 10, 11, 12 }, { 22, 23, 24 } }, t[{ {}, -1, { 2, 4 } }]:totable()) -- t[:, -1, 1:4]
    assert.same({ 2, 4 }, t[{ 2, { 1, 2 } }].shape)
    assert.same({ 1, 3 }, t[{ { 1 }, {}, 3 }].shape) -- {a} keeps the dimension
    assert.same({ 2, 3, 4 }, t[{}].shape)
    assert.same({ 0, 3, 4 }, t[{ { 2, 1 } }].shape) -- an empty range, as 1:1
    assert.same({ 21, 22 }, t[{ -1, -1, { -4, -3 } }]:totable())
    local v = t[{ 1, {}, 1 }]
    v:fill_(0) -- a view: writes reach t
    assert.same({ 0, 0, 0 }, t[{ 1, {}, 1 }]:totable())
  end)

  it("writes numbers, booleans and broadcast tensors through the view", function()
    local t = lt.zeros(3, 4)
    t[{ {}, { 2, 3 } }] = 5
    t[{ -1 }] = lt.tensor({ 1, 2, 3, 4 })
    t[{ 1, { 1, 2 } }] = lt.tensor({ 7 })
    assert.same({ { 7, 7, 5, 0 }, { 0, 5, 5, 0 }, { 1, 2, 3, 4 } }, t:totable())
    local b = lt.zeros(2, { dtype = "bool" })
    b[{ { 2 } }] = true
    assert.same({ false, true }, b:totable())
  end)

  it("carries gradients through the slice", function()
    local x = lt.randn(3, 4, { dtype = "float64", requires_grad = true })
    x[{ {}, { 2, 3 } }]:sum():backward()
    assert.same({ { 0, 1, 1, 0 }, { 0, 1, 1, 0 }, { 0, 1, 1, 0 } }, x.grad:totable())
    assert.is_true(lt.autograd.gradcheck(function(a) return a[{ -1, { 1, 2 } }] * 2 end, { x }))
  end)

  it("refuses bad keys with the dimension and the values", function()
    local t = lt.arange(1, 25):view(2, 3, 4)
    h.fails_cleanly(function() return t[{ 3 }] end, "index: index 3 is out of bounds for dimension 1 with size 2")
    h.fails_cleanly(function() return t[{ {}, { 2, 5 } }] end,
      "index: range {2, 5} is out of bounds for dimension 2 with size 3")
    h.fails_cleanly(function() return t[{ {}, {}, {}, 1 }] end, "index: 4 slices for a 3-dimensional tensor")
    h.fails_cleanly(function() return t[{ 1.5 }] end, "index: index in dimension 1 must be an integer, got 1.5")
    h.fails_cleanly(function() return t[{ { 1, 2, 3 } }] end, "index: a range in dimension 1 is {a, b}, got 3 numbers")
    h.fails_cleanly(function() return t[{ "a" }] end, "index: slice 1 must be a number, {} or {a, b}, got string")
    h.fails_cleanly(function() t[{ 1 }] = "x" end,
      "index assignment: expected a number, a boolean or a tensor, got string")
    h.fails_cleanly(function() t[{ 1 }] = lt.ones(5) end, "copy_")
  end)
end)
