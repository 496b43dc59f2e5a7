-- Writes docs/API.md from lt.help's data (lua/lt/help/):
--   lt scripts/gen_api_doc.lua > docs/API.md
--   lt scripts/gen_api_doc.lua docs/API.md        (writes the file itself)
-- tests/lua/help_spec.lua fails when the committed docs/API.md is not what
-- this writes now: run it after changing a doc or adding a public name.
local lt = lt or require "lt"
local text = require("lt.help.markdown")()
local path = arg and arg[1]
if path then
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
else
  io.write(text)
end
