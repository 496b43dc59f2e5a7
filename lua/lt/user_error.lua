-- Raises an error at the script's own line: the position is the first caller
-- outside lt's Lua library and outside C functions (lt.user_where's rule, the
-- one the C ops follow too).
local where = require("lt.user_where").where

return function(message)
  return error(where(2) .. message, 0)
end
