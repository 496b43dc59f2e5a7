-- Progress reporting for training loops: a one-line bar with step rate, loss and
-- ETA redrawn in place on a terminal; plain lines (about every tenth of the way
-- and at the end) when the output is a file or a pipe, so logs stay readable.
--
--   local bar = progress.new(#loader, {label = "epoch 1/5"})
--   for ... do bar:step({loss = l}) end
--   bar:finish()

local core = require "lt.core"
local methods = require "lt.methods"

local progress = {}
local Bar = {}
Bar.__index = Bar

local function format_duration(seconds)
  seconds = math.max(0, math.floor(seconds + 0.5))
  local h, m, s = seconds // 3600, seconds % 3600 // 60, seconds % 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, s) end
  return string.format("%02d:%02d", m, s)
end
progress.format_duration = format_duration

-- Renders "name value" pairs in a stable order: loss first, then by name.
local function format_fields(fields)
  local names = {}
  for name in pairs(fields) do names[#names + 1] = name end
  table.sort(names, function(a, b)
    if a == "loss" or b == "loss" then return a == "loss" end
    return a < b
  end)
  local parts = {}
  for _, name in ipairs(names) do
    local v = fields[name]
    parts[#parts + 1] = math.type(v) == "float" and string.format("%s %.4f", name, v)
      or string.format("%s %s", name, tostring(v))
  end
  return table.concat(parts, "  ")
end

-- opts: label, out (a file, default io.stdout), tty (force terminal mode on or
-- off; default: whether out is a terminal), width (bar cells, default 24).
function progress.new(total, opts)
  opts = opts or {}
  local out = opts.out or io.stdout
  local tty = opts.tty
  if tty == nil then tty = out == io.stdout and core.stdout_is_tty() end
  return setmetatable({
    total = total, done = 0, label = opts.label or "", out = out, tty = tty,
    width = opts.width or 24, start = core.clock(), fields = {},
    next_plain = math.max(1, total // 10),
  }, Bar)
end

function Bar:line()
  local elapsed = core.clock() - self.start
  local rate = elapsed > 0 and self.done / elapsed or 0
  local eta = rate > 0 and (self.total - self.done) / rate or 0
  local frac = self.total > 0 and self.done / self.total or 1
  local fields = format_fields(self.fields)
  if self.tty then
    local filled = math.floor(frac * self.width + 0.5)
    local bar = string.rep("=", filled) .. string.rep(" ", self.width - filled)
    return string.format("%s %d/%d [%s] %3d%%  %.1f it/s  %s  ETA %s", self.label, self.done,
      self.total, bar, math.floor(frac * 100 + 0.5), rate, fields, format_duration(eta))
  end
  return string.format("%s step %d/%d  %.1f it/s  %s  elapsed %s", self.label, self.done,
    self.total, rate, fields, format_duration(elapsed))
end

-- Advances by n steps (default 1); fields (e.g. {loss = 0.41}) replace the shown values.
function Bar:step(fields, n)
  self.done = self.done + (n or 1)
  if fields then for k, v in pairs(fields) do self.fields[k] = v end end
  if self.tty then
    self.out:write("\r", self:line(), "\27[K")
    self.out:flush()
  elseif self.done >= self.next_plain and self.done < self.total then
    self.out:write(self:line(), "\n")
    self.next_plain = self.next_plain + math.max(1, self.total // 10)
  end
end

function Bar:finish(fields)
  if fields then for k, v in pairs(fields) do self.fields[k] = v end end
  if self.tty then self.out:write("\r", self:line(), "\27[K\n")
  else self.out:write(self:line(), "\n") end
  self.out:flush()
  return core.clock() - self.start
end

methods.guard(Bar, "progress bar", "a progress bar", "bar", function(v) return getmetatable(v) == Bar end)

return progress
