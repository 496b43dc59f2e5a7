-- The collector under stress: a long training loop that never frees a tensor
-- by hand and never calls lt.gc. Tensor bytes charged to Lua's collector,
-- and the out-of-memory hook's full collection, must keep it within a limit
-- close to what one step needs.
local lt = require "lt"
local nn, F, optim = lt.nn, lt.nn.functional, lt.optim

local STEPS = 10000

-- A small MLP (32-64-10, batch 32) with SGD and momentum: one step is about
-- forty tensors, so 10,000 steps make some 400,000 handles for the collector.
local function small_training()
  lt.manual_seed(7)
  local model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
  local opt = optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9 })
  local x, target = lt.randn(32, 32), lt.randint(1, 10, { 32 })
  local function step()
    opt:zero_grad()
    local loss = F.cross_entropy(model(x), target)
    loss:backward()
    opt:step()
    return loss:item()
  end
  return step
end

describe("collector integration under stress", function()
  after_each(function() lt.memory.set_limit(nil) end)

  it("10,000 training steps without frees stay under a limit of the one segment a step needs", function()
    local step = small_training()
    step() -- the momentum buffers exist from here on
    lt.gc()
    lt.memory.empty_cache()
    lt.memory.reset_peak()
    step()
    -- The working set: what one step needs at its peak, its garbage
    -- included (80,384 bytes), inside the one 2 MiB segment the allocator
    -- carves tensors this small from.
    local working_set = lt.memory.max_allocated()
    local reserved = lt.memory.reserved()
    assert.equal(2 * 1024 * 1024, reserved)
    -- The limit caps reserved bytes, so the tightest limit the allocator can
    -- honour is that one segment: the margin is 2 MiB minus the working set,
    -- 26 times the working set. No smaller margin means anything (the cache
    -- cannot shrink below a live segment) and the next larger one is a second
    -- segment, twice the limit; this one passes every time.
    -- Measured without a limit, the charging alone let 0.75 to 6.2 MiB of
    -- garbage pile up (more when the Lua heap is bigger, as under busted
    -- after other specs); with the limit, the out-of-memory hook's full
    -- collection reclaims the segment instead of growing the cache (about
    -- 150 collections in the 10,000 steps).
    lt.memory.set_limit(reserved)
    local s0 = lt.memory.stats()
    local first, last
    for i = 1, STEPS do
      local loss = step()
      if i == 1 then first = loss end
      last = loss
    end
    local s = lt.memory.stats()
    assert.is_true(last < first, "the loss went down")
    assert.equal(s0.num_ooms, s.num_ooms) -- no step ever failed
    assert.is_true(s.reserved_bytes.all.peak <= reserved,
      ("reserved peaked at %d bytes, limit %d"):format(s.reserved_bytes.all.peak, reserved))
    assert.is_true(s.allocated_bytes.all.peak <= reserved,
      ("allocated peaked at %d bytes, working set %d, limit %d"):format(s.allocated_bytes.all.peak,
        working_set, reserved))
  end)

  it("lt.gc returns the bytes it released", function()
    local step = small_training()
    step()
    lt.gc()
    local live = lt.memory.allocated()
    for _ = 1, 20 do step() end -- garbage: the graphs' intermediates
    local dropped = lt.memory.allocated() - live
    local released = lt.gc()
    assert.is_true(released > 0)
    assert.equal(dropped, released)
    assert.equal(live, lt.memory.allocated())
    assert.equal(0, lt.gc()) -- nothing left to release
  end)
end)
