-- Methods that say what went wrong when called with a dot. m.forward(x)
-- (self is x) or opt.step() (self is nil) would otherwise fail inside lt's
-- files ("attempt to index a nil value (local 'self')"); a guarded method
-- checks its self first and raises at the caller's line:
--   Linear:forward: expected a module as self, got a tensor; call it with a colon: m:forward(...)
local core = require "lt.core"
local raise = require "lt.user_error"
local class = require "lt.class"
local wrapped = require("lt.user_where").wrapped

local methods = {}

local function describe(v)
  if core.is_tensor(v) then return "a tensor" end
  if v == nil then return "nothing" end
  return "a " .. type(v)
end

-- fn, checking first that its self satisfies is_instance. kind names what
-- self must be ("a module"), var the variable of the hint ("m").
function methods.wrap(class, method, kind, var, is_instance, fn)
  local prefix = string.format("%s:%s: expected %s as self, got ", class, method, kind)
  local hint = string.format("; call it with a colon: %s:%s(...)", var, method)
  local guarded = function(self, ...)
    if not is_instance(self) then raise(prefix .. describe(self) .. hint) end
    return fn(self, ...)
  end
  wrapped[guarded] = fn
  return guarded
end

-- Guards the methods cls holds now: every function but metamethods and the
-- names in except (functions of the class itself, such as constructors).
function methods.guard(cls, class, kind, var, is_instance, except)
  for name, fn in pairs(cls) do
    if type(fn) == "function" and not name:match("^__") and not (except and except[name]) then
      cls[name] = methods.wrap(class, name, kind, var, is_instance, fn)
    end
  end
end

-- A class metatable's __newindex that guards each method defined on the
-- class afterwards (function Linear:forward(x) ... end).
function methods.guarding_newindex(class, kind, var, is_instance)
  return function(cls, name, value)
    if type(value) == "function" and type(name) == "string" and not name:match("^__") then
      value = methods.wrap(class, name, kind, var, is_instance, value)
    end
    rawset(cls, name, value)
  end
end

-- Whether v is an instance of base: its metatable is base or a class that
-- reaches base through its metatables' __index (a class itself is not).
function methods.instance_of(base)
  return function(v) return class.instance_of(v, base) end
end

return methods
