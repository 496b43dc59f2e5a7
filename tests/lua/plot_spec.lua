-- lt.plot: a training run's records (a JSON-lines file or a list) become the
-- series of four charts (loss, accuracy, learning rate, memory) and one
-- self-contained HTML page. tests/host/test_plot.sh renders the page in
-- Chromium.
local lt = require "lt"
local json = require "lt.json"
local plot = require "lt.plot"
local h = dofile("tests/lua/helpers.lua")

local MIB = 2 ^ 20

-- A run of 2 epochs of 4 steps, logged every 2 steps.
local function records()
  local r = {{kind = "start", recipe = "scripts/train_fashion_mlp.lua", device = "cpu", epochs = 2,
    steps_per_epoch = 4, batch_size = 128}}
  for step = 1, 8 do
    if step == 1 or step % 2 == 0 then
      r[#r + 1] = {kind = "step", step = step, epoch = (step - 1) // 4 + 1, batch_loss = 2.0 / step,
        lr = step <= 4 and 0.1 or 0.05, memory_allocated = step * MIB, memory_reserved = 16 * MIB,
        memory_max_allocated = 10 * MIB, time = step * 0.1}
    end
    if step % 4 == 0 then
      local epoch = step // 4
      r[#r + 1] = {kind = "epoch", step = step, epoch = epoch, epoch_mean_loss = 1.0 / epoch,
        test_loss = 1.2 / epoch, test_accuracy = ({0.8, 0.9})[epoch], lr = epoch == 1 and 0.1 or 0.05,
        memory_allocated = 4 * MIB, memory_reserved = 16 * MIB, memory_max_allocated = 12 * MIB,
        train_seconds = 0.4, eval_seconds = 0.1, time = step * 0.1 + 0.1}
    end
  end
  return r
end

local function chart(data, id)
  for _, c in ipairs(data.charts) do
    if c.id == id then return c end
  end
end

local function series(c, name)
  for _, s in ipairs(c.series) do
    if s.name == name then return s end
  end
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

describe("plot.charts", function()
  it("takes each chart's series from the records, against the step", function()
    local data = plot.charts(records())
    assert.equal("lt training run: scripts/train_fashion_mlp.lua", data.title)
    assert.equal(2, #data.epochs)
    local loss = chart(data, "loss")
    assert.same({{1, 2.0}, {2, 1.0}, {4, 0.5}, {6, 2 / 6}, {8, 0.25}}, series(loss, "batch loss").points)
    assert.same({{4, 1.0}, {8, 0.5}}, series(loss, "epoch mean loss").points)
    assert.same({{4, 1.2}, {8, 0.6}}, series(loss, "test loss").points)
    assert.is_true(series(loss, "test loss").markers)
    assert.same({{4, 0.8}, {8, 0.9}}, series(chart(data, "accuracy"), "test accuracy").points)
    -- The learning rate from step and epoch records alike, one value a step.
    local lr = series(chart(data, "lr"), "learning rate")
    assert.same({{1, 0.1}, {2, 0.1}, {4, 0.1}, {6, 0.05}, {8, 0.05}}, lr.points)
    assert.is_true(lr.steps)
    local memory = chart(data, "memory")
    assert.equal("Memory on cpu", memory.title)
    -- At step 4 the epoch record (written after the step's) wins: 4 MiB.
    assert.same({{1, 1.0}, {2, 2.0}, {4, 4.0}, {6, 6.0}, {8, 4.0}}, series(memory, "allocated").points)
    assert.same({{1, 10.0}, {2, 10.0}, {4, 12.0}, {6, 10.0}, {8, 12.0}}, series(memory, "peak allocated").points)
    assert.equal(16.0, series(memory, "reserved").points[1][2])
  end)

  it("skips missing values, nulls and NaN, and leaves out empty series", function()
    local data = plot.charts({
      {kind = "epoch", step = 10, epoch = 1, epoch_mean_loss = 0 / 0, test_loss = json.null, test_accuracy = 0.5},
      {kind = "epoch", step = 20, epoch = 2, epoch_mean_loss = 0.4, test_accuracy = 0.6},
    }, {title = "mine"})
    assert.equal("mine", data.title)
    local loss = chart(data, "loss")
    assert.equal(1, #loss.series)
    assert.same({{20, 0.4}}, series(loss, "epoch mean loss").points)
    assert.equal(0, #chart(data, "memory").series)
  end)
end)

describe("lt.plot", function()
  it("writes one self-contained page: four charts, the epochs, nothing fetched", function()
    local path = os.tmpname()
    assert.equal(path, lt.plot(records(), path, {title = "a <run>"}))
    local page = read(path)
    os.remove(path)
    assert.truthy(page:find("<title>a &lt;run&gt;</title>", 1, true))
    for _, id in ipairs {"loss", "accuracy", "lr", "memory"} do
      assert.truthy(page:find('<svg class="chart" data-chart="' .. id .. '"', 1, true), id)
    end
    assert.truthy(page:find('<polyline class="series" data-series="batch loss" data-points="5"', 1, true))
    assert.truthy(page:find('data-series="test accuracy"', 1, true))
    assert.equal(2, select(2, page:gsub('<line class="epoch"', "")) // 4) -- two epochs on each of four charts
    assert.truthy(page:find("best test accuracy", 1, true))
    assert.truthy(page:find("<td class=\"num\">0.9000</td>", 1, true))
    assert.falsy(page:find(" src=", 1, true) or page:find("href=", 1, true) or page:find("<link", 1, true)
      or page:find("@import", 1, true) or page:find("<script", 1, true))
  end)

  it("reads a JSON-lines file, skipping a last line cut short", function()
    local path, out = os.tmpname(), os.tmpname()
    local f = assert(io.open(path, "w"))
    for _, r in ipairs(records()) do f:write(json.encode(r), "\n") end
    f:write('{"kind":"step","st')
    f:close()
    lt.plot(path, out)
    local page = read(out)
    assert.truthy(page:find('data-series="batch loss" data-points="5"', 1, true))
    -- A bad line in the middle is an error naming it.
    f = assert(io.open(path, "w"))
    f:write('{"kind":"start"}\nnot json\n{"kind":"step","step":1}\n')
    f:close()
    h.fails(function() lt.plot(path, out) end, path .. ":2: invalid JSON")
    os.remove(path)
    os.remove(out)
  end)

  it("draws a page for a run with no records yet", function()
    local out = os.tmpname()
    lt.plot({}, out)
    local page = read(out)
    os.remove(out)
    assert.truthy(page:find("No data yet.", 1, true))
  end)

  it("refuses bad arguments with plot's name", function()
    h.fails(function() lt.plot(5, "x.html") end, "plot: expected a metrics file or a list of records, got number")
    h.fails(function() lt.plot({}, nil) end, "plot: expected an output path, got nil")
    h.fails(function() lt.plot({}, "x.html", {titel = "x"}) end, "plot: unknown option 'titel'")
    h.fails(function() lt.plot({5}, "x.html") end, "plot: record 1 is a number, expected a table")
    h.fails(function() lt.plot("/nonexistent/m.jsonl", "x.html") end, "plot: cannot read /nonexistent/m.jsonl")
    h.fails(function() lt.plot({}, "/nonexistent/dir/x.html") end, "/nonexistent/dir/x.html")
  end)
end)
