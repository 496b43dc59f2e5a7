-- Readable tables, for the REPL's results and lt.pp (print with tables shown):
--   {3, 4}                                   a list of numbers (a shape) on one line
--   {lr = 0.1, momentum = 0.9}               keys after the list part, sorted
--   {<float32 tensor {256, 784}, requires_grad>, <Linear(in_features=784, ...)>}
--   {a = {b = {c = {...}}}}                  nested tables to a depth (3 by default)
--   {self = <cycle>}                         a table inside itself
-- A value with its own __tostring (a tensor, a module, an optimizer) prints as
-- it says; inside a table a tensor or a module is one summary line. Output longer than
-- a line puts one entry per line, indented.
local raise = require "lt.user_error"
local core = require "lt.core"

local pp = {}

local WIDTH = 80      -- a table wider than this goes one entry per line
local MAX_ITEMS = 50  -- entries shown before "... N more"
local DEFAULT_DEPTH = 3

local KEYWORDS = {}
for word in ([[and break do else elseif end false for function goto if in local nil not or
  repeat return then true until while]]):gmatch("%a+") do KEYWORDS[word] = true end

local function is_identifier(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil and not KEYWORDS[s]
end

local function tensor_summary(t)
  local shape = {}
  for d = 1, t:dim() do shape[d] = tostring(t:size(d)) end
  local extra = t.requires_grad and ", requires_grad" or ""
  local device = tostring(t.device)
  if device ~= "cpu" then extra = extra .. ", " .. device end
  return string.format("<%s tensor {%s}%s>", t.dtype, table.concat(shape, ", "), extra)
end

-- A value's own text on one line: a module's lines joined, cut at SUMMARY characters.
local SUMMARY = 60
local function one_line(s)
  s = s:gsub("%s*\n%s*", " ")
  return #s > SUMMARY and s:sub(1, SUMMARY - 3) .. "..." or s
end

local function has_tostring(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__tostring ~= nil
end

-- Sorted keys past the list part: strings first (alphabetically), then the rest by
-- their text.
local function other_keys(t, n)
  local keys = {}
  for k in pairs(t) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b)
    local sa, sb = type(a) == "string", type(b) == "string"
    if sa ~= sb then return sa end
    return tostring(a) < tostring(b)
  end)
  return keys
end

local format_value

local function format_key(k)
  if is_identifier(k) then return k end
  if type(k) == "string" then return string.format("[%q]", k) end
  return "[" .. tostring(k) .. "]"
end

local function format_table(t, depth, path, indent)
  if path[t] then return "<cycle>" end
  if depth <= 0 then return next(t) == nil and "{}" or "{...}" end
  path[t] = true
  local n = #t
  local items, shown = {}, 0
  local function add(text)
    shown = shown + 1
    if shown <= MAX_ITEMS then items[#items + 1] = text end
  end
  for i = 1, n do add(format_value(t[i], depth - 1, path, indent .. "  ")) end
  for _, k in ipairs(other_keys(t, n)) do
    add(format_key(k) .. " = " .. format_value(t[k], depth - 1, path, indent .. "  "))
  end
  path[t] = nil
  if shown > MAX_ITEMS then items[#items + 1] = string.format("... %d more", shown - MAX_ITEMS) end
  if #items == 0 then return "{}" end
  local flat = "{" .. table.concat(items, ", ") .. "}"
  if #flat + #indent <= WIDTH and not flat:find("\n") then return flat end
  local inner = indent .. "  "
  return "{\n" .. inner .. table.concat(items, ",\n" .. inner) .. "\n" .. indent .. "}"
end

function format_value(v, depth, path, indent)
  local kind = type(v)
  if kind == "string" then return string.format("%q", v) end
  if core.is_tensor(v) then return tensor_summary(v) end
  if has_tostring(v) then return "<" .. one_line(tostring(v)) .. ">" end
  if kind == "table" then return format_table(v, depth, path, indent) end
  if kind == "function" then return "<function>" end
  if kind == "userdata" or kind == "thread" then return "<" .. kind .. ">" end
  return tostring(v)
end

-- The text of v: its own __tostring's when it has one (a tensor prints whole),
-- otherwise a table as above. opts.depth: how deep nested tables are shown.
function pp.format(v, opts)
  if type(v) ~= "table" or has_tostring(v) then return tostring(v) end
  local depth = opts and opts.depth or DEFAULT_DEPTH
  if math.type(depth) ~= "integer" or depth < 1 then
    raise(string.format("lt.pp: depth must be a positive integer, got %s", tostring(depth)))
  end
  return format_table(v, depth, {}, "")
end

-- lt.pp(...): print, with tables shown readably.
function pp.print(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do parts[i] = pp.format((select(i, ...))) end
  io.write(table.concat(parts, "\t"), "\n")
end

return setmetatable(pp, { __call = function(_, ...) return pp.print(...) end })
