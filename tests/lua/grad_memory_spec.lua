-- Gradient and activation memory by exact bytes: reading p.grad never keeps
-- a gradient alive past zero_grad unless the script kept the handle, the
-- library frees its own temporaries, and by_category.activation counts
-- exactly what some graph still saves.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn = lt.nn

local function category(name) return lt.memory.stats().by_category[name].current end
local function gradient_bytes() return category("gradient") end
local function allocated() return lt.memory.allocated() end

-- One backward of a Linear(256, 256) over 4 rows: 262144 + 1024 gradient bytes.
local WEIGHT_GRAD, BIAS_GRAD = 256 * 256 * 4, 1024

local function linear_with_grads()
  local m = nn.Linear(256, 256)
  m(lt.randn(4, 256)):sum():backward()
  return m
end

describe("reading p.grad", function()
  before_each(function() lt.gc() end)

  it("leaves no gradient bytes after zero_grad (the issue's example)", function()
    local p = nn.Linear(256, 256); p(lt.randn(4, 256)):sum():backward(); p.weight.grad:mul_(1); p:zero_grad()
    assert.equal(0, gradient_bytes())
  end)

  it("leaves none after an optimizer's zero_grad, over several groups", function()
    local m = linear_with_grads()
    local opt = lt.optim.SGD({ { params = { m.weight } }, { params = { m.bias } } }, { lr = 0.1 })
    local function read_all()
      local sum = 0
      for _, p in ipairs(m:parameters()) do sum = sum + p.grad:abs():sum():item() end
      return sum
    end
    assert.is_true(read_all() > 0)
    assert.equal(WEIGHT_GRAD + BIAS_GRAD, gradient_bytes())
    opt:zero_grad()
    assert.equal(0, gradient_bytes())
    assert.is_nil(m.weight.grad)
  end)

  it("a kept handle keeps its bytes and stays valid, as in PyTorch", function()
    local m = linear_with_grads()
    local g = m.weight.grad
    local expected = g:sum():item()
    m:zero_grad()
    assert.is_nil(m.weight.grad)
    assert.equal(WEIGHT_GRAD, gradient_bytes())
    assert.equal(expected, g:sum():item())
    g = nil -- luacheck: ignore
    lt.gc()
    assert.equal(0, gradient_bytes())
  end)

  it("t.grad = nil drops the gradient; a handle the script kept stays valid", function()
    local m = linear_with_grads()
    local g = m.weight.grad
    local expected = g:sum():item()
    m.weight.grad = nil
    assert.is_nil(m.weight.grad)
    assert.equal(WEIGHT_GRAD + BIAS_GRAD, gradient_bytes())
    m.bias.grad = nil -- never read: its bytes go back at once
    assert.equal(WEIGHT_GRAD, gradient_bytes())
    assert.equal(expected, g:sum():item())
    m.weight.grad = g -- assigned back: cached again, and p.grad == p.grad
    assert.is_true(rawequal(g, m.weight.grad))
    g = nil -- luacheck: ignore
    m:zero_grad()
    assert.equal(0, gradient_bytes())
  end)

  it("zero_grad{set_to_none=false} zero-fills in place and keeps the bytes", function()
    local m = linear_with_grads()
    local opt = lt.optim.SGD(m:parameters(), { lr = 0.1 })
    local before = allocated()
    opt:zero_grad { set_to_none = false }
    m:zero_grad { set_to_none = false }
    assert.equal(before, allocated())
    assert.equal(WEIGHT_GRAD + BIAS_GRAD, gradient_bytes())
    assert.equal(0, m.weight.grad:abs():sum():item())
  end)

  it("lt.del of a tensor gives back its read gradient too, and counts it", function()
    local function with_grad()
      local p = lt.zeros(256, 256):requires_grad_(true)
      p.grad = lt.ones(256, 256)
      assert.equal(256 * 256, p.grad:sum():item())
      return p
    end
    local p = with_grad()
    lt.gc() -- the sum's result; p.grad's handle stays, held by p
    local before = allocated()
    assert.equal(2 * WEIGHT_GRAD, lt.del(p))
    assert.equal(before - 2 * WEIGHT_GRAD, allocated())
  end)

  it("module:to converts gradients without keeping the old ones", function()
    local m = linear_with_grads()
    m.weight.grad:mul_(1)
    lt.gc()
    local before = allocated()
    m:to("float64")
    assert.equal("float64", m.weight.grad.dtype)
    -- parameters and gradients doubled in size, the float32 ones gone
    assert.equal(2 * before, allocated())
  end)

  it("zero_grad refuses a freed parameter before it drops any gradient", function()
    local m = linear_with_grads()
    local p = lt.zeros(2):requires_grad_(true)
    p:free()
    h.fails_cleanly(function() require("lt.core")._zero_grads({ m.weight, p }, true) end,
      "zero_grad: attempt to use a freed tensor (element 2 of the list)")
    assert.equal(WEIGHT_GRAD + BIAS_GRAD, gradient_bytes())
  end)
end)

describe("gradient clipping", function()
  before_each(function() lt.gc() end)

  -- The gradient peak of each of 4 steps and the gradient bytes after each
  -- zero_grad, with clip(params) after backward.
  local function steps(clip)
    lt.manual_seed(0)
    local model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64))
    local opt = lt.optim.Adam(model:parameters(), { lr = 1e-3 })
    local x = lt.randn(16, 64)
    local peaks, after = {}, {}
    for step = 1, 4 do
      lt.memory.reset_peak()
      model(x):pow(2):mean():backward()
      clip(model:parameters())
      opt:step()
      opt:zero_grad()
      peaks[step] = lt.memory.stats().by_category.gradient.peak
      after[step] = gradient_bytes()
    end
    return peaks, after
  end

  local grad_bytes = (64 * 128 + 128 + 128 * 64) * 4 + 512 -- the 64-float bias: one 512-byte block
  local cases = {
    { "clip_grad_norm_", function(ps) nn.utils.clip_grad_norm_(ps, 0.1) end },
    { "clip_grad_norm_ of order inf", function(ps) nn.utils.clip_grad_norm_(ps, 0.1, { norm_type = math.huge }) end },
    { "clip_grad_norm_ of order 1", function(ps) nn.utils.clip_grad_norm_(ps, 0.1, { norm_type = 1 }) end },
    { "clip_grad_norm_ of order 3", function(ps) nn.utils.clip_grad_norm_(ps, 0.1, { norm_type = 3 }) end },
    { "clip_grad_value_", function(ps) nn.utils.clip_grad_value_(ps, 1e-3) end },
  }
  for _, case in ipairs(cases) do
    it(case[1] .. " in a loop: the gradient peak does not grow from step 2 on", function()
      local peaks, after = steps(case[2])
      for step = 1, 4 do
        assert.equal(grad_bytes, peaks[step])
        assert.equal(0, after[step])
      end
    end)
  end

  it("leaves nothing allocated but the total norm", function()
    lt.manual_seed(0)
    local params = {}
    for i = 1, 3 do
      params[i] = lt.zeros(64, 64):requires_grad_(true)
      params[i].grad = lt.randn(64, 64)
    end
    for _, p in ipairs(params) do p.grad:mul_(1) end
    for _, order in ipairs { 2, 1, 3, math.huge } do
      lt.gc()
      local before = allocated()
      local total = nn.utils.clip_grad_norm_(params, 0.5, { norm_type = order })
      assert.equal(before + 512, allocated()) -- one 0-dim result
      lt.del(total)
    end
  end)
end)

describe("library temporaries", function()
  before_each(function() lt.gc() end)

  it("cross_entropy with class probabilities leaves only its result (no_grad)", function()
    local x = lt.randn(64, 100)
    local target = nn.functional.softmax(lt.randn(64, 100), 2)
    local weight = lt.rand(100)
    for _, opts in ipairs { {}, { label_smoothing = 0.1, weight = weight }, { reduction = "none" } } do
      lt.gc()
      local before = allocated()
      local loss = lt.no_grad(function() return nn.functional.cross_entropy(x, target, opts) end)
      local result = math.max(512, (loss:nbytes() + 511) // 512 * 512)
      assert.equal(before + result, allocated())
      lt.del(loss)
    end
  end)

  it("conv2d with padding 'same' and an even kernel leaves only its output (no_grad)", function()
    local x = lt.randn(2, 3, 32, 32)
    local w = lt.randn(4, 3, 4, 4)
    local before = allocated()
    local y = lt.no_grad(function() return nn.functional.conv2d(x, w, nil, { padding = "same" }) end)
    assert.same({ 2, 4, 32, 32 }, y.shape)
    assert.equal(before + y:nbytes(), allocated())
  end)
end)

describe("by_category.activation", function()
  before_each(function() lt.gc() end)

  it("counts what a graph saves and returns to exactly 0 after backward", function()
    local m = nn.Linear(256, 256)
    local x = lt.randn(4, 256) -- 4096 bytes, saved for the weight's gradient
    assert.equal(0, category("activation"))
    local y = m(x)
    assert.equal(4096, category("activation"))
    y:sum():backward()
    assert.equal(0, category("activation"))
    assert.equal("other", lt.memory.category(x))
    -- a parameter saved for the input's gradient stays a parameter
    x:requires_grad_(true)
    local parameters = category("parameter")
    y = m(x)
    assert.equal(parameters, category("parameter"))
    y:sum():backward()
    assert.equal(0, category("activation"))
    assert.equal("parameter", lt.memory.category(m.weight))
  end)

  it("a storage saved by two graphs stays an activation until both are gone", function()
    local m = nn.Linear(256, 256)
    local x = lt.randn(4, 256)
    local y1, y2 = m(x), m(x)
    assert.equal(4096, category("activation"))
    y1:sum():backward()
    assert.equal(4096, category("activation"))
    local s2 = y2:sum()
    s2:backward(nil, { retain_graph = true })
    assert.equal(4096, category("activation"))
    lt.del(s2, y2) -- the graph dropped
    assert.equal(0, category("activation"))
    assert.equal("other", lt.memory.category(x))
  end)

  it("counts what an autograd.Function saves until its graph goes", function()
    local Square = lt.autograd.Function:extend("SquareForMemory")
    function Square.forward(ctx, x)
      ctx:save_for_backward(x)
      return x * x
    end
    function Square.backward(ctx, g)
      local x = ctx:saved_tensors()
      return 2 * x * g
    end
    local x = lt.randn(1024):requires_grad_(true)
    local y = Square.apply(x)
    assert.equal(4096, category("activation"))
    y:sum():backward()
    assert.equal(0, category("activation"))
    y = Square.apply(x)
    assert.equal(4096, category("activation"))
    lt.del(y)
    assert.equal(0, category("activation"))
  end)

  it("a category set while saved is kept after the graph goes", function()
    local m = nn.Linear(256, 256)
    local x = lt.randn(4, 256)
    local y = m(x)
    lt.memory.set_category(x, "optimizer")
    y:sum():backward()
    assert.equal("optimizer", lt.memory.category(x))
  end)
end)

describe("data loading temporaries", function()
  local dir = "/usr/share/datasets/fashion-mnist"
  local f = io.open(dir .. "/t10k-labels-idx1-ubyte.gz", "rb")
  if f then f:close() end
  local run = f and it or pending

  run("fashion_mnist leaves only the images and the int64 labels", function()
    lt.gc()
    local before = allocated()
    local images, labels = lt.data.fashion_mnist("test", { dir = dir })
    local function block(n) return (n + 511) // 512 * 512 end
    assert.equal("int64", labels.dtype)
    assert.equal(before + block(images:nbytes()) + block(labels:nbytes()), allocated())
  end)
end)

describe("backward temporaries", function()
  it("ReLU's backward makes its gradient in one pass, with no mask beside it", function()
    -- 1 MiB of float32: a bool mask would add 256 KiB at the peak.
    local x = lt.randn(256, 1024, { requires_grad = true })
    local y = x:relu()
    local g = lt.ones(256, 1024)
    lt.gc()
    local before = allocated()
    lt.memory.reset_peak()
    y:backward(g)
    -- The input's gradient is the one new tensor (the saved output is freed).
    assert.equal(before + 1024 * 1024, lt.memory.max_allocated())
  end)

  it("ReLU's gradient passes where the output is NaN, as PyTorch's threshold_backward", function()
    local x = lt.tensor({ -1, 0, 2, 0 / 0 }, { dtype = "float64", requires_grad = true })
    x:relu():sum():backward()
    assert.same({ 0, 0, 1, 1 }, x.grad:totable())
    -- the engine's own op, not a tensor method
    assert.has_error(function() return lt.ones(2).relu_grad end)
  end)
end)

describe("nn.Sequential's intermediate results", function()
  local Keep = nn.Module:extend("Keep") -- a custom layer that keeps what it is given and returns
  function Keep:forward(x)
    self.seen = x
    self.made = x * 1
    return self.made
  end

  it("go back as soon as the next built-in layer has used them", function()
    lt.memory._peak_collect(false) -- the release itself, not a collection, must do it
    local ok, err = pcall(function()
      local seq = nn.Sequential(nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh())
      local x = lt.randn(64, 256)
      lt.gc()
      local before = allocated()
      lt.memory.reset_peak()
      local y = lt.no_grad(function() return seq(x) end)
      -- 64 KiB each: never more than two results at once, and only y is left.
      assert.equal(before + 2 * 65536, lt.memory.max_allocated())
      assert.equal(before + 65536, allocated())
      assert.equal(64, y.shape[1])
    end)
    lt.memory._peak_collect(true)
    assert(ok, err)
  end)

  it("leave the caller's input and whatever a custom module made or took alone", function()
    local keep = Keep()
    local seq = nn.Sequential(nn.Linear(4, 4), keep, nn.ReLU({ inplace = true }), nn.Tanh())
    local x = lt.randn(2, 4)
    local y = seq(x)
    assert.same({ 2, 4 }, keep.seen.shape) -- the Linear's output, held by the custom layer
    assert.same({ 2, 4 }, keep.made.shape) -- the custom layer's output, ReLU'd in place
    assert.same({ 2, 4 }, x.shape)
    assert.same({ 2, 4 }, y.shape)
  end)

  it("keep an in-place layer's result, which is its input, alive", function()
    local seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU({ inplace = true }), nn.Identity())
    local y = seq(lt.randn(2, 4, { requires_grad = true }))
    assert.is_true(y:sum():item() >= 0)
    y:sum():backward()
  end)
end)
