-- Bad input of every kind: each error names the op and the values, nothing
-- leaks, and the session keeps working afterwards.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

describe("errors", function()
  it("wrong argument types name the function", function()
    local t = lt.ones(2, 2)
    h.fails_cleanly(function() return lt.zeros("a") end, "zeros: expected sizes")
    h.fails_cleanly(function() return lt.ones({}, "x") end, "ones: expected an options table, got string")
    h.fails_cleanly(function() return t:add({}) end, "add: expected a tensor or a number, got table")
    h.fails_cleanly(function() return t:transpose("a", 1) end, "transpose: expected an integer for a dimension, got string")
    h.fails_cleanly(function() return t:narrow(1, 1.5, 1) end, "narrow: expected an integer for the start, got 1.5")
    h.fails_cleanly(function() return t:view({ 2, "x" }) end, "view: size 2 must be an integer, got string")
    h.fails_cleanly(function() return t:squeeze("x") end, "squeeze: expected an integer for a dimension, got string")
    h.fails_cleanly(function() return lt.Tensor.sum(5) end, "sum: expected a tensor, got number")
    h.fails_cleanly(function() return lt.Tensor.exp("x") end, "exp: expected a tensor, got string")
    h.fails_cleanly(function() return t:requires_grad_("yes") end, "requires_grad_: expected a boolean, got string")
    h.fails_cleanly(function() return lt.where(5, t, t) end, "where: expected a tensor, got number")
  end)

  it("shape, dtype and device mismatches name the op and the values", function()
    h.fails_cleanly(function() return lt.ones(2, 3) + lt.ones(4, 3) end, "add:", "[2, 3]", "[4, 3]")
    h.fails_cleanly(function() return lt.ones(2, 3):matmul(lt.ones(2, 3)) end, "matmul:", "[2, 3]")
    h.fails_cleanly(function() return lt.ones(2):view(3) end, "view: shape [3] is invalid for input of size 2")
    h.fails_cleanly(function() return lt.tensor({ 1, 2 }):log_() end, "log_")
    h.fails_cleanly(function() return lt.cat({ lt.ones(2, 3), lt.ones(2, 4) }) end, "cat:")
  end)

  it("out-of-range dims and indices are reported as the user wrote them (1-based)", function()
    local t = lt.ones(2, 3)
    h.fails_cleanly(function() return t:transpose(1, 3) end, "transpose: dimension 3 out of range (expected 1 to 2")
    h.fails_cleanly(function() return t:sum(-3) end, "sum: dimension -3 out of range")
    h.fails_cleanly(function() return t[3] end, "index 3 is out of bounds for dimension 1 with size 2")
    h.fails_cleanly(function() return t[1][4] end, "index 4 is out of bounds for dimension 1 with size 3")
    h.fails_cleanly(function() return t:select(2, 4) end, "index 4 is out of bounds for dimension 2 with size 3")
    h.fails_cleanly(function() return t:unsqueeze(0) end, "unsqueeze: dimension 0 out of range")
  end)

  -- Found by a random-argument fuzz under ASan + UBSan: each was a signed
  -- overflow or a Lua runtime error instead of the op's own message.
  it("extreme integers are errors, not overflows", function()
    local big, small = math.maxinteger, math.mininteger
    h.fails_cleanly(function() return lt.arange(small, big) end, "arange: too many elements")
    local t = lt.arange(small, big, 1 << 62)
    assert.same({small, -(1 << 62), 0, 1 << 62}, t:totable())
    h.fails_cleanly(function() return lt.ones(6):view(big, 3) end, "view: shape [9223372036854775807, 3] is invalid")
    h.fails_cleanly(function() return lt.ones(6):view(1 << 53, 1 << 53, -1) end, "view: shape")
    assert.same({0, big, 3}, lt.ones(0):view(0, big, 3).shape)
    h.fails_cleanly(function() return lt.nn.functional.max_pool2d(lt.ones(1, 1, 4, 4), big) end,
      "max_pool2d: kernel size must be at most 2147483647")
    h.fails_cleanly(function() return lt.nn.functional.conv2d(lt.ones(1, 1, 4, 4), lt.ones(1, 1, 1, 1), nil, {stride = big}) end,
      "conv2d: stride must be at most 2147483647")
    h.fails_cleanly(function() return lt.nn.Conv2d(1e300, 2, 3) end, "Conv2d: expected an integer for in_channels, got 1e+300")
    h.fails_cleanly(function() return lt.nn.MaxPool2d(math.huge) end, "MaxPool2d: expected an integer for kernel_size, got inf")
    assert.equal(3, lt.nn.Linear(3.0, 2).in_features)
  end)

  it("modules and backward name themselves for arguments of the wrong type", function()
    h.fails_cleanly(function() return lt.nn.BatchNorm2d(3)(5) end, "BatchNorm2d: expected a tensor, got number")
    local y = (lt.ones(2, {requires_grad = true}) * 2):sum()
    h.fails_cleanly(function() return y:backward(nil, "yes") end, "backward: expected an options table, got string")
  end)

  it("errors carry the script position, like any Lua error", function()
    local err = h.fails(function() return lt.ones(2):view(3) end)
    assert.is_truthy(err:find("errors_spec.lua:%d+: view:"))
    -- also when the op is called by lt's own Lua code (F.*, a module's
    -- forward): the position is the script's call, not the library's line
    -- (no tail calls here: they would hide this file's frame)
    err = h.fails(function()
      local loss = lt.nn.functional.cross_entropy(lt.randn(4, 3), lt.tensor({1, 2, 3, 9}, {dtype = "int64"}))
      return loss
    end)
    assert.is_truthy(err:find("errors_spec.lua:%d+: cross_entropy: target 9 is out of bounds"), err)
    err = h.fails(function()
      local y = lt.nn.Linear(5, 2)(lt.randn(4, 3))
      return y
    end)
    assert.is_truthy(err:find("errors_spec.lua:%d+: linear:"), err)
  end)

  it("many errors in a row leave no garbage behind", function()
    lt.gc()
    local before = lt.memory.allocated()
    for _ = 1, 1000 do
      pcall(function() return lt.ones(2, 3) + lt.ones(4) end)
      pcall(function() return lt.ones(3)[7] end)
    end
    lt.gc()
    assert.equal(before, lt.memory.allocated())
  end)
end)
