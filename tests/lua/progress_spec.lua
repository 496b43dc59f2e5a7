-- lt.progress: a bar that wraps any loop (iterator function, table, count,
-- DataLoader) as tqdm does, or is driven by hand; its lines name every field
-- (elapsed, ETA, rate, the postfix), redraw in place on a terminal and are
-- plain, at a modest rate, into a file. A fake clock and a fake file make
-- every line exact.
local lt = require "lt"
local progress = require "lt.progress"
local h = dofile("tests/lua/helpers.lua")

-- A file that keeps what is written, and a clock the test moves.
local function sink()
  local out = {text = ""}
  function out:write(...)
    for _, s in ipairs {...} do self.text = self.text .. tostring(s) end
    return self
  end
  function out:flush() return self end
  return out
end

local function fake_clock()
  local clock = {now = 100.0}
  clock.fn = function() return clock.now end
  return clock
end

-- The lines of a plain (not a terminal) output.
local function lines(text)
  local out = {}
  for line in text:gmatch("([^\n]*)\n") do out[#out + 1] = line end
  return out
end

-- The frames of a terminal output: each "\r...\27[K" redraw.
local function frames(text)
  local out = {}
  for frame in text:gmatch("\r([^\r]*)\27%[K") do out[#out + 1] = frame end
  return out
end

describe("lt.progress wrapping a loop", function()
  it("is lt.progress, callable, with progress.new for bars by hand", function()
    assert.equal(progress, lt.progress)
    assert.is_function(lt.progress.new)
  end)

  it("passes an iterator's values through and counts each step", function()
    local out, clock = sink(), fake_clock()
    local items = {{"a", 1}, {"b", 2}, {"c", 3}}
    local i = 0
    local function iter()
      i = i + 1
      if items[i] then return items[i][1], items[i][2] end
    end
    local seen = {}
    for name, value in lt.progress(iter, {total = 3, desc = "walk", out = out, tty = false, clock = clock.fn}) do
      clock.now = clock.now + 2
      seen[#seen + 1] = name .. value
    end
    assert.same({"a1", "b2", "c3"}, seen)
    assert.same({"walk  3/3 (100%)  took 6.0 s  2.00 s/it"}, lines(out.text))
  end)

  it("walks a table as ipairs and a count as 1..n", function()
    local out = sink()
    local got = {}
    for i, v in lt.progress({"x", "y"}, {out = out, tty = false}) do got[#got + 1] = i .. v end
    assert.same({"1x", "2y"}, got)
    local n = 0
    for i in lt.progress(4, {out = out, tty = false}) do n = n + i end
    assert.equal(10, n)
    local l = lines(out.text)
    assert.equal(2, #l)
    assert.truthy(l[1]:match("^2/2 %(100%%%)  took "), l[1])
    assert.truthy(l[2]:match("^4/4 %(100%%%)  took "), l[2])
  end)

  it("walks a DataLoader's next epoch, its length the total", function()
    local loader = lt.data.DataLoader({lt.arange(1, 11)}, {batch_size = 4})
    local out, sizes = sink(), {}
    for x in lt.progress(loader, {desc = "batches", out = out, tty = false}) do sizes[#sizes + 1] = x:size(1) end
    assert.same({4, 4, 2}, sizes)
    assert.truthy(lines(out.text)[1]:match("^batches  3/3 %(100%%%)"), out.text)
  end)

  it("with no total shows the count, the elapsed time and the rate", function()
    local out, clock = sink(), fake_clock()
    local n = 0
    local bar = lt.progress(function() n = n + 1; if n <= 5 then return n end end,
      {desc = "stream", unit = "batch", out = out, tty = false, clock = clock.fn, log_every = 3})
    for _ in bar do clock.now = clock.now + 1 end
    -- A plain line after 3 s (3 steps counted when the 4th is asked for) and the final one.
    assert.same({"stream  3 batch  elapsed 00:03  1.0 batch/s", "stream  5 batch  took 5.0 s  1.0 batch/s"},
      lines(out.text))
  end)

  it("prints plain lines at most every log_every seconds with elapsed, ETA and rate named", function()
    local out, clock = sink(), fake_clock()
    local bar = lt.progress(100, {desc = "epoch 1/2", out = out, tty = false, clock = clock.fn, log_every = 10})
    for i in bar do
      clock.now = clock.now + 0.5
      bar:set_postfix{["batch loss"] = 1 / i}
    end
    local l = lines(out.text)
    -- 50 s of steps: a line each 10 s (4 of them before the end) and the final one.
    assert.equal(5, #l, out.text)
    -- (The step's fields are set in its body: the line at 20 done shows the 20th's.)
    assert.equal("epoch 1/2   20/100 (20%)  elapsed 00:10  ETA 00:40  2.0 it/s  batch loss 0.0500", l[1])
    assert.equal("epoch 1/2  100/100 (100%)  took 50.0 s  2.0 it/s  batch loss 0.0100", l[5])
  end)

  it("redraws in place on a terminal, at most every interval, and ends with a newline", function()
    local out, clock = sink(), fake_clock()
    local bar = lt.progress(10, {desc = "e", out = out, tty = true, clock = clock.fn, width = 10, interval = 1})
    for _ in bar do clock.now = clock.now + 0.5 end
    local f = frames(out.text)
    -- Steps every 0.5 s, redraws at once then every 1 s (1, 3, 5, 7, 9 done), then the final line.
    assert.equal(6, #f, out.text)
    assert.equal("e   10% [=>        ]   1/10  elapsed 00:00  ETA 00:04  2.0 it/s", f[1])
    assert.equal("e   30% [===>      ]   3/10  elapsed 00:01  ETA 00:03  2.0 it/s", f[2])
    assert.equal("e  100% [==========]  10/10  took 5.0 s  2.0 it/s", f[6])
    assert.equal("\n", out.text:sub(-1))
  end)

  it("a break closes the bar, the step it broke in not counted (as tqdm)", function()
    local out = sink()
    for i in lt.progress(10, {desc = "b", out = out, tty = false}) do
      if i == 4 then break end
    end
    assert.truthy(lines(out.text)[1]:match("^b   3/10 %(30%%%)  took "), out.text)
  end)

  it("an error inside the loop ends the bar's line and propagates", function()
    local out = sink()
    local ok, err = pcall(function()
      for i in lt.progress(10, {desc = "x", out = out, tty = true, interval = 0}) do
        if i == 3 then error("boom", 0) end
      end
    end)
    assert.is_false(ok)
    assert.equal("boom", err)
    assert.equal("\n", out.text:sub(-1))
    assert.falsy(out.text:find("took", 1, true))
  end)
end)

describe("a progress bar by hand", function()
  it("keeps the old progress.new / step / finish", function()
    local out, clock = sink(), fake_clock()
    local bar = progress.new(4, {label = "epoch 1/1", out = out, tty = false, clock = clock.fn})
    for _ = 1, 4 do
      clock.now = clock.now + 0.25
      bar:step({loss = 0.5})
    end
    assert.equal(1.0, bar:finish({["test acc"] = 0.75}))
    assert.same({"epoch 1/1  4/4 (100%)  took 1.0 s  4.0 it/s  loss 0.5000  test acc 0.7500"}, lines(out.text))
  end)

  it("set_postfix replaces the fields; names keep their first place; a list gives an order", function()
    local out = sink()
    local bar = progress.new(2, {out = out, tty = false})
    bar:set_postfix{["batch loss"] = 0.5, lr = 0.1}
    bar:update(1, {extra = 3})
    assert.equal("batch loss 0.5000  lr 0.1000  extra 3", bar:postfix_text())
    bar:set_postfix{lr = 0.05, ["epoch mean loss"] = 0.4}
    assert.equal("lr 0.0500  epoch mean loss 0.4000", bar:postfix_text())
    bar:set_postfix{{"test loss", 0.3}, {"test accuracy", 0.9}}
    assert.equal("test loss 0.3000  test accuracy 0.9000", bar:postfix_text())
    bar:set_postfix{lr = 1e-5, name = "adam"}
    assert.equal("lr 1e-05  name adam", bar:postfix_text())
    bar:set_postfix{lr = 5e-4, big = 1234567.0, steps = 3}
    assert.equal("lr 0.0005  big 1.23e+06  steps 3", bar:postfix_text())
  end)

  it("shows s/it when slower than one step a second, and ? before the first", function()
    assert.equal("? it/s", progress.format_rate(0, 0, "it"))
    assert.equal("2.50 s/batch", progress.format_rate(2, 5, "batch"))
    assert.equal("40.0 it/s", progress.format_rate(80, 2, "it"))
    assert.equal("01:15", progress.format_duration(75))
    assert.equal("1:02:05", progress.format_duration(3725))
    assert.equal("8.3 s", progress.format_total(8.26))
    assert.equal("02:21", progress.format_total(141))
  end)

  it("closes once and returns the seconds it ran; write puts a line above the bar", function()
    local out, clock = sink(), fake_clock()
    local bar = progress.new(nil, {desc = "w", out = out, tty = true, clock = clock.fn, interval = 0})
    bar:update()
    bar:write("a message")
    clock.now = clock.now + 3
    assert.equal(3.0, bar:close())
    assert.equal(3.0, bar:close())
    assert.truthy(out.text:find("\r\27[Ka message\n", 1, true), out.text)
    assert.equal(1, select(2, out.text:gsub("took", "")))
  end)

  it("cuts a redraw to the terminal's width, dropping the bar first", function()
    local out = sink()
    local bar = progress.new(100, {desc = "epoch 1/10", out = out, tty = true, columns = 60, interval = 0})
    bar:update(5, {["batch loss"] = 0.25})
    for _, f in ipairs(frames(out.text)) do assert.is_true(#f <= 59, f) end
    assert.falsy(frames(out.text)[1]:find("[", 1, true))
  end)

  it("refuses what it cannot show, with the option's name", function()
    h.fails(function() progress.new(-1) end, "progress: total must be a non-negative integer, got -1")
    h.fails(function() lt.progress(5, {totl = 3}) end, "progress: unknown option 'totl'")
    h.fails(function() lt.progress("abc") end, "progress: expected an iterator function, a table, a DataLoader or a count, got string")
    h.fails(function() progress.new(3):set_postfix(5) end, "progress: fields must be a table")
    h.fails(function() progress.new(3, {tty = false, out = sink()}).update() end, "expected a progress bar as self")
  end)
end)
