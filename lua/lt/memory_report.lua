-- lt.memory.report(path [, {title=}]): one self-contained HTML page (inline
-- style and script, nothing fetched) about where memory went: a stacked
-- timeline of allocated bytes by category with the marks and the peak, the
-- largest live allocations at the peak, and lt.memory.summary(). Without a
-- recording it still writes the statistics, with a note on how to get a
-- timeline. The file is written next to its destination and renamed into
-- place, so a reader never sees half a page.

local options_reader = require "lt.nn.options"
local html_page = require "lt.html_page"
local raise = require "lt.user_error"
local timeline = require "lt.memory_timeline"
local assets = require "lt.memory_report.assets"

local TOP_N = 20

local function human(bytes)
  local units = { "B", "KiB", "MiB", "GiB", "TiB" }
  local value, unit = bytes, 1
  while math.abs(value) >= 1024 and unit < #units do value, unit = value / 1024, unit + 1 end
  if unit == 1 then return string.format("%d B", value) end
  return string.format("%.1f %s", value, units[unit])
end

local function seconds(t)
  if t < 1 then return string.format("%.1f ms", t * 1e3) end
  return string.format("%.2f s", t)
end

local html_escapes = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }
local function html(s) return (tostring(s):gsub("[&<>\"']", html_escapes)) end

-- JSON for the data island; <, > and & are escaped so that no string can
-- close the <script> element.
local function json(v)
  local kind = type(v)
  if kind == "table" then
    if #v > 0 or next(v) == nil and getmetatable(v) == "array" then
      local parts = {}
      for i = 1, #v do parts[i] = json(v[i]) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    local parts = {}
    for i, k in ipairs(keys) do parts[i] = json(k) .. ":" .. json(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif kind == "string" then
    return '"' .. v:gsub('[%c"\\<>&]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
  elseif math.type(v) == "integer" then
    return tostring(v)
  elseif kind == "number" then
    return v == v and v ~= math.huge and v ~= -math.huge and string.format("%.9g", v) or "0"
  elseif kind == "boolean" then
    return tostring(v)
  end
  return "null"
end

local function array(t) return setmetatable(t, { __metatable = "array" }) end

-- What the drawing script needs, compactly: short keys, step points.
local function chart_data(tl)
  local devices = array {}
  for i, dev in ipairs(tl.devices) do
    local points, reserved = array {}, array {}
    for j, p in ipairs(dev.points) do -- {time, seq, bytes of each category in order}
      local row = { p.time, p.seq }
      for k, c in ipairs(timeline.categories) do row[k + 2] = p.bytes[c] end
      points[j] = row
      reserved[j] = p.reserved
    end
    devices[i] = { device = dev.device, points = points,
                   reserved = dev.reserved_peak > 0 and reserved or nil, reservedPeak = dev.reserved_peak,
                   peak = { t = dev.peak.time, seq = dev.peak.seq, bytes = dev.peak.bytes, label = human(dev.peak.bytes) } }
  end
  local marks = array {}
  for i, m in ipairs(tl.marks) do marks[i] = { t = m.time, seq = m.seq, label = m.label } end
  return { categories = array { table.unpack(timeline.categories) }, colours = assets.colours, reservedColour = assets.reserved_colour, duration = tl.duration,
           events = tl.event_count, marks = marks, devices = devices }
end

local function card(label, value)
  return string.format('<div class="card"><div class="label">%s</div><div class="value">%s</div></div>',
    html(label), html(value))
end

local function legend(dev)
  local items = {}
  for _, c in ipairs(timeline.categories) do
    local peak = dev.category_peak[c]
    items[#items + 1] = string.format(
      '<li class="%s" data-category="%s"><span class="swatch" style="background:%s"></span>%s <span class="bytes">%s</span></li>',
      peak > 0 and "used" or "empty", c, assets.colours[c], c, peak > 0 and ("peak " .. human(peak)) or "none")
  end
  if dev.reserved_peak > 0 then
    items[#items + 1] = string.format('<li class="used" data-series="reserved"><span class="swatch" style="background:%s"></span>' ..
      'reserved (segments) <span class="bytes">peak %s</span></li>', assets.reserved_colour, human(dev.reserved_peak))
  end
  return '<ul class="legend">' .. table.concat(items) .. "</ul>" ..
    '<p class="muted legend-note">garbage: bytes the Lua collector freed (their tensors\' finalizers), drawn from ' ..
    "the previous batch of collector frees on this device (or their allocation, if later) until their own: when " ..
    "in that interval they became unreachable is not known, so the band is the longest they can have been " ..
    "garbage. The dashed line is the reserved bytes: segments the allocator holds, allocated or cached.</p>"
end

-- Blocks that C code made with no Lua line of its own (gradients from
-- backward, optimizer internals) or that predate the recording.
local NO_ORIGIN = '<span class="muted" title="allocated by C code (autograd, an optimizer step) ' ..
  'or before recording started, with no Lua line of its own">inside lt</span>'

local function top_table(dev)
  if #dev.top == 0 then return '<p class="muted">Nothing was allocated.</p>' end
  local rows = {}
  for i, b in ipairs(dev.top) do
    rows[#rows + 1] = string.format(
      '<tr><td class="num">%d</td><td class="num">%s</td><td class="num">%s</td>' ..
      '<td><span class="swatch" style="background:%s"></span> %s</td><td class="origin">%s</td><td class="op">%s</td><td class="num">%s</td></tr>',
      i, human(b.size), human(b.requested), assets.colours[b.category] or "#ccc", html(b.category),
      b.origin and html(b.origin) or NO_ORIGIN, b.op and html(b.op) or "",
      b.time and seconds(b.time) or '<span class="muted">before recording</span>')
  end
  local shown = #dev.top < dev.peak.live_blocks
      and string.format(" (the %d largest of %d)", #dev.top, dev.peak.live_blocks) or ""
  return string.format('<p class="muted">Live at the peak, %s at %s%s.</p>', human(dev.peak.bytes),
      seconds(dev.peak.time), shown) ..
    '<table class="top"><thead><tr><th class="num">#</th><th class="num">size</th><th class="num">requested</th>' ..
    "<th>category</th><th>created at</th><th>in</th><th class=\"num\">allocated at</th></tr></thead><tbody>" ..
    table.concat(rows, "\n") .. "</tbody></table>"
end

-- Fragmentation: each segment at the peak, its allocated bytes and its
-- largest free block (what one more allocation could get without a new one).
local function segments_table(dev)
  local segs = dev.peak.segments or {}
  if #segs == 0 then return '<p class="muted">No segment events were recorded.</p>' end
  local rows, total, allocated = {}, 0, 0
  for i, sg in ipairs(segs) do
    total, allocated = total + sg.size, allocated + sg.allocated
    if i <= TOP_N then
      rows[#rows + 1] = string.format('<tr><td class="num">%d</td><td class="num">%s</td><td class="num">%s</td>' ..
        '<td class="num">%s</td><td class="num">%d</td><td class="num">%.0f%%</td></tr>', sg.id, human(sg.size),
        human(sg.allocated), human(sg.largest_free), sg.blocks,
        sg.size > sg.allocated and 100 * (1 - sg.largest_free / (sg.size - sg.allocated)) or 0)
    end
  end
  return string.format('<p class="muted">At the peak: %s reserved in %d segments, %s of it allocated%s. ' ..
      "Fragmentation is the share of a segment's free bytes outside its largest free block.</p>",
      human(total), #segs, human(allocated), #segs > TOP_N and (", the " .. TOP_N .. " largest shown") or "") ..
    '<table class="top segments"><thead><tr><th class="num">segment</th><th class="num">size</th>' ..
    '<th class="num">allocated</th><th class="num">largest free</th><th class="num">blocks</th>' ..
    '<th class="num">fragmentation</th></tr></thead><tbody>' .. table.concat(rows, "\n") .. "</tbody></table>"
end

local function device_sections(tl)
  local out = {}
  for _, dev in ipairs(tl.devices) do
    out[#out + 1] = string.format([[
<section class="panel"><h2>Allocated memory on %s</h2>%s
<div class="chart" id="chart-%s"></div></section>
<section class="panel"><h2>Top %d allocations at the peak on %s</h2>%s</section>
<section class="panel"><h2>Segments at the peak on %s</h2>%s</section>]],
      html(dev.device), legend(dev), html(dev.device), TOP_N, html(dev.device), top_table(dev),
      html(dev.device), segments_table(dev))
  end
  return table.concat(out, "\n")
end

-- by_device: lt.memory.stats of each device with events, taken with the
-- snapshot; the cards show the figures of the device that peaked (a CUDA
-- run's GPU, not the CPU that snapshot.stats describes).
local function cards(snapshot, tl, by_device)
  local stats, peak, peak_dev = snapshot.stats, 0, nil
  for _, dev in ipairs(tl.devices) do
    if dev.peak.bytes >= peak then peak, peak_dev = dev.peak.bytes, dev end
  end
  if peak_dev and by_device and by_device[peak_dev.device] then stats = by_device[peak_dev.device] end
  local list = {}
  if peak_dev then
    list[#list + 1] = card("peak allocated", human(peak))
    list[#list + 1] = card("peak at", seconds(peak_dev.peak.time))
  else
    list[#list + 1] = card("peak allocated", human(stats.allocated_bytes.all.peak))
  end
  list[#list + 1] = card("allocated now", human(stats.allocated_bytes.all.current))
  list[#list + 1] = card("peak reserved", human(stats.reserved_bytes.all.peak))
  if snapshot.events and #snapshot.events > 0 then
    list[#list + 1] = card("events", tostring(#snapshot.events))
    list[#list + 1] = card("recorded for", seconds(tl.duration))
  end
  return '<div class="cards">' .. table.concat(list) .. "</div>"
end

local function notes(snapshot)
  local out = {}
  local blocks = 0 -- segment events alone (the cache held at the start) make no timeline
  for _, e in ipairs(snapshot.events or {}) do
    if not e.kind:find("^segment_") then blocks = blocks + 1 end
  end
  if blocks == 0 then
    out[#out + 1] = '<p class="note">No timeline: nothing was recorded. Call <code>lt.memory.record(true)</code> ' ..
      "at the start of the script (or run it with <code>lt --memory-report FILE</code>) to record " ..
      "every allocation, free and mark.</p>"
  end
  if (snapshot.dropped or 0) > 0 then
    out[#out + 1] = string.format('<p class="note">The log was full at %d events: %d later events were ' ..
      "dropped, so the timeline stops early. Raise it with <code>lt.memory.record(true, {max_events=...})</code>.</p>",
      snapshot.max_events, snapshot.dropped)
  end
  return table.concat(out, "\n")
end

local function page(memory, snapshot, summary, title, version, by_device)
  local tl = timeline.build(snapshot, TOP_N)
  local chart = #tl.devices > 0 and string.format(
    '<script type="application/json" id="lt-memory-data">%s</script>\n<script>%s</script>',
    json(chart_data(tl)), assets.script) or ""
  local main = string.format([[
<h1>%s</h1>
<p class="subtitle">lt %s memory report, written %s</p>
%s
%s
%s
<section class="panel"><h2>Allocator summary</h2><pre class="summary">%s</pre></section>
<footer>Categories: parameter, gradient, optimizer, activation (saved for backward), other, workspace.
Sizes are the allocator's rounded blocks (multiples of 512 bytes).</footer>]],
    html(title), html(version or ""), os.date("%Y-%m-%d %H:%M:%S"),
    notes(snapshot), cards(snapshot, tl, by_device), device_sections(tl), html(summary))
  return html_page.document(html(title), assets.css, main, chart)
end

-- Writes text to path as lt.save writes: complete or not at all, and no
-- temporary left behind by a process killed while writing.
local function write_atomically(path, text)
  local ok, err = pcall(require("lt.core")._write_file, "memory.report", path, text)
  if not ok then raise((tostring(err):gsub("^[^\n:]*:%d+: ", ""))) end
end

return function(memory, version)
  return function(path, opts)
    if type(path) ~= "string" then
      raise("memory.report: expected a file path, got " .. type(path))
    end
    -- io.open would stop at the NUL and write another file.
    if path:find("\0", 1, true) then raise("memory.report: the path contains a NUL character") end
    opts = opts or {}
    if type(opts) ~= "table" then raise("memory.report: expected an options table, got " .. type(opts)) end
    for k in pairs(opts) do
      if k ~= "title" then options_reader.unknown("memory.report", k, { title = true }) end
    end
    -- As lua.c builds arg, arg[0] is the script when arg[-1] (the host) is there.
    local args = rawget(_G, "arg")
    local script = type(args) == "table" and args[-1] and args[0]
    local title = opts.title or ("lt memory report" .. (script and (": " .. script) or ""))
    -- The summary right after the snapshot, before building the page makes
    -- garbage whose collection could free tensors in between.
    -- One summary per device that has events (the CPU alone when none has),
    -- so that a CUDA run's report shows the GPU's allocator, not only the CPU's.
    local snapshot = memory.snapshot()
    local devices, seen = {}, {}
    for _, e in ipairs(snapshot.events or {}) do
      if e.device and not seen[e.device] then
        seen[e.device] = true
        devices[#devices + 1] = e.device
      end
    end
    if #devices == 0 then devices[1] = "cpu" end
    local summaries, by_device = {}, {}
    for i, dev in ipairs(devices) do
      summaries[i] = memory.summary(dev)
      by_device[dev] = memory.stats(dev)
    end
    write_atomically(path, page(memory, snapshot, table.concat(summaries, "\n\n"), title, version, by_device))
    return path
  end
end
