-- t:register_post_accumulate_grad_hook(fn), as PyTorch's: fn(t) runs once per
-- backward, after that backward's last gradient for the leaf t was added into
-- t.grad (DistributedDataParallel starts a bucket's all-reduce there). It
-- returns a handle whose remove() unregisters the hook.
--
-- The engine keeps only the hook's id (bindings/grad_hooks.c); the function
-- lives here, in a table with weak keys by tensor handle: the entry goes
-- when the tensor's handle does, even when fn refers to the tensor (an
-- ephemeron), so hooks never keep a model alive.
local core = require "lt.core"
local raise = require "lt.user_error"

local Tensor = core.Tensor
local is_tensor = core.is_tensor

local hooks_of = setmetatable({}, { __mode = "k" }) -- handle -> {id -> fn}
local fn_by_id = setmetatable({}, { __mode = "v" })
local tensor_by_id = setmetatable({}, { __mode = "v" })

core._grad_hook_dispatcher(function(id)
  local fn, t = fn_by_id[id], tensor_by_id[id]
  if fn ~= nil and t ~= nil then fn(t) end
end)

local RemovableHandle = {}
RemovableHandle.__index = RemovableHandle
RemovableHandle.__name = "lt.RemovableHandle"

--- handle:remove(): the hook runs no more (idempotent; also from inside a hook).
function RemovableHandle:remove()
  local t, id = self._tensor, self.id
  if t == nil then return end
  self._tensor = nil
  core._grad_hook_remove(t, id)
  local fns = hooks_of[t]
  if fns then fns[id] = nil end
  fn_by_id[id], tensor_by_id[id] = nil, nil
end

function RemovableHandle:__tostring()
  return ("hook handle %d (%s)"):format(self.id, self._tensor and "registered" or "removed")
end

local function callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

function Tensor.register_post_accumulate_grad_hook(t, fn)
  if not is_tensor(t) then
    raise("register_post_accumulate_grad_hook: call it as t:register_post_accumulate_grad_hook(fn)")
  end
  if not callable(fn) then
    raise("register_post_accumulate_grad_hook: expected a function, got " .. type(fn))
  end
  local id = core._grad_hook_add(t)
  local fns = hooks_of[t]
  if fns == nil then
    fns = {}
    hooks_of[t] = fns
  end
  fns[id], fn_by_id[id], tensor_by_id[id] = fn, fn, t
  return setmetatable({ id = id, _tensor = t }, RemovableHandle)
end

return { RemovableHandle = RemovableHandle }
