-- Dropout in place (F.dropout's inplace, nn.Dropout{inplace=true}): the same
-- values and gradients as out of place under one seed, the input written and
-- returned, the in-place rules of autograd, and the memory it saves, in exact
-- allocator bytes on the CPU.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn, F = lt.nn, lt.nn.functional

-- Dropout of a copy of x under seed, out of place and in place.
local function both(x, p, seed)
  lt.manual_seed(seed)
  local out = F.dropout(x:clone(), p, true)
  lt.manual_seed(seed)
  local target = x:clone()
  local returned = F.dropout(target, p, true, true)
  return out, target, returned
end

describe("F.dropout in place", function()
  it("draws the same mask as out of place, writes x and returns it", function()
    local x = lt.randn(8, 16)
    local out, target, returned = both(x, 0.4, 11)
    assert.is_true(rawequal(target, returned))
    assert.same(out:totable(), target:totable())
    -- Something was dropped and something kept, scaled by 1 / (1 - p).
    local zeros = target:eq(0):sum():item()
    assert.is_true(zeros > 0 and zeros < 128)
  end)

  it("takes the keyword form too: F.dropout(x, p, {training=, inplace=})", function()
    local x = lt.randn(5, 7)
    lt.manual_seed(3)
    local out = F.dropout(x, 0.5)
    lt.manual_seed(3)
    local y = x:clone()
    assert.is_true(rawequal(y, F.dropout(y, 0.5, { inplace = true })))
    assert.same(out:totable(), y:totable())
    local z = x:clone()
    assert.is_true(rawequal(z, F.dropout(z, 0.5, { training = false, inplace = true })))
    assert.same(x:totable(), z:totable())
  end)

  it("leaves x as it is in evaluation and with p 0, and returns it", function()
    local x = lt.randn(3, 4)
    local values = x:totable()
    assert.is_true(rawequal(x, F.dropout(x, 0.5, false, true)))
    assert.is_true(rawequal(x, F.dropout(x, 0, true, true)))
    assert.same(values, x:totable())
    -- Nothing is written, so even a leaf that requires grad may pass (as PyTorch).
    local leaf = lt.randn(3, { requires_grad = true })
    assert.is_true(rawequal(leaf, F.dropout(leaf, 0.5, false, true)))
  end)

  it("zeroes everything with p 1", function()
    local x = lt.randn(4, 4)
    F.dropout(x, 1, true, true)
    assert.equal(0, x:abs():sum():item())
  end)

  it("writes non-contiguous and half precision tensors as out of place computes them", function()
    local base = lt.randn(6, 10)
    lt.manual_seed(21)
    local expected = F.dropout(base:t(), 0.3)
    local copy = base:clone()
    local view = copy:t()
    lt.manual_seed(21)
    assert.is_true(rawequal(view, F.dropout(view, 0.3, true, true)))
    assert.same(expected:totable(), view:totable())
    assert.same(expected:t():totable(), copy:totable()) -- written through to the base

    local half = lt.randn(4, 8):half()
    local out, target = both(half, 0.5, 8)
    assert.equal("float16", target.dtype)
    assert.same(out:float():totable(), target:float():totable())
  end)

  it("gives the gradient out of place gives", function()
    local x0 = lt.randn(6, 5, { requires_grad = true })
    local g = lt.randn(6, 5)
    lt.manual_seed(4)
    local y = F.dropout(x0 * 2, 0.5, true);
    (y * g):sum():backward()
    local expected = x0.grad:totable()
    x0.grad = nil

    lt.manual_seed(4)
    local z = x0 * 2
    local w = F.dropout(z, 0.5, true, true)
    assert.is_true(rawequal(z, w))
    assert.equal("NativeDropoutBackward", w.grad_fn)
    assert.same(y:detach():totable(), w:detach():totable());
    (w * g):sum():backward()
    h.near(expected, x0.grad:totable(), 1e-6)
  end)

  it("passes a float64 finite-difference check (one seed for every forward)", function()
    local fn = function(x)
      lt.manual_seed(9)
      return F.dropout(x * 1, 0.3, true, true)
    end
    assert.is_true(lt.autograd.gradcheck(fn, { lt.randn(4, 5, { dtype = "float64", requires_grad = true }) }))
  end)

  it("bumps the version: a tensor saved for backward and then dropped out makes backward fail", function()
    local x = lt.randn(3, 4, { requires_grad = true })
    local saved = x:exp() -- ExpBackward keeps its result
    F.dropout(saved, 0.5, true, true)
    h.fails(function() saved:sum():backward() end, "ExpBackward", "(dropout_)",
      "modified by an in-place operation")
  end)

  it("refuses a leaf or a view that requires grad, and the session goes on", function()
    local leaf = lt.randn(3, 4, { requires_grad = true })
    local before = leaf:totable()
    h.fails_cleanly(function() F.dropout(leaf, 0.5, true, true) end,
      "dropout_", "a leaf tensor that requires grad is used in an in-place operation")
    assert.same(before, leaf:totable()) -- refused before any write
    h.fails_cleanly(function() F.dropout(leaf:narrow(1, 1, 2), 0.5, true, true) end,
      "dropout_", "a view of a leaf tensor that requires grad is used in an in-place operation")
    -- A view of a computed tensor is written, and the write is recorded on its base.
    local y = leaf * 1
    F.dropout(y:narrow(1, 1, 2), 0.5, true, true)
    assert.equal("CopySlices", y.grad_fn)
    -- Under no_grad a leaf may be written, as by every in-place op.
    lt.no_grad(function() F.dropout(leaf, 0.5, true, true) end)
    assert.is_true(leaf.is_leaf)
  end)

  it("names the op and the value for bad arguments", function()
    h.fails_cleanly(function() F.dropout(lt.randn(3), 1.5, true, true) end,
      "dropout_", "between 0 and 1", "1.5")
    h.fails_cleanly(function() F.dropout(lt.tensor { 1, 2 }, 0.5, true, true) end, "dropout_", "int64")
    h.fails_cleanly(function() F.dropout(lt.randn(3), 0.5, true, "yes") end,
      "dropout", "inplace must be a boolean, got string")
    h.fails_cleanly(function() F.dropout(lt.randn(3), 0.5, { inplcae = true }) end,
      "dropout", "unknown option 'inplcae'")
    h.fails_cleanly(function() F.dropout(lt.randn(3), 0.5, { inplace = 1 }) end,
      "dropout", "inplace must be a boolean, got number")
    h.fails_cleanly(function() F.dropout(lt.zeros(4):expand(2, 4), 0.5, true, true) end,
      "dropout_", "single memory location")
  end)
end)

describe("F.dropout in place: memory", function()
  -- x: 64 x 64 float32, 16 KiB; its mask: 4 KiB of bool. Both multiples of
  -- the allocator's 512-byte rounding, so the byte counts are exact.
  local X_BYTES, MASK_BYTES = 64 * 64 * 4, 64 * 64

  local function settled()
    lt.gc()
    return lt.memory.allocated("cpu")
  end

  -- Bytes the allocator hands out during fn (cumulative, frees not netted).
  local function bytes_allocated_by(fn)
    lt.gc()
    local before = lt.memory.stats("cpu").allocated_bytes.all.allocated
    local keep = fn()
    local after = lt.memory.stats("cpu").allocated_bytes.all.allocated
    return after - before, keep
  end

  it("allocates only the mask: x's size less than out of place", function()
    local x = lt.randn(64, 64)
    local out_of_place = bytes_allocated_by(function()
      return lt.no_grad(function() return F.dropout(x, 0.5, true) end)
    end)
    local in_place = bytes_allocated_by(function()
      return lt.no_grad(function() return F.dropout(x, 0.5, true, true) end)
    end)
    assert.equal(MASK_BYTES + X_BYTES, out_of_place)
    assert.equal(MASK_BYTES, in_place)
    assert.equal(X_BYTES, out_of_place - in_place)
  end)

  it("keeps only the mask for backward, and its peak is x's size lower", function()
    local results = {}
    for _, inplace in ipairs { false, true } do
      local leaf = lt.randn(64, 64, { requires_grad = true })
      local z = leaf * 1
      local before = settled()
      lt.memory.reset_peak("cpu")
      local y = F.dropout(z, 0.5, true, inplace)
      results[inplace] = {
        peak = lt.memory.max_allocated("cpu") - before, held = settled() - before,
      }
      y:sum():backward()
    end
    -- Out of place: the mask (saved) and the result; in place: the mask.
    assert.same({ peak = MASK_BYTES + X_BYTES, held = MASK_BYTES + X_BYTES }, results[false])
    assert.same({ peak = MASK_BYTES, held = MASK_BYTES }, results[true])
  end)

  it("in evaluation allocates nothing", function()
    local x = lt.randn(64, 64)
    assert.equal(0, (bytes_allocated_by(function() return F.dropout(x, 0.5, false, true) end)))
  end)
end)

describe("nn.Dropout{inplace=true}", function()
  it("takes inplace as an option, positionally after p or with p in one table", function()
    assert.is_true(nn.Dropout(0.3, { inplace = true }).inplace)
    local d = nn.Dropout { p = 0.2, inplace = true }
    assert.equal(0.2, d.p)
    assert.is_true(d.inplace)
    assert.equal(0.5, nn.Dropout { inplace = true }.p)
    assert.is_false(nn.Dropout(0.3).inplace)
  end)

  it("shows inplace in its repr only when set, as ReLU does", function()
    assert.equal("Dropout(p=0.5, inplace=true)", tostring(nn.Dropout(0.5, { inplace = true })))
    assert.equal("Dropout(p=0.25)", tostring(nn.Dropout(0.25)))
  end)

  it("writes its input in training and is the identity in evaluation", function()
    local d = nn.Dropout(0.5, { inplace = true })
    local x = lt.randn(10, 10)
    lt.manual_seed(2)
    local expected = F.dropout(x, 0.5)
    lt.manual_seed(2)
    assert.is_true(rawequal(x, d(x)))
    assert.same(expected:totable(), x:totable())
    d:eval()
    local y = lt.randn(4)
    local values = y:totable()
    assert.is_true(rawequal(y, d(y)))
    assert.same(values, y:totable())
  end)

  it("trains a model to the same gradients as out-of-place dropout", function()
    local function grads(inplace)
      lt.manual_seed(30)
      local model = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.4, { inplace = inplace }), nn.ReLU(), nn.Linear(8, 3))
      local x, target = lt.randn(5, 6), lt.tensor { 1, 3, 2, 2, 1 }
      F.cross_entropy(model(x), target):backward()
      local out = {}
      for name, p in model:named_parameters() do out[name] = p.grad:totable() end
      return out
    end
    local expected, got = grads(false), grads(true)
    local n = 0
    for name, g in pairs(expected) do
      h.near(g, got[name], 1e-6)
      n = n + 1
    end
    assert.equal(4, n) -- two weights, two biases
  end)

  it("names the module for bad options", function()
    h.fails(function() nn.Dropout(0.5, { inplace = "yes" }) end, "Dropout: inplace must be a boolean, got string")
    h.fails(function() nn.Dropout(0.5, { inplcae = true }) end, "Dropout: unknown option 'inplcae'")
    h.fails(function() nn.Dropout { p = 2 } end, "Dropout: dropout probability has to be between 0 and 1, but got 2")
  end)
end)
