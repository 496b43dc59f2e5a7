-- split, chunk, masked_fill, tril, triu, bmm, baddbmm, var, std, norm,
-- gather, cumsum, F.normalize and F.cosine_similarity against
-- PyTorch's outputs and input gradients (tests/fixtures/tensor_ops/cases.lua,
-- float64, 1e-12), against float64 finite differences, and their bad input.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local cases = dofile("tests/fixtures/tensor_ops/cases.lua")

local function tensor(spec, requires_grad)
  local t = lt.tensor(spec.values, { dtype = spec.dtype }):view(spec.shape)
  if requires_grad then t:requires_grad_() end
  return t
end

local function near(expected, actual, what)
  assert.same(expected.shape, actual.shape, what .. ": shape")
  local got = actual:contiguous():view(-1):totable()
  for i, e in ipairs(expected.values) do
    assert(math.abs(e - got[i]) <= 1e-12 * math.max(1, math.abs(e)),
      ("%s: element %d is %.17g, PyTorch %.17g"):format(what, i, got[i], e))
  end
end

describe("tensor ops against PyTorch", function()
  for _, c in ipairs(cases) do
    it(c.name, function()
      local inputs = {}
      for i, name in ipairs(c.order) do
        local spec = c.inputs[name]
        inputs[i] = tensor(spec, spec.dtype == "float64")
      end
      local x = inputs[1]
      local args = {}
      if c.args_first then table.move(c.args, 1, #c.args, 1, args) end
      table.move(inputs, 2, #inputs, #args + 1, args)
      if not c.args_first then table.move(c.args, 1, #c.args, #args + 1, args) end
      local fn = lt.Tensor[c.op] or lt.nn.functional[c.op] -- normalize, cosine_similarity: F's
      local outs = fn(x, table.unpack(args))
      if lt.is_tensor(outs) then outs = { outs } end
      assert.equal(#c.outs, #outs, c.name .. ": pieces")
      local total
      for i, out in ipairs(outs) do
        near(c.outs[i], out, ("%s: output %d"):format(c.name, i))
        local term = (out * tensor(c.grad_outs[i])):sum()
        total = total and total + term or term
      end
      total:backward()
      for i, name in ipairs(c.order) do
        if c.grads[name] then near(c.grads[name], inputs[i].grad, ("%s: gradient of %s"):format(c.name, name)) end
      end
    end)
  end
end)

describe("tensor ops", function()
  it("split and chunk give views of the tensor", function()
    local t = lt.zeros(4, 3)
    local pieces = t:split(3)
    assert.equal(2, #pieces)
    pieces[2]:fill_(7)
    assert.same({ 7, 7, 7 }, t[4]:totable())
    assert.equal(2, #lt.chunk(t, 2))
    assert.equal(1, #lt.zeros(0, 2):chunk(3))
  end)

  it("split and select backward add into one gradient of the base, exactly as the sum of the parts", function()
    lt.manual_seed(1)
    local x = lt.randn(4, 6, 9):requires_grad_(true)
    local q, k, v = table.unpack(x:split(3, 3))
    local loss = (q * 2):sum() + q:sum() + k:exp():sum() + (v * v):sum() + x[{ {}, 2, {} }]:sum() * 3
    loss:backward()
    local d = x:detach()
    local want = lt.zeros(4, 6, 9)
    want[{ {}, {}, { 1, 3 } }] = lt.full({ 4, 6, 3 }, 3)
    want[{ {}, {}, { 4, 6 } }] = d[{ {}, {}, { 4, 6 } }]:exp()
    want[{ {}, {}, { 7, 9 } }] = d[{ {}, {}, { 7, 9 } }] * 2
    want[{ {}, 2, {} }] = want[{ {}, 2, {} }] + 3
    assert.equal(0, (x.grad - want):abs():max():item())
  end)

  it("a three-way split's backward makes one base-sized gradient, not one per piece", function()
    local KiB = 1024
    local y = lt.randn(64, 3 * 1024):requires_grad_(true) * 1 -- 768 KiB, pieces of 256
    collectgarbage()
    local base = lt.memory.allocated()
    lt.memory.reset_peak()
    local a, b, c = table.unpack(y:split(1024, 2))
    local loss = (a * b):sum() + c:sum()
    loss:backward()
    -- a * b (256 KiB), its two gradients (256 each), the base's gradient (768), a scalar's
    -- 512-byte block; a zero-filled base-sized gradient per piece peaked at 2048 KiB + 512.
    assert.equal(1536 * KiB + 512, lt.memory.max_allocated() - base)
  end)

  it("masked_fill_ and tril_ / triu_ write in place, and keep the dtype", function()
    local t = lt.arange(1, 7):view(2, 3)
    assert.equal(t, t:masked_fill_(t:gt(4), 0))
    assert.same({ { 1, 2, 3 }, { 4, 0, 0 } }, t:totable())
    assert.equal("int64", t:tril().dtype)
    local m = lt.ones(3, 3)
    assert.equal(m, m:triu_(1))
    assert.same({ { 0, 1, 1 }, { 0, 0, 1 }, { 0, 0, 0 } }, m:totable())
  end)

  it("var and std: finite differences, correction, a single element", function()
    local x = lt.randn(3, 4, { dtype = "float64" }):requires_grad_()
    assert.is_true(lt.autograd.gradcheck(function(t) return t:std(2) end, { x }))
    assert.is_true(lt.autograd.gradcheck(function(t) return lt.var(t, { correction = 0 }) end, { x }))
    local one = lt.tensor({ 2.0 }):var()
    assert.is_true(one:item() ~= one:item()) -- NaN, as PyTorch (no degree of freedom)
    assert.same({ 1, 1 }, lt.ones(2, 3):var(nil, { keepdim = true }).shape)
  end)

  it("cumsum of integers and bool gives int64, as PyTorch's; one element is a copy", function()
    assert.same({ 1, 3, 6 }, lt.tensor({ 1, 2, 3 }, { dtype = "int32" }):cumsum(1):totable())
    assert.equal("int64", lt.tensor({ 1, 2, 3 }, { dtype = "int32" }):cumsum(1).dtype)
    assert.same({ 1, 1, 2 }, lt.tensor({ true, false, true }):cumsum(1):totable())
    local one = lt.ones(1)
    assert.is_false(rawequal(one, one:cumsum(1)))
    h.fails_cleanly(function() return one:cumsum(2) end, "cumsum: dimension 2 out of range for a 1-dimensional tensor")
  end)

  it("norm's 2-norm has PyTorch's backward at zero, and agrees with finite differences", function()
    local x = lt.randn(3, 4, { dtype = "float64" }):requires_grad_()
    assert.is_true(lt.autograd.gradcheck(function(t) return t:norm(2, 2) end, { x }))
    assert.is_true(lt.autograd.gradcheck(function(t) return lt.nn.functional.cosine_similarity(t, t * 2 + 1) end, { x }))
    local zero = lt.zeros(2, { dtype = "float64" }):requires_grad_()
    zero:norm():backward()
    assert.same({ 0, 0 }, zero.grad:totable())
  end)

  it("refuse bad arguments with the op's name and the values", function()
    local t = lt.ones(3, 4)
    h.fails_cleanly(function() return t:split({ 1, 1 }) end, "split: sizes add up to 2, but dimension 1 has size 3")
    h.fails_cleanly(function() return t:split(0) end, "split: expected a positive split size or a list of sizes, got 0")
    h.fails_cleanly(function() return t:split(2, 3) end, "split: dimension 3 out of range for a 2-dimensional tensor")
    h.fails_cleanly(function() return t:chunk(0) end, "chunk: expected a positive number of chunks, got 0")
    h.fails_cleanly(function() return t:masked_fill(t, 1) end, "masked_fill: expected a bool mask tensor, got float32")
    h.fails_cleanly(function() return t:masked_fill(t:gt(0), "x") end, "masked_fill: expected a number for value, got string")
    h.fails_cleanly(function() return lt.ones(3):tril() end, "tril: expected a tensor of 2 or more dimensions, got 1")
    h.fails_cleanly(function() return t:triu(0.5) end, "triu: expected an integer diagonal, got 0.5")
    h.fails_cleanly(function() return t:bmm(t) end, "bmm: expected 3-D tensors, got 2-D and 2-D")
    h.fails_cleanly(function() return lt.ones(2, 3, 4):bmm(lt.ones(3, 4, 5)) end, "bmm: batch sizes differ: 2 and 3")
    h.fails_cleanly(function() return lt.ones(1, 2, 2):baddbmm(lt.ones(1, 2, 2), lt.ones(1, 2, 2), { gamma = 1 }) end,
      "baddbmm: unknown option 'gamma'")
    h.fails_cleanly(function() return t:var(1, { ddof = 1 }) end, "var: unknown option 'ddof'")
    h.fails_cleanly(function() return lt.Tensor.split(3, 1) end, "split: expected a tensor as self, got number")
    h.fails_cleanly(function() return t:norm(0) end, "norm: p must be a positive number, got 0")
    local picks = lt.tensor({ { 1, 5 } })
    h.fails_cleanly(function() return t:gather(2, picks) end, "gather: index value 5 at position [1, 2] is out of range for dimension 2 of size 4 (expected 1 to 4)")
    h.fails_cleanly(function() return t:gather(2, lt.tensor({ 1 })) end, "gather: index has 1 dimensions, self has 2 (they must match)")
    h.fails_cleanly(function() return t:gather(2, lt.tensor({ { 1.0 } })) end, "gather: expected an int64 index tensor, got float32")
    h.fails_cleanly(function() return t:gather(1, lt.ones(1, 5, { dtype = "int64" })) end,
      "gather: index is 5 in dimension 2, larger than self's 4")
    h.fails_cleanly(function() return lt.arange(3):norm() end, "norm: expected a floating tensor, got int64")
    h.fails_cleanly(function() return lt.nn.functional.normalize(t, { axis = 1 }) end, "normalize: unknown option 'axis'")
    h.fails_cleanly(function() return lt.nn.functional.cosine_similarity(t, 1) end, "cosine_similarity: expected a tensor, got number")
  end)
end)
