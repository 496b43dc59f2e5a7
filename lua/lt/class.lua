-- lt's one class system, which modules, optimizers, learning-rate schedulers
-- and autograd functions all derive through.
--
-- A class is a table of methods whose metatable's __index is its base class,
-- so methods are found up the chain (Linear -> Module). Calling the class
-- constructs (its hooks.call). Instances take the class itself as their
-- metatable (cls.__index = cls), except where a class gives its instances a
-- metatable of its own (modules, whose parameters live in slots: hooks.own_instances).
--
--   local Optimizer = {}
--   local SGD = class.extend(Optimizer, "SGD", { call = function(cls, ...) return cls.new(cls, ...) end })
local class = {}

-- A subclass of base named name. hooks: call(cls, ...) constructs; tostring(cls)
-- prints the class; newindex(cls, k, v) sees every definition made on it later
-- (function Linear:forward ... end); own_instances: instances do not use the
-- class as their metatable.
function class.extend(base, name, hooks)
  hooks = hooks or {}
  local cls = setmetatable({}, {
    __index = base,
    __name = name,
    __call = hooks.call,
    __tostring = hooks.tostring,
    __newindex = hooks.newindex,
  })
  if not hooks.own_instances then rawset(cls, "__index", cls) end
  return cls
end

-- Whether cls is base or derives from it.
function class.derives(cls, base)
  for _ = 1, 64 do -- a class chain is short; a metatable may be its own __index
    if type(cls) ~= "table" then return false end
    if cls == base then return true end
    local mt = getmetatable(cls)
    cls = mt and rawget(mt, "__index")
  end
  return false
end

-- Whether v is an instance of base: its metatable is base or a class that
-- derives from base (a class itself is not an instance).
function class.instance_of(v, base)
  return type(v) == "table" and class.derives(getmetatable(v), base)
end

return class
