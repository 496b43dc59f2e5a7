-- lt.memory.record / mark / snapshot / report: the allocator's event log seen
-- from Lua, checked event by event on the CPU device.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local SOURCE = debug.getinfo(1, "S").short_src

-- "<this file>:<line of the caller>", as origins name it.
local function here()
  return SOURCE .. ":" .. debug.getinfo(2, "l").currentline
end

-- The block and mark events after what was already live when recording
-- started (existing blocks, segments: the segment events have specs of their own).
local function recorded(snapshot)
  local out = {}
  for _, e in ipairs(snapshot.events) do
    if e.kind ~= "existing" and not e.kind:find("^segment_") then out[#out + 1] = e end
  end
  return out
end

-- The fields a test states, in a stable shape for assert.same.
local function shape(e)
  if e.kind == "mark" then return { kind = "mark", label = e.label } end
  return { kind = e.kind, size = e.size, requested = e.requested, category = e.category,
           previous = e.previous, origin = e.origin, device = e.device }
end

local function shapes(events)
  local out = {}
  for i, e in ipairs(events) do out[i] = shape(e) end
  return out
end

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

local function has(text, part) return text:find(part, 1, true) ~= nil end

describe("lt.memory.record and snapshot", function()
  after_each(function() lt.memory.record(false) end)

  it("logs allocs (rounded to 512), marks, category changes and frees in order, with their lines", function()
    lt.gc()
    lt.memory.record(true)
    local a, a_line = lt.empty(1000), here()
    lt.memory.mark("epoch 1")
    local b, b_line = lt.memory.set_category(lt.empty(100), "optimizer"), here()
    lt.del(a)
    lt.memory.mark("epoch 2")
    lt.del(b)
    lt.memory.record(false)

    local s = lt.memory.snapshot()
    local events = recorded(s)
    assert.same({
      { kind = "alloc", size = 4096, requested = 4000, category = "other", origin = a_line, device = "cpu" },
      { kind = "mark", label = "epoch 1" },
      { kind = "alloc", size = 512, requested = 400, category = "other", origin = b_line, device = "cpu" },
      { kind = "category", size = 512, requested = 400, category = "optimizer", previous = "other",
        origin = b_line, device = "cpu" },
      { kind = "free", size = 4096, requested = 4000, category = "other", origin = a_line, device = "cpu" },
      { kind = "mark", label = "epoch 2" },
      { kind = "free", size = 512, requested = 400, category = "optimizer", origin = b_line, device = "cpu" },
    }, shapes(events))

    -- One id per block across its events; times never go back.
    assert.equal(events[1].id, events[5].id)
    assert.equal(events[3].id, events[4].id)
    assert.equal(events[3].id, events[7].id)
    assert.are_not.equal(events[1].id, events[3].id)
    local last = 0
    for _, e in ipairs(s.events) do
      assert.is_true(e.time >= last)
      last = e.time
    end
    assert.is_false(s.recording)
    assert.equal(0, s.dropped)
    assert.equal(s.stats.allocated_bytes.all.current, lt.memory.allocated())
  end)

  it("record(false) stops logging; the log stays readable and marks are ignored", function()
    lt.gc()
    assert.is_false(lt.memory.record(true)) -- returns whether it was recording
    local x = lt.empty(256)
    assert.is_true(lt.memory.record(false))
    local count = #lt.memory.snapshot().events
    local y = lt.empty(5000)
    lt.memory.mark("ignored")
    lt.del(x, y)
    local s = lt.memory.snapshot()
    assert.equal(count, #s.events)
    assert.same({ { kind = "alloc", size = 1024, requested = 1024, category = "other",
                    origin = s.events[#s.events].origin, device = "cpu" } }, shapes(recorded(s)))
  end)

  it("record(true) starts a fresh log that begins with the blocks already live", function()
    lt.gc()
    local kept = lt.empty(3000) -- 12000 bytes: 12288 rounded
    local live = lt.memory.stats().allocation.all.current
    local segments = lt.memory.stats().segment.all.current
    lt.memory.record(true)
    local s = lt.memory.snapshot()
    assert.is_true(s.recording)
    assert.equal(segments + live, #s.events) -- the segments held, then the live blocks
    local found = false
    for i, e in ipairs(s.events) do
      assert.equal(i <= segments and "segment_alloc" or "existing", e.kind)
      if e.size == 12288 and e.requested == 12000 then found = true end
    end
    assert.is_true(found)
    lt.del(kept)
    local events = recorded(lt.memory.snapshot())
    assert.equal(1, #events)
    assert.equal("free", events[1].kind)
    assert.equal(12288, events[1].size)
  end)

  it("a snapshot of nothing has no events, and still the statistics", function()
    lt.gc()
    lt.memory.record(true)
    lt.memory.record(false)
    local s = lt.memory.snapshot()
    local stats = lt.memory.stats()
    assert.equal(stats.segment.all.current + stats.allocation.all.current, #s.events) -- only what was held
    assert.same({}, recorded(s))
    assert.is_false(s.recording)
    assert.equal(lt.memory.allocated(), s.stats.allocated_bytes.all.current)
  end)

  it("max_events caps the log and counts what was dropped", function()
    lt.gc()
    local live = lt.memory.stats().allocation.all.current + lt.memory.stats().segment.all.current
    lt.memory.record(true, { max_events = live + 3 })
    local t = {}
    for i = 1, 5 do t[i] = lt.empty(10) end
    lt.del(table.unpack(t))
    lt.memory.record(false)
    local s = lt.memory.snapshot()
    assert.equal(live + 3, #s.events)
    assert.equal(7, s.dropped) -- 2 allocs and 5 frees
    assert.equal(live + 3, s.max_events)
  end)

  it("tensors made inside lt's Lua library are charged to the caller's line", function()
    lt.gc()
    lt.memory.record(true)
    local layer, line = lt.nn.Linear(4, 3), here()
    lt.memory.record(false)
    local params = 0
    for _, e in ipairs(recorded(lt.memory.snapshot())) do
      assert.equal(line, e.origin) -- not lua/lt/nn/linear.lua
      if e.kind == "category" and e.category == "parameter" then params = params + 1 end
    end
    assert.equal(2, params) -- weight and bias, made then marked as parameters
    assert.is_truthy(layer)
  end)

  it("checks its arguments", function()
    h.fails(function() lt.memory.record("yes") end, "boolean expected")
    h.fails(function() lt.memory.record(true, { max = 1 }) end, "record: unknown option 'max' (expected max_events)")
    h.fails(function() lt.memory.record(true, { max_events = 0 }) end, "record: max_events must be positive")
    h.fails(function() lt.memory.mark() end, "string expected")
    h.fails(function() lt.memory.report(42) end, "memory.report: expected a file path, got number")
    h.fails(function() lt.memory.report(os.tmpname(), { colour = 1 }) end, "unknown option 'colour'")
  end)
end)

describe("lt.memory.report", function()
  local dir

  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
  end)

  after_each(function()
    lt.memory.record(false)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("writes one self-contained page: title, legend, marks, the top allocations at the peak", function()
    lt.gc()
    lt.memory.record(true)
    local w = lt.memory.set_category(lt.empty(64, 64), "parameter")
    lt.memory.mark("epoch 1")
    local big, big_line = lt.empty(512, 1024), here() -- 2 MiB, live at the peak
    lt.memory.mark("epoch 2 <done>")
    lt.del(big)
    local path = dir .. "/report.html"
    assert.equal(path, lt.memory.report(path, { title = "history spec & <report>" }))
    local page = read_file(path)

    assert.is_true(has(page, "<title>history spec &amp; &lt;report&gt;</title>"))
    for _, c in ipairs { "parameter", "gradient", "optimizer", "activation", "other", "workspace" } do
      assert.is_true(has(page, 'data-category="' .. c .. '"'), "legend entry " .. c)
    end
    assert.is_true(has(page, '"label":"epoch 1"'))
    assert.is_true(has(page, '"label":"epoch 2 \\u003cdone\\u003e"')) -- cannot close the script
    assert.is_true(has(page, "<td class=\"origin\">" .. big_line .. "</td>"))
    assert.is_true(has(page, "2.0 MiB"))
    assert.is_true(has(page, "Allocator summary"))
    assert.is_true(has(page, "lt memory summary, device cpu"))
    -- Nothing fetched: no external script, style sheet, image or link.
    assert.is_false(has(page, " src="))
    assert.is_false(has(page, "<link"))
    assert.is_false(has(page, "href="))
    assert.is_false(has(page, "@import"))
    -- Written through a temporary file renamed into place: nothing else is left.
    local listing = io.popen("ls -A '" .. dir .. "'"):read("a")
    assert.equal("report.html\n", listing)
    lt.del(w)
  end)

  it("says how to get a timeline when nothing was recorded", function()
    lt.gc()
    lt.memory.record(true)
    lt.memory.record(false)
    local path = dir .. "/empty.html"
    lt.memory.report(path)
    local page = read_file(path)
    if lt.memory.stats().allocation.all.current == 0 then
      assert.is_true(has(page, "lt.memory.record(true)"))
      assert.is_false(has(page, "lt-memory-data"))
    end
    assert.is_true(has(page, "lt memory summary"))
  end)

  it("fails cleanly on a path it cannot write", function()
    h.fails(function() lt.memory.report(dir .. "/missing/dir/report.html") end, "memory.report: cannot write")
  end)
end)
