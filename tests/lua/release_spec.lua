local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local function settled()
  lt.gc()
  return lt.memory.allocated()
end

describe("releasing tensors", function()
  it("t:free() gives the bytes back once; later use is an error", function()
    local before = settled()
    local t = lt.empty(1000)
    assert.is_false(t:is_freed())
    assert.equal(4096, t:free())
    assert.equal(before, lt.memory.allocated())
    assert.is_true(t:is_freed())
    assert.equal(0, t:free()) -- idempotent
    assert.equal(0, lt.del(t))
    assert.equal("tensor (freed)", tostring(t))
  end)

  it("every use of a freed tensor raises 'attempt to use a freed tensor'", function()
    local t = lt.ones(2, 3)
    local other = lt.ones(2, 3)
    lt.del(t)
    local uses = {
      function() return t:sum() end,
      function() return t.shape end,
      function() return t.dtype end,
      function() return t[1] end,
      function() t[1] = 0 end,
      function() return t + 1 end,
      function() return 1 + t end,
      function() return -t end,
      function() return other + t end,
      function() return #t end,
      function() return t:view(6) end,
      function() return t:item() end,
      function() return t:totable() end,
      function() return t:add_(1) end,
      function() return other:copy_(t) end,
      function() return lt.cat({ other, t }) end,
      function() return lt.matmul(other, t) end,
      function() t.requires_grad = true end,
    }
    for _, use in ipairs(uses) do
      h.fails_cleanly(use, "attempt to use a freed tensor")
    end
    assert.are.same({ 2, 3 }, other.shape) -- the session goes on
  end)

  it("a view keeps the storage alive after its base is released", function()
    local before = settled()
    local base = lt.ones(1000)
    local view = base:narrow(1, 1, 10)
    assert.equal(0, lt.del(base))
    assert.equal(before + 4096, lt.memory.allocated())
    local total = view:sum()
    assert.equal(10.0, total:item())
    lt.del(total)
    assert.equal(4096, lt.del(view))
    assert.equal(before, lt.memory.allocated())
  end)

  it("a to-be-closed variable releases at the end of its block", function()
    local before = settled()
    do
      local t <close> = lt.empty(1000)
      assert.equal(before + 4096, lt.memory.allocated())
    end
    assert.equal(before, lt.memory.allocated())
    -- and on an error leaving the block
    local ok = pcall(function()
      local t <close> = lt.empty(1000)
      error("boom")
    end)
    assert.is_false(ok)
    assert.equal(before, lt.memory.allocated())
  end)

  it("dropping the last reference lets the collector give the bytes back", function()
    settled()
    local t = lt.empty(1000)
    assert.equal(1000, t:numel())
    t = nil
    assert.equal(4096, lt.gc())
  end)

  it("a gradient lives as long as its tensor holds it", function()
    local before = settled()
    local t = lt.zeros(1000)
    t.grad = lt.ones(1000)
    assert.equal(0, lt.del(t.grad)) -- t still holds it
    assert.equal(before + 2 * 4096, lt.memory.allocated())
    assert.equal(2 * 4096, lt.del(t)) -- t's storage and its gradient
    assert.equal(before, lt.memory.allocated())
  end)

  it("a gradient read through t.grad is given back once that handle is dropped", function()
    local before = settled()
    local t = lt.zeros(1000)
    t.grad = lt.ones(1000)
    assert.equal(1000.0, t.grad:sum():item())
    assert.equal(4096, lt.del(t)) -- the handle read above still holds the gradient
    lt.gc()
    assert.equal(before, lt.memory.allocated())
  end)

  it("contiguous, to and in-place ops return the same handle", function()
    local t = lt.ones(3)
    assert.equal(t, t:contiguous())
    assert.equal(t, t:to("float32"))
    assert.equal(t, t:mul_(2))
    assert.equal(t, t:float())
  end)

  it("lt.del rejects what is not a tensor", function()
    h.fails_cleanly(function() return lt.del({}) end, "del: expected tensors, got table (argument 1)")
    h.fails_cleanly(function() return lt.Tensor.free(5) end, "free: expected a tensor, got number")
    assert.equal(0, lt.del())
  end)
end)
