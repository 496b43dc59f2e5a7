-- Peak collections (bindings/memory.c): before an allocation would lift
-- allocated bytes past a mark just above the most a collection has found
-- live, the collector runs, so tensors a script dropped never make a peak;
-- the collector's own pacing follows what is allocated now; and a phase that
-- only grows costs few collections. Exact byte counts on the CPU device.
local lt = require "lt"

local MIB = 1024 * 1024

local function settled()
  lt.gc()
  lt.memory.reset_peak()
  return lt.memory.allocated()
end

local function peak_collections() return lt.memory.stats().num_peak_collections end

describe("peak collections", function()
  it("a loop that drops its tensors peaks at one live tensor plus the next", function()
    local model = lt.empty(2 * MIB) -- 8 MiB held: the collector's own pacing alone
    local base = settled()        -- would let a megabyte of garbage pile up
    for _ = 1, 100 do
      local t = lt.empty(16 * 1024) -- 64 KiB, dropped at the end of each iteration
      t:fill_(1)
    end
    -- Reference counting frees the previous t when it is replaced: 128 KiB
    -- at most, plus the mark's slack (a quarter of a percent of what is live).
    local slack = (base + 64 * 1024) // 400
    assert.is_true(lt.memory.max_allocated() - base <= 2 * 64 * 1024 + slack,
      ("peak %d bytes above the start"):format(lt.memory.max_allocated() - base))
    model:free()
  end)

  it("a loop that releases what it makes (<close>, free, lt.del) never runs the collector", function()
    local x = lt.empty(256 * 1024) -- 1 MiB: each result is over the collector's pacing threshold
    settled()
    x:neg():free() -- the first allocation after reset_peak measures what is live
    -- A table with a finalizer, unreachable: any collection finalizes it.
    local collections = 0
    local function arm() setmetatable({}, { __gc = function() collections = collections + 1 end }) end
    arm()
    for _ = 1, 20 do local y <close> = x:neg() end
    for _ = 1, 20 do x:neg():free() end
    for _ = 1, 20 do lt.del(x:neg()) end
    assert.equal(0, collections)
    for _ = 1, 20 do local y = x:neg() end -- dropped: the collector frees them
    assert.is_true(collections >= 1)
    x:free()
  end)

  it("a dropped result goes back in a young collection: no full collection runs", function()
    local x = lt.empty(256 * 1024) -- 1 MiB: each result would set a new peak
    settled()
    x:neg():free() -- the first allocation after reset_peak measures what is live
    -- A finalizer on an object a full collection made old: only a full one
    -- finalizes it once it is dropped.
    local full = 0
    local guard = setmetatable({}, { __gc = function() full = full + 1 end })
    lt.gc() -- guard is old now
    guard = nil
    local before = peak_collections()
    for _ = 1, 20 do local y = x:neg() end
    assert.is_true(peak_collections() - before >= 19) -- each result crossed the mark
    assert.equal(0, full)
    assert.equal(2 * MIB, lt.memory.max_allocated()) -- x and one result
    lt.gc()
    assert.equal(1, full)
    x:free()
  end)

  it("a loop whose peak falls while its tensors live peaks as one step does", function()
    local w = lt.randn(256, 256):requires_grad_(true)
    local function step()
      local leaf = w:detach():requires_grad_(true)
      leaf:exp():sum():backward()
    end
    step()
    local base = settled()
    step()
    local one = lt.memory.max_allocated() - base
    for _ = 1, 40 do step() end -- young collections fall short here: incremental, retries
    -- Within the blocks' slack (16 KiB: a dropped scalar's 512-byte block), far
    -- below the last step's 512 KiB of garbage (exp's result, leaf.grad).
    local above = lt.memory.max_allocated() - base - one
    assert.is_true(above >= 0 and above <= 16 * 1024, ("%d bytes above one step"):format(above))
    w:free()
  end)

  it("the pacing follows what is allocated now, not what a big phase held", function()
    local big = {}
    for i = 1, 64 do big[i] = lt.empty(256 * 1024) end -- 64 MiB
    big = nil
    lt.gc()
    local base = lt.memory.allocated()
    local highest = 0
    for _ = 1, 50 do
      local t = lt.empty(256 * 1024)
      highest = math.max(highest, lt.memory.allocated() - base)
      t:fill_(0)
    end
    -- No reset_peak here: the old rule let 8 MiB (an eighth of 64) pile up.
    assert.is_true(highest <= 2 * MIB, ("highest %d bytes above the start"):format(highest))
  end)

  it("garbage from a graph the script dropped is not counted in the next step's peak", function()
    local w = lt.randn(1024, 1024, { requires_grad = true }) -- 4 MiB
    local x = lt.randn(64, 1024)
    local function step()
      local loss = x:matmul(w):tanh():sum() -- 256 KiB results, dropped after the step
      loss:backward()
      w.grad = nil
    end
    step()
    local base = settled()
    step()
    local one = lt.memory.max_allocated() - base
    lt.memory.reset_peak()
    for _ = 1, 10 do step() end -- ten steps peak as one does
    local ten = lt.memory.max_allocated() - base
    assert.is_true(ten <= one + (base + one) // 400 + 16 * 1024, ("one step %d, ten steps %d bytes"):format(one, ten))
  end)

  it("a phase that only grows runs few of them", function()
    settled()
    local before = peak_collections()
    local list = {}
    for i = 1, 20000 do list[i] = lt.empty(1024) end -- 4 KiB each, all kept
    local n = peak_collections() - before
    assert.is_true(n < 200, ("%d peak collections while filling a list"):format(n))
    list = nil
    lt.gc()
  end)

  it("can be turned off for benchmarks, and back on", function()
    lt.memory._peak_collect(false)
    local base = settled()
    local before = peak_collections()
    for _ = 1, 20 do local t = lt.empty(64 * 1024) end
    assert.equal(before, peak_collections())
    lt.memory._peak_collect(true)
    settled()
    for _ = 1, 20 do local t = lt.empty(64 * 1024) end
    assert.is_true(peak_collections() > before)
    assert.is_true(lt.memory.allocated() >= base)
  end)
end)
