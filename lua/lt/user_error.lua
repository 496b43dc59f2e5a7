-- Raises an error at the script's own line: the position given is the first
-- caller outside lt's Lua library (and outside C functions), however deep in
-- the library the check ran (constructor -> init -> option parsing, ...).
local LIBRARY_PREFIX = debug.getinfo(1, "S").source:match("^(@.*[/\\])[^/\\]*$")
-- The C ops place their errors by the same rule (bindings/args.c).
if LIBRARY_PREFIX then require("lt.core")._set_library_prefix(LIBRARY_PREFIX) end

local function in_library(info)
  return info.what == "C" or (LIBRARY_PREFIX ~= nil and info.source:sub(1, #LIBRARY_PREFIX) == LIBRARY_PREFIX)
end

return function(message)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if info == nil then return error(message, 0) end
    if not in_library(info) then return error(message, level) end
    level = level + 1
  end
end
