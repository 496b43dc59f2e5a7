-- Members of a table loaded on first use. lazy maps a key to a module name (the member is
-- the module) or to a function that makes the member. Every module loaded at start-up is
-- Lua heap that each full collection walks, and a peak collection costs in proportion to
-- it, so what a script may or may not use loads when it is used. lt.help and the REPL's
-- completion find the keys through this __index's upvalue named lazy
-- (lua/lt/help/walk.lua, host/completion.c).
return function(t, lazy)
  return setmetatable(t, {
    __index = function(self, key)
      local load = lazy[key]
      if load == nil then return nil end
      local member = type(load) == "string" and require(load) or load()
      rawset(self, key, member)
      return member
    end,
  })
end
