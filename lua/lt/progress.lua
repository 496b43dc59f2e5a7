-- lt.progress: progress bars for loops, as Python's tqdm. Wrap what a for
-- loop walks and the loop draws a bar:
--
--   for x, y in lt.progress(loader, {desc = "epoch 1"}) do ... end        -- a DataLoader
--   for x, y in lt.progress(loader:iter(), {total = #loader}) do ... end  -- any iterator function
--   for i, v in lt.progress(list) do ... end                              -- a table, as ipairs
--   for i in lt.progress(1000) do ... end                                 -- 1 .. 1000
--
-- or drive one by hand:
--
--   local bar = lt.progress.new(#loader, {desc = "eval", unit = "batch"})
--   for ... do bar:update(); bar:set_postfix{["batch loss"] = l} end
--   bar:close()
--
-- On a terminal the line is redrawn in place (at most every `interval`
-- seconds) and shows, each with its name: the percentage, a bar, done/total,
-- elapsed time, ETA, the rate (it/s, or s/it when slower than one a second)
-- and the postfix fields. Into a file or a pipe it prints a plain line every
-- `log_every` seconds instead, so logs stay readable. Closing the bar (the
-- loop's end, a break or an error inside a wrapping loop, bar:close()) prints
-- a final line with the total time ("took 11.2 s").

local core = require "lt.core"
local methods = require "lt.methods"
local raise = require "lt.user_error"

local progress = {}
local Bar = {}
Bar.__index = Bar

local OPTIONS = {
  total = true, desc = true, label = true, unit = true, out = true, tty = true, width = true,
  columns = true, interval = true, log_every = true, clock = true, postfix = true,
}

-- 75 s -> "01:15", 3725 s -> "1:02:05"; whole seconds, cut as a clock's.
local function format_duration(seconds)
  seconds = math.max(0, math.floor(seconds))
  local h, m, s = seconds // 3600, seconds % 3600 // 60, seconds % 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, s) end
  return string.format("%02d:%02d", m, s)
end
progress.format_duration = format_duration

-- The total time of a closed bar: tenths of a second under a minute (an
-- evaluation takes seconds), clock form above.
local function format_total(seconds)
  if seconds < 60 then return string.format("%.1f s", seconds) end
  return format_duration(seconds)
end
progress.format_total = format_total

-- "41.2 it/s", or "2.31 s/it" below one per second (tqdm's rule): a slow
-- loop reads better as seconds per step than as 0.4 it/s.
local function format_rate(done, elapsed, unit)
  if done == 0 or elapsed <= 0 then return "? " .. unit .. "/s" end
  local rate = done / elapsed
  if rate >= 1 then return string.format("%.1f %s/s", rate, unit) end
  return string.format("%.2f s/%s", 1 / rate, unit)
end
progress.format_rate = format_rate

-- Numbers in fields: four decimals for the usual magnitudes (a loss, an
-- accuracy), three significant digits for tiny or huge ones (a learning
-- rate of 1e-5 would show as 0.0000; it shows as 1e-05, 5e-4 as 0.0005).
local function format_value(v)
  if math.type(v) == "float" then
    local a = math.abs(v)
    if v ~= v or a == math.huge then return tostring(v) end
    if a ~= 0 and (a < 1e-3 or a >= 1e6) then return string.format("%.3g", v) end
    return string.format("%.4f", v)
  end
  return tostring(v)
end
progress.format_value = format_value

-- The terminal's width in columns: $COLUMNS when the shell exports it, else
-- what `stty size` says of the controlling terminal (asked again after a few
-- seconds, so that a resized window is seen by the next bar); nil when
-- unknown.
local asked_at, asked_columns = -math.huge, nil
local function terminal_columns()
  local env = tonumber(os.getenv("COLUMNS") or "")
  if env and env > 0 then return math.tointeger(env) end
  local now = core.clock()
  if now - asked_at < 5 then return asked_columns end
  asked_at, asked_columns = now, nil
  local pipe = io.popen("stty size 2>/dev/null </dev/tty")
  if not pipe then return nil end
  local text = pipe:read("a") or ""
  pipe:close()
  local cols = tonumber(text:match("^%s*%d+%s+(%d+)"))
  asked_columns = cols and cols > 0 and math.tointeger(cols) or nil
  return asked_columns
end

local function check_options(opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then raise("progress: expected an options table, got " .. type(opts)) end
  for k in pairs(opts) do
    if not OPTIONS[k] then require("lt.nn.options").unknown("progress", k, OPTIONS) end
  end
  if opts.total ~= nil and (math.type(opts.total) ~= "integer" or opts.total < 0) then
    raise("progress: total must be a non-negative integer, got " .. tostring(opts.total))
  end
  for _, name in ipairs { "desc", "label", "unit" } do
    if opts[name] ~= nil and type(opts[name]) ~= "string" then
      raise(("progress: %s must be a string, got %s"):format(name, type(opts[name])))
    end
  end
  for _, name in ipairs { "interval", "log_every" } do
    if opts[name] ~= nil and (type(opts[name]) ~= "number" or opts[name] < 0) then
      raise(("progress: %s must be a non-negative number of seconds, got %s"):format(name, tostring(opts[name])))
    end
  end
  return opts
end

--- progress.new(total, opts): a bar for `total` steps (nil: unknown, then
--- no percentage or ETA). opts: desc (the label in front; `label` is the
--- same), unit ("it"), postfix (initial fields), out (a file, default
--- io.stdout), tty (redraw in place; default: whether out is a terminal),
--- width (bar cells; default 20, fewer when a line would not fit the
--- terminal), columns (the terminal's width; default $COLUMNS, else
--- stty's), interval (least seconds between two redraws, 0.1), log_every
--- (seconds between two plain lines when not a terminal, 10), clock (a
--- function giving seconds; lt.clock).
function progress.new(total, opts)
  if type(total) == "table" and opts == nil then total, opts = total.total, total end
  opts = check_options(opts)
  if total ~= nil and (math.type(total) ~= "integer" or total < 0) then
    raise("progress: total must be a non-negative integer, got " .. tostring(total))
  end
  local out = opts.out or io.stdout
  local tty = opts.tty
  if tty == nil then tty = out == io.stdout and core.stdout_is_tty() end
  local clock = opts.clock or core.clock
  local now = clock()
  local bar = setmetatable({
    total = total, n = 0, desc = opts.desc or opts.label or "", unit = opts.unit or "it", out = out,
    tty = tty, width = opts.width, columns = opts.columns or (tty and out == io.stdout and terminal_columns()) or nil,
    interval = opts.interval or 0.1, log_every = opts.log_every or 10, clock = clock,
    start = now, last_draw = -math.huge, last_line = now, fields = {}, order = {}, known = {}, closed = false,
  }, Bar)
  if opts.postfix then bar:set_postfix(opts.postfix) end
  return bar
end

-- ---- wrapping a loop ----

-- An iterator over what progress() was given, and the total it implies.
local function source(what, opts)
  local kind = type(what)
  if kind == "function" then return what, opts.total end
  if math.type(what) == "integer" then
    local i = 0
    return function()
      if i >= what then return nil end
      i = i + 1
      return i
    end, opts.total or math.max(what, 0)
  end
  local mt = getmetatable(what)
  -- A DataLoader (or anything with :iter() and a length): its next epoch.
  if kind == "table" and mt and type(what.iter) == "function" then
    local ok, n = pcall(function() return #what end)
    return what:iter(), opts.total or (ok and math.tointeger(n) or nil)
  end
  if kind == "table" then
    local i, n = 0, #what
    return function()
      if i >= n then return nil end
      i = i + 1
      return i, what[i]
    end, opts.total or n
  end
  raise("progress: expected an iterator function, a table, a DataLoader or a count, got " .. kind)
end

--- lt.progress(what, opts): a bar that is also the iterator of a generic
--- for: `for x, y in lt.progress(loader:iter(), {total = #loader}) do`.
--- It yields what the wrapped iterator yields (a table: index and value, as
--- ipairs; a count n: 1..n), counts a step per item and closes itself when
--- the iterator ends. The for loop also closes it on a break or an error
--- (it is the loop's to-be-closed value). Keep it in a local to call
--- bar:set_postfix inside the loop: `local bar = lt.progress(...)` then
--- `for x in bar do`; a loop left by break must then call bar:close().
function progress.wrap(what, opts)
  opts = check_options(opts)
  local iter, total = source(what, opts)
  local bar = progress.new(total, opts)
  bar.iter = iter
  return bar, nil, nil, bar
end

-- Called by the generic for: the next item, counting the one before.
function Bar:__call()
  local iter = rawget(self, "iter")
  if not iter then raise("progress: this bar wraps no iterator (made by progress.new); call bar:update()") end
  if self.closed then return nil end
  -- The previous item's body has run by now: count it, so that the rate
  -- and the ETA measure whole steps.
  if self.started then self:update(1) end
  self.started = true
  local results = table.pack(iter())
  if results[1] == nil then
    self:close()
    return nil
  end
  return table.unpack(results, 1, results.n)
end

-- The for loop's to-be-closed value: a break or an error ends the bar (the
-- item the loop broke in is not counted, as in tqdm). On an error the bar
-- is left as it is and its line ended, so that the error message starts on
-- a line of its own.
function Bar:__close(err)
  if self.closed then return end
  if err ~= nil then
    self.closed = true
    if self.tty then self.out:write("\n") end
    self.out:flush()
    return
  end
  self:close()
end

-- ---- the line ----

-- The postfix as "name value" pairs, in the order names were first set.
function Bar:postfix_text()
  local parts = {}
  for _, name in ipairs(self.order) do
    local v = self.fields[name]
    if v ~= nil then parts[#parts + 1] = name .. " " .. format_value(v) end
  end
  return table.concat(parts, "  ")
end

local function join(parts)
  local kept = {}
  for _, p in ipairs(parts) do
    if p ~= "" then kept[#kept + 1] = p end
  end
  return table.concat(kept, "  ")
end

-- The text of the bar now. final: the closing line (total time, no ETA).
function Bar:line(final)
  local elapsed = self.clock() - self.start
  local n, total = self.n, self.total
  local rate = format_rate(n, elapsed, self.unit)
  local time
  if final then
    time = "took " .. format_total(elapsed)
  else
    time = "elapsed " .. format_duration(elapsed)
    if total then
      local eta = n > 0 and (total - n) * elapsed / n or nil
      time = time .. "  ETA " .. (eta and format_duration(eta) or "--:--")
    end
  end
  local postfix = self:postfix_text()
  if not total then
    return join { self.desc, ("%d %s"):format(n, self.unit), time, rate, postfix }
  end
  local frac = total > 0 and math.min(n / total, 1) or 1
  local percent = ("%3d%%"):format(math.floor(frac * 100))
  -- Padded to the total's width, so that the line does not shift as n grows.
  local count = ("%" .. #tostring(total) .. "d/%d"):format(n, total)
  if not self.tty then
    return join { self.desc, ("%s (%s)"):format(count, percent:match("%S+")), time, rate, postfix }
  end
  -- The same bar width on every line (20 cells), unless the line would not
  -- fit the terminal: then the bar gives up cells (down to 10, then all of
  -- them), since a wrapped line cannot be redrawn in place.
  local rest = join { self.desc, percent, count, time, rate, postfix }
  local cells = self.width or 20
  if not self.width and self.columns and #rest + 4 + cells > self.columns - 1 then
    cells = self.columns - 1 - #rest - 4
    if cells < 10 then cells = 0 end
  end
  local text
  if cells > 0 then
    local filled = math.floor(frac * cells)
    local arrow = (filled < cells and n > 0) and ">" or ""
    local bar = string.rep("=", filled) .. arrow .. string.rep(" ", cells - filled - #arrow)
    text = join { self.desc, percent .. " [" .. bar .. "]", count, time, rate, postfix }
  else
    text = rest
  end
  -- A redraw longer than the terminal is cut rather than wrapped; the
  -- final line may wrap, nothing redraws it.
  if not final and self.columns and #text > self.columns - 1 then text = text:sub(1, self.columns - 1) end
  return text
end

-- Redraws on a terminal when `interval` has passed (or force); prints a
-- plain line otherwise when `log_every` has.
function Bar:refresh(force)
  if self.closed then return end
  local now = self.clock()
  if self.tty then
    if force or now - self.last_draw >= self.interval then
      self.last_draw = now
      self.out:write("\r", self:line(false), "\27[K")
      self.out:flush()
    end
  elseif force or (now - self.last_line >= self.log_every and not (self.total and self.n >= self.total)) then
    -- (A finished count's line would only repeat the final one, due next.)
    self.last_line = now
    self.out:write(self:line(false), "\n")
    self.out:flush()
  end
end

-- Sets fields: {name = value, ...}, or {{name, value}, ...} for an order of
-- one's own. Names keep the place they first had; new names of one call
-- come in the list's order, then the others sorted.
local function merge(self, fields)
  local listed, named = {}, {}
  for key, v in pairs(fields) do
    if math.type(key) == "integer" then
      if type(v) ~= "table" or type(v[1]) ~= "string" then
        raise("progress: a listed field must be {name, value}, got " .. type(v))
      end
    elseif type(key) ~= "string" then
      raise("progress: field names must be strings, got " .. type(key))
    else
      named[#named + 1] = key
    end
  end
  table.sort(named)
  for i = 1, #fields do listed[i] = fields[i][1] end
  local function set(name, v)
    if not self.known[name] then
      self.known[name] = true
      self.order[#self.order + 1] = name
    end
    self.fields[name] = v
  end
  for i, name in ipairs(listed) do set(name, fields[i][2]) end
  for _, name in ipairs(named) do set(name, fields[name]) end
end

local function check_fields(fields)
  if fields ~= nil and type(fields) ~= "table" then
    raise("progress: fields must be a table of name = value, got " .. type(fields))
  end
end

--- bar:update(n, fields): n more steps done (default 1); fields, when
--- given, are merged into the shown ones.
function Bar:update(n, fields)
  if type(n) == "table" and fields == nil then n, fields = nil, n end
  n = n or 1
  if type(n) ~= "number" then raise("progress: update expects a number of steps, got " .. type(n)) end
  check_fields(fields)
  if self.closed then return self end
  self.n = self.n + n
  if fields then merge(self, fields) end
  self:refresh(false)
  return self
end

--- bar:step(fields, n): the same, fields first (the older spelling).
function Bar:step(fields, n)
  return self:update(n or 1, fields)
end

--- bar:set_postfix(fields): the fields shown after the rate, replacing the
--- ones shown before (tqdm's set_postfix), e.g. {["batch loss"] = 0.69}, or
--- {{"test loss", 0.41}, {"test accuracy", 0.85}} in that order. Names keep
--- the place they first had; new names of one call not in a list are sorted.
function Bar:set_postfix(fields)
  check_fields(fields)
  self.fields = {}
  merge(self, fields or {})
  return self
end

--- bar:set_description(desc): the label in front.
function Bar:set_description(desc)
  if type(desc) ~= "string" then raise("progress: description must be a string, got " .. type(desc)) end
  self.desc = desc
  return self
end

--- bar:write(text): a line above the bar (tqdm.write), the bar redrawn
--- under it on a terminal.
function Bar:write(text)
  if self.tty and not self.closed then self.out:write("\r\27[K") end
  self.out:write(tostring(text), "\n")
  if self.tty and not self.closed then self.out:write(self:line(false), "\27[K") end
  self.out:flush()
end

--- bar:close(fields): prints the final line (fields merged first) with the
--- total time; returns the seconds the bar ran. Closing twice does nothing.
function Bar:close(fields)
  check_fields(fields)
  if self.closed then return self.elapsed end
  if fields then merge(self, fields) end
  self.elapsed = self.clock() - self.start
  if self.tty then self.out:write("\r", self:line(true), "\27[K\n")
  else self.out:write(self:line(true), "\n") end
  self.out:flush()
  self.closed = true
  return self.elapsed
end

--- bar:finish(fields): bar:close (the older spelling).
function Bar:finish(fields) return self:close(fields) end

--- The seconds since the bar started (or that it ran, once closed).
function Bar:elapsed_time()
  if self.closed then return self.elapsed end
  return self.clock() - self.start
end

methods.guard(Bar, "progress bar", "a progress bar", "bar", function(v) return getmetatable(v) == Bar end)

-- lt.progress(...) wraps; lt.progress.new(...) makes a bar by hand.
return setmetatable(progress, {
  __call = function(_, what, opts) return progress.wrap(what, opts) end,
})
