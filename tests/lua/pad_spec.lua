-- F.pad (constant mode) and the string paddings of convolutions,
-- padding="same" and padding="valid", against PyTorch's numbers
-- (tests/fixtures/pad, written by tests/fixtures/gen_pad_fixture.py), by
-- float64 finite differences, and their messages for bad input.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn, F = lt.nn, lt.nn.functional

local FIXTURES = "tests/fixtures/pad/"

-- float32 against PyTorch's float32: a few ulps of the largest partial sums.
local REL, ABS = 1e-5, 1e-6

local to_tensor = h.fixture_tensor

local function assert_close(spec, actual, what) h.fixture_close(spec, actual, what, REL, ABS) end

-- ---- F against PyTorch ----

local calls = {
  pad = function(i, p) return F.pad(i.x, p.pad, p.opts) end,
  conv2d = function(i, p) return F.conv2d(i.x, i.w, i.b, p.opts) end,
}

local cases = dofile(FIXTURES .. "functional.lua")

describe("F.pad and F.conv2d padding='same'|'valid' against PyTorch (float32)", function()
  for _, case in ipairs(cases) do
    it(case.name, function()
      local inputs = {}
      for name, spec in pairs(case.inputs) do inputs[name] = to_tensor(spec):requires_grad_() end
      local out = calls[case.op](inputs, case.params)
      assert_close(case.out, out, "output")
      ;(out * to_tensor(case.grad_out)):sum():backward()
      for name, spec in pairs(case.grads) do assert_close(spec, inputs[name].grad, "gradient of " .. name) end
    end)
  end
end)

describe("F.pad and F.conv2d padding='same' against finite differences (float64)", function()
  for _, case in ipairs(cases) do
    it(case.name, function()
      local names = h.sorted_keys(case.inputs)
      local args = {}
      for k, name in ipairs(names) do args[k] = to_tensor(case.inputs[name], "float64"):requires_grad_() end
      local function fn(...)
        local inputs = {}
        for k, v in ipairs { ... } do inputs[names[k]] = v end
        return calls[case.op](inputs, case.params)
      end
      assert.is_true(lt.autograd.gradcheck(fn, args, { eps = 1e-6, atol = 1e-6, rtol = 1e-5 }))
    end)
  end

  it("pad twice, and a pad of a computed tensor", function()
    local fn = function(x) return F.pad(F.pad(x * 2, { 1, -1, 0, 2 }), { -2, 1 }, { value = 3 }) end
    assert.is_true(lt.autograd.gradcheck(fn, { lt.randn(3, 4, { dtype = "float64", requires_grad = true }) }))
  end)
end)

-- ---- nn.Conv2d against PyTorch ----

describe("nn.Conv2d padding='same'|'valid' against PyTorch (float32)", function()
  for _, case in ipairs(dofile(FIXTURES .. "modules.lua")) do
    it(case.name, function()
      local call = case.module
      local m = nn[call[1]](table.unpack(call, 2))
      local sd = {}
      for name, spec in pairs(case.state) do sd[name] = to_tensor(spec) end
      m:load_state_dict(sd)
      for _, pass in ipairs(case.passes) do
        local x = to_tensor(pass.inputs[1]):requires_grad_()
        local out = m(x)
        assert_close(pass.output, out, "output")
        ;(out * to_tensor(pass.grad_output)):sum():backward()
        assert_close(pass.grad_inputs[1], x.grad, "gradient of the input")
        for name, p in m:named_parameters() do assert_close(pass.grads[name], p.grad, "gradient of " .. name) end
      end
    end)
  end
end)

-- ---- behaviour ----

describe("F.pad", function()
  it("writes the value around the input, in the input's dtype", function()
    local x = lt.tensor { { 1, 2 }, { 3, 4 } }
    local y = F.pad(x, { 1, 0, 0, 1 }, { value = 7 })
    assert.equal("int64", y.dtype)
    assert.same({ { 7, 1, 2 }, { 7, 3, 4 }, { 7, 7, 7 } }, y:totable())
    assert.same({ { 0, 1, 2, 0 } }, F.pad(lt.tensor { { 1, 2 } }, { 1, 1 }):totable())
    assert.same({ { 2 } }, F.pad(x, { -1, 0, 0, -1 }):totable())
    assert.same({ { 0 } }, F.pad(lt.tensor { { 1, 2 } }, { -2, 1 }):totable())
    assert.equal(5.0, F.pad(lt.tensor(5.0), {}):item())
    assert.same({ 4 }, F.pad(lt.ones(2, { dtype = "bool" }), { 1, 1 }).shape)
    assert.same({ { 0, 1, 2, 0 }, { 0, 3, 4, 0 } }, F.pad(x, { 1, 1 }, { mode = "constant" }):totable())
  end)

  it("returns a new tensor: one allocation, never a view of its input", function()
    local x = lt.randn(4, 5)
    lt.gc()
    local before = lt.memory.stats().allocation.all.allocated
    local y = F.pad(x, { 1, 1, 2, 2 })
    assert.equal(before + 1, lt.memory.stats().allocation.all.allocated)
    local crop = F.pad(x, { -1, -1 })
    x:fill_(0)
    assert.is_true(y:abs():sum():item() > 0)
    assert.is_true(crop:abs():sum():item() > 0)
  end)

  it("records ConstantPadNdBackward only when a gradient is wanted", function()
    local x = lt.randn(2, 3, { requires_grad = true })
    assert.equal("ConstantPadNdBackward", F.pad(x, { 1, 1 }).grad_fn)
    lt.no_grad(function() assert.is_false(F.pad(x, { 1, 1 }).requires_grad) end)
    assert.is_false(F.pad(lt.randn(2, 3), { 1, 1 }).requires_grad)
  end)

  it("gives the input a gradient of its own shape and layout", function()
    local x = lt.randn(3, 4, { requires_grad = true })
    local g = lt.randn(5, 7)
    F.pad(x, { 1, 2, 2, 0 }):backward(g)
    assert.same({ 3, 4 }, x.grad.shape)
    assert.same(g:narrow(1, 3, 3):narrow(2, 2, 4):totable(), x.grad:totable())
    assert.is_true(x.grad:is_contiguous())
  end)

  it("refuses bad lists and modes, and the session goes on", function()
    local x = lt.randn(2, 3)
    h.fails_cleanly(function() return F.pad(x, { 1 }) end,
      "pad: the padding list must have an even length (a (before, after) pair per dimension), got 1 values")
    h.fails_cleanly(function() return F.pad(x, { 1, 1, 1, 1, 1, 1 }) end,
      "pad: the padding list has 6 values, more than 2 per dimension of a 2-dimensional tensor")
    h.fails_cleanly(function() return F.pad(x, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }) end,
      "pad: the padding list has 18 values, more than 2 per dimension of a 2-dimensional tensor")
    h.fails_cleanly(function() return F.pad(x, { -2, -2 }) end,
      "pad: padding (-2, -2) crops 4 elements from dimension 2, which has 3")
    h.fails_cleanly(function() return F.pad(x, { 0, 0, -3, 0 }) end,
      "pad: padding (-3, 0) crops 3 elements from dimension 1, which has 2")
    h.fails_cleanly(function() return F.pad(x, { 1, 1 }, { mode = "reflect" }) end,
      "pad: mode 'reflect' is not supported (expected 'constant')")
    h.fails_cleanly(function() return F.pad(x, { 1, 1 }, { mode = 1 }) end, "pad: mode must be a string, got number")
    h.fails_cleanly(function() return F.pad(x, { 1, 1 }, { fill = 1 }) end, "pad: unknown option 'fill'")
    h.fails_cleanly(function() return F.pad(x, { 1, 1 }, { value = "a" }) end, "pad: value must be a number, got string")
    h.fails_cleanly(function() return F.pad(x, { 1, 1.5 }) end, "pad: expected an integer for a padding, got 1.5")
    h.fails_cleanly(function() return F.pad(x, 1) end, "pad: expected a list of paddings {before, after, ...}, got number")
    h.fails_cleanly(function() return F.pad(x, { 1, 2 ^ 50 }) end,
      "pad: padding (1, 1125899906842624) of dimension 2 is too large")
    h.fails_cleanly(function() return F.pad(lt.zeros(2, { dtype = "uint8" }), { 1, 1 }, { value = 300 }) end,
      "pad: value 300 cannot be converted to type uint8 without overflow")
    h.fails_cleanly(function() return F.pad(nil, { 1, 1 }) end, "pad")
  end)
end)

describe("padding='same' and 'valid'", function()
  it("keeps the input's size for every kernel and dilation with stride 1", function()
    local x = lt.randn(1, 2, 7, 6)
    for _, k in ipairs { 1, 2, 3, 4, 5, { 2, 5 }, { 4, 1 } } do
      for _, d in ipairs { 1, 2, 3 } do
        local m = nn.Conv2d(2, 3, k, { padding = "same", dilation = d })
        assert.same({ 1, 3, 7, 6 }, m(x).shape)
        assert.same({ 1, 3, 7, 6 }, F.conv2d(x, m.weight, m.bias, { padding = "same", dilation = d }).shape)
      end
    end
    assert.same({ 1, 3, 5, 4 }, F.conv2d(x, lt.randn(3, 2, 3, 3), nil, { padding = "valid" }).shape)
  end)

  it("prints as PyTorch prints it", function()
    assert.equal("Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=same)",
      tostring(nn.Conv2d(1, 8, 3, { padding = "same" })))
    assert.equal("Conv2d(1, 8, kernel_size=(2, 4), stride=(1, 1), padding=valid, bias=false)",
      tostring(nn.Conv2d(1, 8, { 2, 4 }, { padding = "valid", bias = false })))
  end)

  it("refuses strides, unknown strings and bad arguments, and the session goes on", function()
    h.fails_cleanly(function() return nn.Conv2d(1, 8, 3, { padding = "same", stride = 2 }) end,
      "Conv2d: padding='same' is not supported for strided convolutions (got stride (2, 2))")
    h.fails_cleanly(function() return nn.Conv2d(1, 8, 3, { padding = "same", stride = { 1, 2 } }) end,
      "Conv2d: padding='same' is not supported for strided convolutions (got stride (1, 2))")
    h.fails_cleanly(function() return nn.Conv2d(1, 8, 3, { padding = "full" }) end,
      "Conv2d: padding must be a number, a pair, 'same' or 'valid', got 'full'")
    local x, w = lt.randn(1, 1, 5, 5), lt.randn(2, 1, 3, 3)
    h.fails_cleanly(function() return F.conv2d(x, w, nil, { padding = "same", stride = 2 }) end,
      "conv2d: padding='same' is not supported for strided convolutions (got stride (2, 2))")
    h.fails_cleanly(function() return F.conv2d(x, w, nil, { padding = "full" }) end,
      "conv2d: padding must be a number, a pair, 'same' or 'valid', got 'full'")
    -- errors name the script's line, as the C op's do when called directly
    -- (no tail calls here: they would hide this file's frame)
    local err = h.fails(function()
      local y = F.conv2d(x, w, nil, { padding = "same", stride = 2 })
      return y
    end)
    assert.truthy(err:find("pad_spec.lua:%d+: conv2d:"), err)
    err = h.fails(function()
      local y = F.conv2d(x, lt.randn(2, 3, 3, 3))
      return y
    end)
    assert.truthy(err:find("pad_spec.lua:%d+: conv2d:"), err)
    err = h.fails(function()
      local y = nn.Conv2d(1, 2, 2, { padding = "same" })(lt.randn(1, 3, 4, 4))
      return y
    end)
    assert.truthy(err:find("pad_spec.lua:%d+: conv2d: input %[1, 3, 4, 4%]"), err)
    -- what the conv op itself refuses is still its message
    h.fails_cleanly(function() return F.conv2d(x, w, nil, { padding = "same", dilation = "x" }) end, "conv2d", "dilation")
    h.fails_cleanly(function() return F.conv2d(x, w, nil, { padding = "same", colour = 1 }) end,
      "conv2d: unknown option 'colour'")
    h.fails_cleanly(function() return F.conv2d(x, lt.randn(2, 3, 3), nil, { padding = "same" }) end, "conv2d")
    h.fails_cleanly(function() return F.conv2d(x[1], lt.randn(2, 1, 2, 2), nil, { padding = "same" }) end,
      "conv2d: expected input with 4 dimensions [N, C, H, W], got [1, 5, 5]")
  end)
end)
