-- Containers: nn.Sequential(m1, m2, ...) chains its children; nn.ModuleList({...})
-- holds modules for a custom forward. Both index from 1 (seq[1]), have a
-- length (#seq), append, and iterate with ipairs; their children are named
-- from 0 as in PyTorch ("0", "1", ...), so seq[1]'s weight is "0.weight" in
-- state_dict and files: checkpoints interchange with PyTorch as they are.
local Module = require "lt.nn.module"
local raise = require "lt.user_error"

local is_module = Module.is_module
local keeps_no_handles = Module.keeps_no_handles
local is_tensor = require("lt.core").is_tensor

-- Modules given as varargs or as one list table.
local function module_list(name, ...)
  local n = select("#", ...)
  local list = { ... }
  if n == 1 and type(list[1]) == "table" and not is_module(list[1]) then
    list = list[1]
    n = #list
  end
  for i = 1, n do
    if not is_module(list[i]) then
      raise(string.format("%s: argument %d is not a module (got %s)", name, i, type(list[i])))
    end
  end
  return list, n
end

local function count(self)
  local n = 0
  for _, name in ipairs(self._modules.names) do
    if self._modules.values[name] ~= nil then n = n + 1 end
  end
  return n
end

-- The next child's name: one past the largest number in use, so that a
-- child removed earlier (s[2] = nil) does not make the new one replace the
-- last (PyTorch keeps every child too). Names count from 0: an empty
-- container's first child is "0".
local function next_name(self)
  local largest = -1
  for _, name in ipairs(self._modules.names) do
    local i = math.tointeger(tonumber(name))
    if i and i > largest and self._modules.values[name] ~= nil then largest = i end
  end
  return tostring(largest + 1)
end

local function append(self, m)
  if not is_module(m) then
    raise(string.format("append: expected a module, got %s", type(m)))
  end
  self:add_module(next_name(self), m)
  return self
end

local Sequential = Module:extend("Sequential")
-- seq[k] is the child named k-1 (see key_name in module.lua).
Sequential._children_from_zero = true

function Sequential:init(...)
  local list, n = module_list("Sequential", ...)
  for i = 1, n do self:add_module(tostring(i - 1), list[i]) end
end

-- An intermediate result that a layer keeping no handles made here is
-- released as soon as the next such layer has used it: nobody else can hold
-- it, so its bytes go back at once, as reference counting would give them
-- back, instead of waiting for the collector (autograd keeps what it saved).
-- The caller's input, and anything a custom module made or took, is left
-- alone. An in-place layer returns its input: it stays this loop's own.
function Sequential:forward(x)
  local slots = self._modules
  local own = false -- x was made in this loop by a layer keeping no handles
  for _, name in ipairs(slots.names) do
    local m = slots.values[name]
    if m ~= nil then
      local y = m(x)
      local same, trusted = rawequal(x, y), keeps_no_handles(m)
      if own and trusted and not same then x:free() end
      own = trusted and is_tensor(y) and (own or not same)
      x = y
    end
  end
  return x
end

Sequential.length = count
Sequential.append = append

local ModuleList = Module:extend("ModuleList")
ModuleList._children_from_zero = true

function ModuleList:init(...)
  local list, n = module_list("ModuleList", ...)
  for i = 1, n do self:add_module(tostring(i - 1), list[i]) end
end

function ModuleList:forward()
  raise("ModuleList: a ModuleList has no forward; call its modules from your own")
end

ModuleList.length = count
ModuleList.append = append

return { Sequential = Sequential, ModuleList = ModuleList }
