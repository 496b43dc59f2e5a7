-- t:register_post_accumulate_grad_hook (PyTorch's): when a hook runs (once
-- per backward, after the last contribution, with .grad complete), removal
-- (also from inside a hook), which tensors take one, and an error in a hook:
-- backward fails at the user's line with the hook's message, nothing leaks,
-- and a retained graph can be run again.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local function leaf(values)
  return lt.tensor(values, { dtype = "float64", requires_grad = true })
end

describe("register_post_accumulate_grad_hook", function()
  it("runs once per backward, after every contribution was added into .grad", function()
    local w = leaf { 1, 2, 3 }
    local seen = {}
    w:register_post_accumulate_grad_hook(function(p)
      assert.is_true(rawequal(p, w)) -- the tensor itself, as PyTorch passes the parameter
      seen[#seen + 1] = p.grad:totable()
    end)
    -- w feeds three nodes: the hook waits for all of them
    local y = (w * 2):sum() + (w * 3):sum() + (w * w):sum()
    y:backward()
    assert.same({ { 7, 9, 11 } }, seen) -- 2 + 3 + 2w
    local again = (w * 1):sum()
    again:backward() -- accumulates: the hook sees the sum
    assert.same({ { 7, 9, 11 }, { 8, 10, 12 } }, seen)
  end)

  it("runs after the leaf's own gradient for a backward from the leaf itself", function()
    local w = leaf { 1, 2 }
    local n = 0
    w:register_post_accumulate_grad_hook(function() n = n + 1 end)
    w:backward(lt.tensor({ 1, 1 }, { dtype = "float64" }))
    assert.equal(1, n)
  end)

  it("runs in registration order, and not for a leaf that got no gradient", function()
    local a, b = leaf { 1 }, leaf { 2 }
    local order = {}
    a:register_post_accumulate_grad_hook(function() order[#order + 1] = "a1" end)
    a:register_post_accumulate_grad_hook(function() order[#order + 1] = "a2" end)
    b:register_post_accumulate_grad_hook(function() order[#order + 1] = "b" end)
    local y = (a * 3):sum()
    y:backward()
    assert.same({ "a1", "a2" }, order)
  end)

  it("fires for the gradients of a layer in reverse order of use (what DDP's buckets rely on)", function()
    local w1, w2 = leaf { { 1, 2 }, { 3, 4 } }, leaf { { 1 }, { 1 } }
    local order = {}
    w1:register_post_accumulate_grad_hook(function() order[#order + 1] = "w1" end)
    w2:register_post_accumulate_grad_hook(function() order[#order + 1] = "w2" end)
    local x = lt.tensor({ { 1, 1 } }, { dtype = "float64" })
    x:matmul(w1):relu():matmul(w2):sum():backward()
    assert.same({ "w2", "w1" }, order)
  end)

  it("stops after remove(), which is idempotent and works from inside the hook", function()
    local w = leaf { 1 }
    local n, handle = 0, nil
    handle = w:register_post_accumulate_grad_hook(function()
      n = n + 1
      handle:remove()
    end)
    local other = 0
    w:register_post_accumulate_grad_hook(function() other = other + 1 end)
    for _ = 1, 2 do
      local y = (w * 2):sum()
      y:backward()
    end
    handle:remove()
    assert.equal(1, n)
    assert.equal(2, other)
    assert.matches("removed", tostring(handle))
  end)

  it("follows the parameter when a module changes its data (m:to)", function()
    local m = lt.nn.Linear(2, 1)
    local n = 0
    m.weight:register_post_accumulate_grad_hook(function() n = n + 1 end)
    m:to("float64")
    m(lt.ones(1, 2, { dtype = "float64" })):sum():backward()
    assert.equal(1, n)
  end)

  it("refuses non-leaves, tensors that do not require grad and non-functions", function()
    local w = leaf { 1 }
    h.fails(function() (w * 2):register_post_accumulate_grad_hook(print) end,
      "register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered on non-leaf tensors")
    h.fails(function() lt.zeros(2):register_post_accumulate_grad_hook(print) end,
      "register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't require gradient")
    h.fails(function() w:register_post_accumulate_grad_hook(42) end,
      "register_post_accumulate_grad_hook: expected a function, got number")
    local freed = leaf { 1 }
    freed:free()
    h.fails(function() freed:register_post_accumulate_grad_hook(print) end, "attempt to use a freed tensor")
    local callable = setmetatable({}, { __call = function() end })
    assert.is_table(w:register_post_accumulate_grad_hook(callable))
  end)

  it("turns an error in a hook into the backward's error at the user's line, with nothing leaked", function()
    local w = leaf { 1, 2 }
    local x = leaf { 3, 4 }
    local handle = w:register_post_accumulate_grad_hook(function() error("bucket failed") end)
    local y = (w * x):sum()
    lt.gc()
    local before = lt.memory.allocated()
    local err = h.fails(function() y:backward(nil, { retain_graph = true }) end,
      "backward: post accumulate grad hook: ", "bucket failed")
    assert.matches("^[^:]*grad_hooks_spec.lua:%d+: backward:", err) -- placed at the backward call
    handle:remove()
    lt.gc()
    -- w's gradient was in when its hook failed, x's never came: nothing else stayed
    assert.is_nil(x.grad)
    assert.is_table(w.grad:totable())
    w.grad = nil
    lt.gc()
    assert.equal(before, lt.memory.allocated())
    -- the retained graph runs again, and the hook that failed is gone
    y:backward()
    assert.same({ 3, 4 }, w.grad:totable())
    assert.same({ 1, 2 }, x.grad:totable())
  end)

  it("does not keep a tensor alive through a hook that refers to it", function()
    local weak = setmetatable({}, { __mode = "v" })
    do
      local w = leaf { 1 }
      w:register_post_accumulate_grad_hook(function() return w end)
      weak[1] = w
    end
    lt.gc()
    collectgarbage()
    assert.is_nil(weak[1])
  end)
end)
