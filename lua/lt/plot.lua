-- lt.plot(metrics, path [, {title=}]): the curves of a training run as one
-- self-contained HTML page (inline style and SVG, no script, nothing
-- fetched): loss (each logged batch, each epoch's mean, the test loss),
-- test accuracy, learning rate and memory (allocated, reserved, peak), all
-- against the training step, with the epochs marked, summary cards and a
-- table of the epochs. metrics is a file of JSON lines, as the recipes'
-- --metrics writes (lua/lt/recipes/training.lua describes the records), or
-- a list of those records as Lua tables. The page is written next to its
-- destination and renamed into place, so a reader never sees half a page.
-- Returns path.
--
--   lt.plot("run.jsonl", "run.html")
--
-- plot.charts(records) gives what the page draws (tests, other renderers).

local core = require "lt.core"
local html_page = require "lt.html_page"
local raise = require "lt.user_error"

local plot = {}

-- Fixed colours: a series has the same colour on every page.
plot.colours = {
  ["batch loss"] = "#9ecae1",
  ["epoch mean loss"] = "#1f4e9c",
  ["test loss"] = "#d62728",
  ["test accuracy"] = "#2ca02c",
  ["learning rate"] = "#9467bd",
  ["allocated"] = "#ff7f0e",
  ["reserved"] = "#17becf",
  ["peak allocated"] = "#8c564b",
}

-- ---- reading the records ----

-- Records from a file of JSON lines. A last line cut short (a run killed
-- while writing) is skipped; any other bad line is an error naming it.
local function read_lines(path)
  local json = require "lt.json"
  local f, err = io.open(path, "r")
  if not f then raise("plot: cannot read " .. tostring(err)) end
  local lines = {}
  for line in f:lines() do lines[#lines + 1] = line end
  f:close()
  local records = {}
  for i, line in ipairs(lines) do
    if line:find("%S") then
      local ok, record = pcall(json.decode, line, ("plot: %s:%d"):format(path, i))
      if ok and type(record) == "table" then
        records[#records + 1] = record
      elseif i < #lines then
        raise(ok and ("plot: %s:%d: expected a JSON object a line"):format(path, i) or tostring(record))
      end
    end
  end
  return records
end

-- A number, or nil for json.null, NaN and anything else.
local function number(v)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then return nil end
  return v
end

local MIB = 2 ^ 20

-- Points {x, y} of field (scaled) over the records of kind; by step, the
-- same step once (the last record's).
local function series_of(records, kinds, field, scale)
  local by_step, steps = {}, {}
  for _, r in ipairs(records) do
    local x, y = number(r.step), number(r[field])
    if kinds[r.kind] and x and y then
      if by_step[x] == nil then steps[#steps + 1] = x end
      by_step[x] = y * (scale or 1)
    end
  end
  table.sort(steps)
  local points = {}
  for i, x in ipairs(steps) do points[i] = {x, by_step[x]} end
  return points
end

local STEP, EPOCH, BOTH = {step = true}, {epoch = true}, {step = true, epoch = true}

--- What the page draws: {title, start (the first start record, or {}),
--- epochs (the epoch records, by epoch), charts = {{id, title, y_label,
--- series = {{name, colour, points = {{step, value}, ...}, markers (draw
--- each point), steps (hold each value until the next point)}}}}}.
--- Series with no points are left out; a chart may have none.
function plot.charts(records, opts)
  opts = opts or {}
  local start, epochs, by_epoch = nil, {}, {}
  for _, r in ipairs(records) do
    if r.kind == "start" and not start then start = r end
    local e = math.tointeger(number(r.epoch))
    if r.kind == "epoch" and e then
      if not by_epoch[e] then epochs[#epochs + 1] = e end
      by_epoch[e] = r
    end
  end
  table.sort(epochs)
  for i, e in ipairs(epochs) do epochs[i] = by_epoch[e] end
  start = start or {}
  local function series(name, points, markers, steps)
    return {name = name, colour = plot.colours[name], points = points, markers = markers, steps = steps}
  end
  local charts = {
    {id = "loss", title = "Loss", y_label = "cross-entropy loss", series = {
      series("batch loss", series_of(records, STEP, "batch_loss")),
      series("epoch mean loss", series_of(records, EPOCH, "epoch_mean_loss"), true),
      series("test loss", series_of(records, EPOCH, "test_loss"), true)}},
    {id = "accuracy", title = "Test accuracy", y_label = "accuracy", series = {
      series("test accuracy", series_of(records, EPOCH, "test_accuracy"), true)}},
    {id = "lr", title = "Learning rate", y_label = "learning rate", series = {
      series("learning rate", series_of(records, BOTH, "lr"), false, true)}},
    {id = "memory", title = "Memory" .. (type(start.device) == "string" and (" on " .. start.device) or ""),
      y_label = "MiB", series = {
      series("allocated", series_of(records, BOTH, "memory_allocated", 1 / MIB)),
      series("reserved", series_of(records, BOTH, "memory_reserved", 1 / MIB)),
      series("peak allocated", series_of(records, BOTH, "memory_max_allocated", 1 / MIB))}},
  }
  for _, chart in ipairs(charts) do
    local kept = {}
    for _, s in ipairs(chart.series) do
      if #s.points > 0 then kept[#kept + 1] = s end
    end
    chart.series = kept
  end
  local title = opts.title or ("lt training run" .. (type(start.recipe) == "string" and (": " .. start.recipe) or ""))
  return {title = title, start = start, epochs = epochs, charts = charts}
end

-- ---- drawing ----

local html_escapes = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }
local function html(s) return (tostring(s):gsub("[&<>\"']", html_escapes)) end

-- A value for labels: few digits, an exponent for tiny rates.
local function short(v)
  local a = math.abs(v)
  if a ~= 0 and (a < 1e-3 or a >= 1e6) then return (string.format("%.2e", v):gsub("e([+-])0*(%d)", "e%1%2")) end
  local s = string.format("%.4f", v):gsub("0+$", ""):gsub("%.$", "")
  return s
end

-- Axis ticks at 1, 2 or 5 times a power of ten, about `count` of them,
-- covering lo..hi; returns the ticks and the widened range.
local function nice_ticks(lo, hi, count)
  if hi <= lo then
    local pad = lo == 0 and 1 or math.abs(lo) * 0.1
    lo, hi = lo - pad, hi + pad
  end
  local raw = (hi - lo) / count
  local power = 10 ^ math.floor(math.log(raw, 10))
  local step = power
  for _, m in ipairs {1, 2, 5, 10} do
    if m * power >= raw then step = m * power; break end
  end
  local first, last = math.floor(lo / step) * step, math.ceil(hi / step) * step
  local ticks = {}
  for i = 0, math.floor((last - first) / step + 0.5) do ticks[#ticks + 1] = first + i * step end
  return ticks, first, last
end

-- At most two points a pixel column (its lowest and highest, in order): a
-- long run's thousands of batch losses draw the same band, in a small page.
local function thin(points, x_of, columns)
  if #points <= 2 * columns then return points end
  local out, bucket, lo, hi = {}, nil, nil, nil
  local function flush()
    if not bucket then return end
    if lo[1] <= hi[1] then out[#out + 1] = lo; if hi ~= lo then out[#out + 1] = hi end
    else out[#out + 1] = hi; out[#out + 1] = lo end
  end
  for _, p in ipairs(points) do
    local b = math.floor(x_of(p[1]))
    if b ~= bucket then
      flush()
      bucket, lo, hi = b, p, p
    else
      if p[2] < lo[2] then lo = p end
      if p[2] > hi[2] then hi = p end
    end
  end
  flush()
  return out
end

local W, H = 560, 250
local LEFT, RIGHT, TOP, BOTTOM = 62, 14, 14, 40

local function chart_svg(chart, epochs)
  local parts = {}
  local function add(fmt, ...) parts[#parts + 1] = string.format(fmt, ...) end
  local xmin, xmax, ymin, ymax = math.huge, -math.huge, math.huge, -math.huge
  for _, s in ipairs(chart.series) do
    for _, p in ipairs(s.points) do
      xmin, xmax = math.min(xmin, p[1]), math.max(xmax, p[1])
      ymin, ymax = math.min(ymin, p[2]), math.max(ymax, p[2])
    end
  end
  -- Steps count from 0 (the run's start), values from 0 unless they sit far
  -- above it (a loss near 0.3 should not be squashed into a sliver).
  xmin = math.min(xmin, 0)
  if ymin >= 0 and ymin < ymax * 0.5 then ymin = 0 end
  if chart.id == "accuracy" then ymin, ymax = math.max(0, math.min(ymin, ymax - 0.05)), math.min(1, ymax + 0.02) end
  local yticks, y0, y1 = nice_ticks(ymin, ymax, 5)
  -- The steps span the width exactly (a run of 32 steps ends at the right
  -- edge, not at 40); the ticks are the round ones inside.
  local xticks, x0, x1 = nice_ticks(xmin, xmax, 6)
  if xmax > xmin then
    x0, x1 = xmin, xmax
    local inside = {}
    for _, v in ipairs(xticks) do
      if v >= x0 - 1e-9 and v <= x1 + 1e-9 then inside[#inside + 1] = v end
    end
    xticks = inside
  end
  local pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
  local function X(v) return LEFT + (v - x0) / (x1 - x0) * pw end
  local function Y(v) return TOP + ph - (v - y0) / (y1 - y0) * ph end
  add('<svg class="chart" data-chart="%s" viewBox="0 0 %d %d" role="img" aria-label="%s">', chart.id, W, H, html(chart.title))
  add('<rect class="plot-area" x="%d" y="%d" width="%d" height="%d"/>', LEFT, TOP, pw, ph)
  for _, v in ipairs(yticks) do
    add('<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>', LEFT, LEFT + pw, Y(v), Y(v))
    add('<text class="tick" x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>', LEFT - 6, Y(v), short(v))
  end
  for _, v in ipairs(xticks) do
    add('<line class="grid" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>', X(v), X(v), TOP, TOP + ph)
    add('<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>', X(v), TOP + ph + 16, short(v))
  end
  -- Epoch ends, labelled when there is room (fewer than 16).
  for _, e in ipairs(epochs) do
    local s = number(e.step)
    if s and s >= x0 and s <= x1 then
      add('<line class="epoch" data-epoch="%d" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>', e.epoch, X(s), X(s), TOP, TOP + ph)
      if #epochs < 16 then
        add('<text class="epoch-label" x="%.1f" y="%d" text-anchor="end">epoch %d</text>', X(s) - 3, TOP + 11, e.epoch)
      end
    end
  end
  add('<text class="axis" x="%.1f" y="%d" text-anchor="middle">step</text>', LEFT + pw / 2, H - 6)
  add('<text class="axis" transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">%s</text>', TOP + ph / 2, html(chart.y_label))
  for _, s in ipairs(chart.series) do
    local pts = {}
    local drawn = thin(s.points, X, pw)
    for i, p in ipairs(drawn) do
      -- A rate holds until the next point (a schedule steps, it does not slide).
      if s.steps and i > 1 then pts[#pts + 1] = string.format("%.1f,%.1f", X(p[1]), Y(drawn[i - 1][2])) end
      pts[#pts + 1] = string.format("%.1f,%.1f", X(p[1]), Y(p[2]))
    end
    add('<polyline class="series" data-series="%s" data-points="%d" points="%s" stroke="%s"/>',
      html(s.name), #s.points, table.concat(pts, " "), s.colour)
    if s.markers then
      for _, p in ipairs(s.points) do
        add('<circle class="marker" data-series="%s" cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %s at step %s</title></circle>',
          html(s.name), X(p[1]), Y(p[2]), s.colour, html(s.name), short(p[2]), short(p[1]))
      end
    end
  end
  parts[#parts + 1] = "</svg>"
  return table.concat(parts)
end

local function legend(chart)
  local items = {}
  for _, s in ipairs(chart.series) do
    local last = s.points[#s.points][2]
    items[#items + 1] = string.format('<li data-series="%s"><span class="swatch" style="background:%s"></span>%s <span class="last">%s</span></li>',
      html(s.name), s.colour, html(s.name),
      html("last " .. (chart.id == "memory" and string.format("%.1f MiB", last) or short(last))))
  end
  return '<ul class="legend">' .. table.concat(items) .. "</ul>"
end

local function card(label, value)
  return string.format('<div class="card"><div class="label">%s</div><div class="value">%s</div></div>', html(label), html(value))
end

local function duration(seconds)
  if seconds < 60 then return string.format("%.1f s", seconds) end
  local s = math.floor(seconds + 0.5)
  if s >= 3600 then return string.format("%d h %02d min", s // 3600, s % 3600 // 60) end
  return string.format("%d min %02d s", s // 60, s % 60)
end

local function cards(data)
  local out, epochs = {}, data.epochs
  local last = epochs[#epochs]
  if last then
    out[#out + 1] = card("final test accuracy", number(last.test_accuracy) and string.format("%.4f", last.test_accuracy) or "-")
    local best, at = nil, nil
    for _, e in ipairs(epochs) do
      local a = number(e.test_accuracy)
      if a and (not best or a > best) then best, at = a, e.epoch end
    end
    if best then out[#out + 1] = card("best test accuracy", string.format("%.4f (epoch %d)", best, at)) end
    if number(last.epoch_mean_loss) then out[#out + 1] = card("last epoch mean loss", string.format("%.4f", last.epoch_mean_loss)) end
    if number(last.time) then out[#out + 1] = card("time", duration(last.time)) end
  end
  local peak = 0
  for _, chart in ipairs(data.charts) do
    if chart.id == "memory" then
      for _, s in ipairs(chart.series) do
        if s.name == "peak allocated" or s.name == "allocated" then
          for _, p in ipairs(s.points) do peak = math.max(peak, p[2]) end
        end
      end
    end
  end
  if peak > 0 then out[#out + 1] = card("peak allocated", string.format("%.1f MiB", peak)) end
  return '<div class="cards">' .. table.concat(out) .. "</div>"
end

local function epoch_table(epochs)
  if #epochs == 0 then return "" end
  local rows = {}
  local function cell(v, fmt) v = number(v); return v and string.format(fmt, v) or "" end
  for _, e in ipairs(epochs) do
    rows[#rows + 1] = string.format('<tr><td class="num">%s</td><td class="num">%s</td><td class="num">%s</td>' ..
      '<td class="num">%s</td><td class="num">%s</td><td class="num">%s</td><td class="num">%s</td></tr>',
      cell(e.epoch, "%d"), cell(e.step, "%d"), cell(e.epoch_mean_loss, "%.4f"), cell(e.test_loss, "%.4f"),
      cell(e.test_accuracy, "%.4f"), number(e.lr) and html(short(e.lr)) or "",
      cell(e.train_seconds, "%.1f s") .. (number(e.eval_seconds) and (" + " .. cell(e.eval_seconds, "%.1f s")) or ""))
  end
  return '<section class="panel"><h2>Epochs</h2><table class="epochs"><thead><tr><th>epoch</th><th>step</th>' ..
    "<th>epoch mean loss</th><th>test loss</th><th>test accuracy</th><th>learning rate</th><th>train + eval time</th>" ..
    "</tr></thead><tbody>" .. table.concat(rows) .. "</tbody></table></section>"
end

-- Its own rules, after html_page's base style.
local CSS = [[
main { max-width: 1220px; }
h2 { margin: 0 0 8px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 18px; margin-bottom: 18px; }
.panel { padding: 14px 16px; }
svg.chart { width: 100%; height: auto; display: block; }
svg .plot-area { fill: #fff; stroke: #d0d7de; }
svg .grid { stroke: #eaeef2; stroke-width: 1; }
svg .tick { font-size: 11px; fill: #656d76; font-variant-numeric: tabular-nums; }
svg .axis { font-size: 12px; fill: #424a53; }
svg .epoch { stroke: #8c959f; stroke-dasharray: 4 3; stroke-width: 1; }
svg .epoch-label { font-size: 10px; fill: #8c959f; }
svg .series { fill: none; stroke-width: 2; stroke-linejoin: round; stroke-linecap: round; }
svg .series[data-series="batch loss"] { stroke-width: 1.2; }
.legend { list-style: none; margin: 6px 0 0; padding: 0; display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 13px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.last { color: #656d76; font-variant-numeric: tabular-nums; }
.empty { color: #656d76; font-style: italic; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eaeef2; text-align: left; }
td.num, th { text-align: right; font-variant-numeric: tabular-nums; }
footer { color: #656d76; font-size: 12px; }
]]

local function page(data)
  local start = data.start
  local facts = {}
  if type(start.recipe) == "string" and not data.title:find(start.recipe, 1, true) then facts[#facts + 1] = start.recipe end
  if type(start.device) == "string" then facts[#facts + 1] = "on " .. start.device end
  if number(start.epochs) then
    facts[#facts + 1] = string.format("%d epochs", start.epochs) ..
      (number(start.steps_per_epoch) and string.format(" of %d steps", start.steps_per_epoch) or "")
  end
  if number(start.batch_size) then facts[#facts + 1] = string.format("batch %d", start.batch_size) end
  if type(start.lt_version) == "string" then facts[#facts + 1] = "lt " .. start.lt_version end
  if type(start.date) == "string" then facts[#facts + 1] = "started " .. start.date end
  local panels = {}
  for _, chart in ipairs(data.charts) do
    local body = #chart.series > 0 and (chart_svg(chart, data.epochs) .. legend(chart))
      or '<p class="empty">No data yet.</p>'
    panels[#panels + 1] = string.format('<section class="panel" data-panel="%s"><h2>%s</h2>%s</section>',
      chart.id, html(chart.title), body)
  end
  local main = string.format([[
<h1>%s</h1>
<p class="subtitle">%s</p>
%s
<div class="charts">%s</div>
%s
<footer>Written by lt.plot %s. Loss: each logged batch's mean loss, each epoch's mean over its batches
(at the epoch's last step) and the test set's. Memory: lt.memory's figures on the training device
(allocated, reserved by the caching allocator, and the peak allocated so far).</footer>]],
    html(data.title), html(table.concat(facts, " \u{b7} ")), cards(data),
    table.concat(panels, "\n"), epoch_table(data.epochs), os.date("%Y-%m-%d %H:%M:%S"))
  return html_page.document(html(data.title), CSS, main)
end

--- Writes the page for metrics (a JSON-lines file or a list of records) to
--- path; opts.title (default "lt training run: <recipe>"). Returns path.
function plot.write(metrics, path, opts)
  if type(metrics) ~= "string" and type(metrics) ~= "table" then
    raise("plot: expected a metrics file or a list of records, got " .. type(metrics))
  end
  if type(path) ~= "string" then raise("plot: expected an output path, got " .. type(path)) end
  if path:find("\0", 1, true) then raise("plot: the path contains a NUL character") end
  if opts ~= nil and type(opts) ~= "table" then raise("plot: expected an options table, got " .. type(opts)) end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "title" then require("lt.nn.options").unknown("plot", k, {title = true}) end
  end
  if opts.title ~= nil and type(opts.title) ~= "string" then raise("plot: title must be a string, got " .. type(opts.title)) end
  local records = type(metrics) == "string" and read_lines(metrics) or metrics
  for i, r in ipairs(records) do
    if type(r) ~= "table" then raise(("plot: record %d is a %s, expected a table"):format(i, type(r))) end
  end
  local ok, err = pcall(core._write_file, "plot", path, page(plot.charts(records, opts)))
  if not ok then raise((tostring(err):gsub("^[^\n:]*:%d+: ", ""))) end
  return path
end

return setmetatable(plot, {
  __call = function(_, metrics, path, opts) return plot.write(metrics, path, opts) end,
})
