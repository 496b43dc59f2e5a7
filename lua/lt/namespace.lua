-- lt's namespaces (lt, lt.nn, lt.nn.functional, lt.optim, lt.memory): members loaded on
-- first use, and a name that is no member an error naming the closest one, as PyTorch's
-- AttributeError and lt's tensors do (lt.nn.Lineer(3, 4) would otherwise stop at Lua's
-- "attempt to call a nil value (field 'Lineer')"). rawget(ns, key) reads without either.
--
-- lazy maps a key to a module name (the member is the module) or to a function that makes
-- the member. Every module loaded at start-up is Lua heap that each full collection walks,
-- and a peak collection costs in proportion to it, so what a script may not use loads when
-- it is used. lt.help and the REPL's completion find these keys through this __index's
-- upvalue named lazy (lua/lt/help/walk.lua, host/completion.c). optional: keys that a
-- namespace may lack, read as nil (lt.default_device, set by `lt --device`).
local core = require "lt.core"
local raise = require "lt.user_error"

return function(ns, name, lazy, optional)
  lazy, optional = lazy or {}, optional or {}
  return setmetatable(ns, {
    __index = function(self, key)
      local load = lazy[key]
      if load ~= nil then
        local member = type(load) == "string" and require(load) or load()
        rawset(self, key, member)
        return member
      end
      if optional[key] or type(key) ~= "string" then return nil end
      local names = {}
      for k in pairs(self) do if type(k) == "string" then names[#names + 1] = k end end
      for k in pairs(lazy) do names[#names + 1] = k end
      local near = core._closest(key, names)
      raise(("%s has no member '%s'%s"):format(name, key,
        near and (" (did you mean %s.%s?)"):format(name, near) or (" (lt.help(%s) lists them)"):format(name)))
    end,
  })
end
