-- What the memory report is built from: each allocation's innermost line of
-- the user's script and the library code it was made in, frees made by the
-- collector flagged, segment events, training.fit's marks, and the timeline's
-- garbage band, reserved bytes and segments at the peak.
local lt = require "lt"
local nn = lt.nn
local training = require "lt.recipes.training"
local timeline = require "lt.memory_timeline"

local SOURCE = debug.getinfo(1, "S").short_src

local function line_of(offset)
  return SOURCE .. ":" .. (debug.getinfo(2, "l").currentline + (offset or 0))
end

local function events_of(kind)
  local out = {}
  for _, e in ipairs(lt.memory.snapshot().events) do
    if e.kind == kind then out[#out + 1] = e end
  end
  return out
end

-- Runs f with print and io.stdout silenced (fit's progress bar).
local function quietly(f)
  local real_print, real_stdout = print, io.stdout
  _G.print = function() end
  io.stdout = { write = function(self) return self end, flush = function(self) return self end }
  local ok, err = pcall(f)
  _G.print, io.stdout = real_print, real_stdout
  assert(ok, err)
end

describe("memory history origins", function()
  after_each(function() lt.memory.record(false) end)

  it("charges a forward defined in the script to its own line, with the library layer it called", function()
    local layer = nn.Linear(4, 3)
    local function forward(x)
      local y, line = layer(x), line_of()
      return y, line
    end
    local x = lt.zeros(2, 4)
    lt.gc()
    lt.memory.record(true)
    local y, line = forward(x) -- not this line: the forward's own
    lt.memory.record(false)
    local allocs = events_of("alloc")
    assert.is_true(#allocs >= 1)
    for _, e in ipairs(allocs) do
      assert.equal(line, e.origin)
      assert.equal("nn.Linear:forward", e.op)
    end
    assert.is_truthy(y)
  end)

  it("an allocation made by lt itself from the script's line has no library function", function()
    lt.memory.record(true)
    local t, line = lt.zeros(8), line_of()
    lt.memory.record(false)
    local allocs = events_of("alloc")
    assert.equal(1, #allocs)
    assert.equal(line, allocs[1].origin)
    assert.is_nil(allocs[1].op)
    assert.is_truthy(t)
  end)

  it("names the constructor and the method when a module is made", function()
    lt.memory.record(true)
    local layer = nn.Linear(4, 3)
    lt.memory.record(false)
    local allocs = events_of("alloc")
    assert.equal(2, #allocs) -- weight and bias
    for _, e in ipairs(allocs) do assert.equal("nn.Linear() > nn.Linear:init", e.op) end
    assert.is_truthy(layer)
  end)

  it("in training.fit: the script's fit line, the library call and the layer; and the epoch and evaluation marks", function()
    local x, y = lt.randn(32, 6), lt.ones(32, { dtype = "int64" })
    local train = lt.data.DataLoader({ x, y }, { batch_size = 16 })
    local test = lt.data.DataLoader({ x, y }, { batch_size = 32 })
    local model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    local opt = lt.optim.SGD(model:parameters(), { lr = 0.1 })
    local opts = { epochs = 2, checkpoint = "", prepare = function(images) return images end }
    local fit_line
    lt.gc()
    lt.memory.record(true)
    quietly(function()
      fit_line = line_of(1)
      training.fit(model, opt, train, test, opts)
    end)
    lt.memory.record(false)
    local layers = 0
    for _, e in ipairs(events_of("alloc")) do
      if e.op and e.op:find("nn.Linear:forward", 1, true) then
        assert.equal(fit_line, e.origin)
        assert.equal("recipes.training.fit > nn.Linear:forward", e.op)
        layers = layers + 1
      end
    end
    assert.is_true(layers >= 8, "allocations in the layers' forward: " .. layers)
    local labels = {}
    for _, m in ipairs(events_of("mark")) do labels[#labels + 1] = m.label end
    assert.same({ "epoch 1", "evaluate", "evaluated", "epoch 2", "evaluate", "evaluated" }, labels)
  end)
end)

describe("memory history collections and segments", function()
  after_each(function() lt.memory.record(false) end)

  it("flags the frees a collection made, and not lt.del's nor a to-be-closed variable's", function()
    lt.gc()
    lt.memory.record(true)
    local dropped = lt.zeros(1000)
    local deleted = lt.zeros(2000)
    do
      local closed <close> = lt.zeros(3000)
    end
    lt.del(deleted)
    dropped = nil
    collectgarbage()
    lt.memory.record(false)
    local by_size = {}
    for _, e in ipairs(events_of("free")) do by_size[e.size] = e end
    assert.is_true(by_size[4096].collected)  -- 1000 floats, rounded
    assert.is_nil(by_size[8192].collected)   -- lt.del
    assert.is_nil(by_size[12288].collected)  -- <close>
    assert.is_nil(dropped)
  end)

  it("logs segments obtained and released, and the segments held when recording starts", function()
    lt.gc()
    lt.memory.empty_cache()
    local held = lt.memory.stats().segment.all.current
    lt.memory.record(true)
    local big = lt.zeros(6 * 1024 * 1024) -- 24 MiB: a segment of its own
    lt.del(big)
    lt.memory.empty_cache()
    lt.memory.record(false)
    local s = lt.memory.snapshot()
    for i = 1, held do assert.equal("segment_alloc", s.events[i].kind) end
    local alloc, free = events_of("segment_alloc"), events_of("segment_free")
    assert.equal(held + 1, #alloc)
    assert.equal(24 * 1024 * 1024, alloc[#alloc].size)
    assert.equal(alloc[#alloc].id, free[#free].id)
    local block = events_of("alloc")[1]
    assert.equal(alloc[#alloc].id, block.segment)
    assert.equal(0, block.offset)
  end)

  it("the timeline draws collected bytes as garbage until their collection, reserved bytes, and the segments at the peak", function()
    lt.gc()
    lt.memory.record(true)
    local keep = lt.zeros(64 * 1024)      -- 256 KiB, live at the peak
    local dropped = lt.zeros(128 * 1024)  -- 512 KiB, garbage until collectgarbage()
    dropped = nil
    local peak = lt.zeros(32 * 1024)      -- the peak: all three allocated
    collectgarbage()
    lt.memory.record(false)
    local tl = timeline.build(lt.memory.snapshot())
    local dev = tl.devices[1]
    local most_garbage = 0
    for _, p in ipairs(dev.points) do most_garbage = math.max(most_garbage, p.bytes.garbage) end
    assert.equal(512 * 1024, most_garbage)
    assert.equal(0, dev.final.garbage)
    assert.equal(512 * 1024, dev.peak.by_category.garbage)
    assert.is_true(dev.reserved_peak >= dev.peak.bytes)
    local segs, allocated = dev.peak.segments, 0
    assert.is_true(#segs >= 1)
    for _, sg in ipairs(segs) do
      assert.is_true(sg.largest_free <= sg.size - sg.allocated)
      allocated = allocated + sg.allocated
    end
    assert.is_true(allocated >= 800 * 1024)
    assert.is_truthy(keep and peak and dropped == nil)
  end)
end)
