-- Where an error belongs: "chunk:line: " of the first caller outside lt's Lua
-- library and outside C functions, however deep in the library the check ran
-- (constructor -> init -> option parsing, a module's forward -> F.linear ->
-- the C op). lt.user_error raises with it, and the C ops ask it too
-- (bindings/args.c), so errors from Lua and from C follow one rule.
--
-- One case needs more than the stack: a forward ending in `return self.fc(x)`
-- tail-calls, and Lua keeps no frame for a function that tail-called, so the
-- forward's line is gone by the time fc's check fails. Modules call forward
-- through one function (the module's __call, registered here) that stays on
-- the stack; finding it just above a tail-called frame means the forward it
-- called is the frame Lua dropped, and the forward's source says where its
-- `return` stands.
local M = {}

local LIBRARY_PREFIX = debug.getinfo(1, "S").source:match("^(@.*[/\\])[^/\\]*$")
local forward_caller -- the modules' __call (lt.nn.module registers it)

local function in_library(info)
  return info.what == "C" or (LIBRARY_PREFIX ~= nil and info.source:sub(1, #LIBRARY_PREFIX) == LIBRARY_PREFIX)
end

-- (The memory history's origins skip its frame too: bindings/memory.c.)
function M.set_forward_caller(fn)
  forward_caller = fn
  require("lt.core")._set_forward_caller(fn)
end

-- Methods lt.methods guards, to the user's function each wraps: the source
-- to read is the user's.
M.wrapped = setmetatable({}, { __mode = "k" })

local function source_lines(source)
  local text
  if source:sub(1, 1) == "@" then
    local file = io.open(source:sub(2), "r")
    if file == nil then return nil end
    text = file:read("a")
    file:close()
  elseif source:sub(1, 1) == "=" then
    return nil -- a chunk named by its loader: no text to read
  else
    text = source
  end
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  return lines
end

-- The line of the `return` statement by which fn tail-called; several
-- returns: the one that names the callee (a child module's field name), else
-- the last.
local function tail_call_line(fn, callee_name)
  local info = debug.getinfo(M.wrapped[fn] or fn, "SL")
  if info.what ~= "Lua" or in_library(info) then return nil end
  local lines = source_lines(info.source)
  if lines == nil then return nil end
  local last, named
  for l = info.linedefined, info.lastlinedefined do
    local text = lines[l]
    if info.activelines[l] and text and text:find("%f[%w_]return%f[^%w_]%s*[^%s;]") then
      last = l
      if callee_name and text:find("%f[%w_]" .. callee_name:gsub("%p", "%%%0") .. "%f[^%w_]") then named = l end
    end
  end
  local line = named or last
  return line and ("%s:%d: "):format(info.short_src, line)
end

local function child_name(parent, child)
  local modules = type(parent) == "table" and rawget(parent, "_modules")
  if type(modules) ~= "table" or type(modules.values) ~= "table" then return nil end
  for name, m in pairs(modules.values) do
    if m == child and type(name) == "string" then return name end
  end
  return nil
end

-- "chunk:line: " for the frame at `level` of the caller (1 = the caller of
-- where), or "" when every frame is lt's or C's.
function M.where(level)
  level = (level or 1) + 1
  local callee -- the module a tail-called __call frame was running, if any
  local after_tail = false
  while true do
    local info = debug.getinfo(level, "Sflt")
    if info == nil then return "" end
    if not in_library(info) and info.currentline > 0 then
      return ("%s:%d: "):format(info.short_src, info.currentline)
    end
    if after_tail and info.func == forward_caller then
      local _, self = debug.getlocal(level, 1)
      local ok, forward = pcall(function() return self.forward end)
      local line = ok and type(forward) == "function" and tail_call_line(forward, child_name(self, callee))
      if line then return line end
    end
    after_tail = info.istailcall
    callee = nil
    if after_tail and info.func == forward_caller then callee = select(2, debug.getlocal(level, 1)) end
    level = level + 1
  end
end

-- The C ops place their errors by this rule too.
if LIBRARY_PREFIX then require("lt.core")._set_error_where(M.where) end

return M
