-- Replays the events of lt.memory.snapshot() into what the memory report
-- draws: for each device, allocated bytes by category over time (thinned to
-- a few thousand points that keep every peak), the moment of the peak and the
-- largest blocks live at that moment, reserved bytes and the segments at
-- that moment; and the marks.
--
-- Garbage: a block freed by the Lua collector (its free event is flagged
-- collected: its tensor's finalizer freed it) was unreachable for some while
-- before, but when it became so is unknown. It is drawn as the "garbage"
-- band from the previous collection on that device (the last of the previous
-- run of collected frees; or its allocation, if later) until its free: the
-- longest it can have been garbage when that collection was a full one.

local timeline = {}

-- Bottom to top of the stacked chart.
timeline.categories = { "parameter", "gradient", "optimizer", "activation", "other", "workspace", "garbage" }

local BUCKETS = 1500 -- slices per axis; each keeps its highest and its last state

local function zeros()
  local t = {}
  for _, c in ipairs(timeline.categories) do t[c] = 0 end
  return t
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

local function total_of(state)
  local sum = 0
  for _, v in pairs(state) do sum = sum + v end
  return sum
end

-- Applies one block event to the bytes by category and the live blocks;
-- garbage[id]: the block is counted as garbage now.
local function apply(event, state, live, garbage)
  local kind, size, cat = event.kind, event.size, event.category
  if kind == "alloc" or kind == "existing" then
    state[cat] = state[cat] + size
    live[event.id] = event
  elseif kind == "free" then
    if garbage and garbage[event.id] then cat, garbage[event.id] = "garbage", nil end
    state[cat] = state[cat] - size
    live[event.id] = nil
  elseif kind == "category" then
    if garbage and garbage[event.id] then return end
    state[event.previous] = state[event.previous] - size
    state[cat] = state[cat] + size
    local block = live[event.id]
    if block then live[event.id] = setmetatable({ category = cat }, { __index = block }) end
  end
end

-- First pass: the peak (index of the event after which the total was
-- highest) and the end time of one device's events.
local function find_peak(events, device)
  local state, live = zeros(), {}
  local peak_index, peak_total, peak_state, last_time = 0, 0, zeros(), 0
  for i, e in ipairs(events) do
    if e.device == device then
      apply(e, state, live)
      last_time = e.time
      local total = total_of(state)
      if total > peak_total then peak_index, peak_total, peak_state = i, total, copy(state) end
    end
  end
  return peak_index, peak_total, peak_state, last_time
end

local function largest_live(live, n)
  local blocks = {}
  for _, b in pairs(live) do blocks[#blocks + 1] = b end
  table.sort(blocks, function(a, b)
    if a.size ~= b.size then return a.size > b.size end
    return a.id < b.id
  end)
  local top = {}
  for i = 1, math.min(n, #blocks) do
    local b = blocks[i]
    top[i] = { size = b.size, requested = b.requested, category = b.category, origin = b.origin, op = b.op,
               time = b.kind == "existing" and nil or b.time, id = b.id }
  end
  return top, #blocks
end

-- Where each collected block turns to garbage: {[event index] = {free
-- events}}, the index after which it counts as garbage.
local function garbage_schedule(events, device)
  local schedule, alloc_at, previous_end, run_end = {}, {}, 0, nil
  for i, e in ipairs(events) do
    if e.device == device and e.id then
      if e.kind == "alloc" or e.kind == "existing" then alloc_at[e.id] = i end
      if e.kind == "free" and e.collected then
        local from = math.max(alloc_at[e.id] or 0, previous_end)
        schedule[from] = schedule[from] or {}
        table.insert(schedule[from], e)
        run_end = i
      elseif run_end and not e.kind:find("^segment_") then
        previous_end, run_end = run_end, nil -- a collection ended
      end
    end
  end
  return schedule
end

-- The segments at the peak: {id, size, allocated, largest_free}, largest first.
local function segments_at(segments, live)
  local by_segment = {}
  for _, b in pairs(live) do
    if b.segment then
      local list = by_segment[b.segment] or {}
      list[#list + 1] = b
      by_segment[b.segment] = list
    end
  end
  local out = {}
  for id, size in pairs(segments) do
    local blocks = by_segment[id] or {}
    table.sort(blocks, function(a, b) return a.offset < b.offset end)
    local allocated, largest, at = 0, 0, 0
    for _, b in ipairs(blocks) do
      allocated = allocated + b.size
      largest = math.max(largest, b.offset - at)
      at = b.offset + b.size
    end
    largest = math.max(largest, size - at)
    out[#out + 1] = { id = id, size = size, allocated = allocated, largest_free = largest, blocks = #blocks }
  end
  table.sort(out, function(a, b)
    if a.size ~= b.size then return a.size > b.size end
    return a.id < b.id
  end)
  return out
end

-- One device: points {time, seq (the event's place in the log), bytes by
-- category} as step values (each holds until the next point), thinned to
-- the highest and the last state of each slice (narrower than a pixel both
-- in time and in event order) so that no peak is lost.
local function device_timeline(events, device, duration, top_n)
  local peak_index, peak_total, peak_state = find_peak(events, device)
  local schedule = garbage_schedule(events, device)
  local state, live, garbage, segments, reserved = zeros(), {}, {}, {}, 0
  local points = { { time = 0, seq = 0, bytes = zeros(), reserved = 0 } }
  local peak_segments, peak_reserved, reserved_peak = {}, 0, 0
  local slice, high, last = nil, nil, nil
  local function flush()
    if not high then return end
    points[#points + 1] = high
    if last ~= high then points[#points + 1] = last end
  end
  local top, live_count, peak_time = {}, 0, 0
  local by_category_peak = zeros()
  for i, e in ipairs(events) do
    if e.device == device then
      if e.kind == "segment_alloc" then
        segments[e.id], reserved = e.size, reserved + e.size
      elseif e.kind == "segment_free" then
        segments[e.id], reserved = nil, reserved - (segments[e.id] or e.size)
      end
      reserved_peak = math.max(reserved_peak, reserved)
      apply(e, state, live, garbage)
      for _, g in ipairs(schedule[i] or {}) do -- blocks that may be garbage from here on
        local b = live[g.id]
        if b and not garbage[g.id] then
          state[b.category] = state[b.category] - b.size
          state.garbage = state.garbage + b.size
          garbage[g.id] = true
        end
      end
      for c, v in pairs(state) do
        if v > by_category_peak[c] then by_category_peak[c] = v end
      end
      -- A slice is narrow on both axes the report offers: time and event order.
      local by_time = duration > 0 and math.min(BUCKETS - 1, math.floor(e.time / duration * BUCKETS)) or 0
      local s = by_time * BUCKETS + math.min(BUCKETS - 1, (i - 1) * BUCKETS // #events)
      if s ~= slice then
        flush()
        slice, high = s, nil
      end
      local point = { time = e.time, seq = i, bytes = copy(state), total = total_of(state), reserved = reserved }
      if not high or point.total > high.total then high = point end
      last = point
      if i == peak_index then
        top, live_count = largest_live(live, top_n)
        peak_time = e.time
        peak_segments, peak_reserved = segments_at(segments, live), reserved
        peak_state = copy(state) -- with the garbage band, which find_peak does not draw
      end
    end
  end
  flush()
  return {
    device = device,
    points = points,
    peak = { time = peak_time, seq = peak_index, bytes = peak_total, by_category = peak_state,
             live_blocks = live_count, reserved = peak_reserved, segments = peak_segments },
    reserved_peak = reserved_peak,
    top = top,
    category_peak = by_category_peak,
    final = state,
  }
end

-- The whole snapshot: {duration, event_count, marks = {{time, seq, label}},
-- devices = {...}}.
function timeline.build(snapshot, top_n)
  local events = snapshot.events or {}
  local duration, marks, devices, seen = 0, {}, {}, {}
  for i, e in ipairs(events) do
    if e.time > duration then duration = e.time end
    if e.kind == "mark" then
      marks[#marks + 1] = { time = e.time, seq = i, label = e.label or "" }
    elseif e.device and not seen[e.device] and not e.kind:find("^segment_") then
      seen[e.device] = true
      devices[#devices + 1] = e.device
    end
  end
  local result = { duration = duration, marks = marks, devices = {}, event_count = #events }
  for i, device in ipairs(devices) do
    result.devices[i] = device_timeline(events, device, duration, top_n or 20)
  end
  return result
end

return timeline
