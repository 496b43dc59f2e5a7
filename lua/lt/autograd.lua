-- lt.autograd: custom differentiable functions written in Lua
-- (lt.autograd.Function, as torch.autograd.Function) and a finite-difference
-- gradient checker (lt.autograd.gradcheck).
--
--   local Square = lt.autograd.Function:extend("Square")
--   function Square.forward(ctx, x) ctx:save_for_backward(x) return x * x end
--   function Square.backward(ctx, g) local x = ctx:saved_tensors() return 2 * x * g end
--   local y = Square.apply(x)
local raise = require "lt.user_error"
local class = require "lt.class"
local core = require "lt.core"

local is_tensor = core.is_tensor
local pack, unpack = table.pack, table.unpack

local autograd = {}

-- ---- the ctx handed to forward and backward ----

local Context = {}
Context.__index = Context
Context.__name = "lt.autograd.Context"

-- Keeps tensors for backward. The engine holds them (not ctx), so the
-- forward's outputs may be saved without keeping the graph alive, and an
-- in-place write to one of them makes backward fail.
function Context:save_for_backward(...)
  local list = pack(...)
  for i = 1, list.n do
    if not is_tensor(list[i]) then
      raise(string.format("save_for_backward: argument %d is not a tensor (%s)", i, type(list[i])))
    end
  end
  list.n = nil
  rawset(self, "_to_save", list)
end

-- The saved tensors, in the order they were saved; inside backward only.
function Context:saved_tensors()
  local saved = rawget(self, "_saved")
  if not saved then
    raise("saved_tensors: saved tensors can only be read inside backward (they are freed after it)")
  end
  return unpack(saved)
end

-- ---- Function ----

local Function = { __name = "Function" }
Function.__index = Function

-- The closure the engine calls at backward: cls.backward's results (one per
-- argument of forward) cut down to the tensor arguments, in order.
local function backward_runner(cls, ctx, tensor_positions)
  return function(saved, ...)
    ctx._saved = saved
    local grads = pack(cls.backward(ctx, ...))
    ctx._saved = nil
    local out = {}
    for k, position in ipairs(tensor_positions) do out[k] = grads[position] end
    return unpack(out, 1, #tensor_positions)
  end
end

local function apply(cls, ...)
  local name = cls.__name
  if type(cls.forward) ~= "function" then raise(name .. ": forward is not defined") end
  if type(cls.backward) ~= "function" then raise(name .. ": backward is not defined") end
  local args = pack(...)
  local grad_on = core.is_grad_enabled()
  local ctx = setmetatable({ needs_input_grad = {} }, Context)
  local inputs, positions = {}, {}
  for i = 1, args.n do
    local a = args[i]
    local tensor = is_tensor(a)
    if tensor then
      inputs[#inputs + 1] = a
      positions[#positions + 1] = i
    end
    ctx.needs_input_grad[i] = tensor and grad_on and a.requires_grad or false
  end
  -- The forward's own ops are not recorded: the node below stands for them.
  local results = pack(core.no_grad(cls.forward, ctx, ...))
  local outputs = {}
  for i = 1, results.n do
    if is_tensor(results[i]) then outputs[#outputs + 1] = results[i] end
  end
  local saved = rawget(ctx, "_to_save") or {}
  ctx._to_save = nil
  if #outputs > 0 then
    core._autograd_function(name, outputs, inputs, saved, backward_runner(cls, ctx, positions))
  end
  return unpack(results, 1, results.n)
end

-- A new function class: set its forward(ctx, ...) and backward(ctx, grad, ...)
-- and call Class.apply(...).
function Function:extend(name)
  if type(name) ~= "string" then
    raise("Function:extend: expected a class name, got " .. type(name))
  end
  local cls = class.extend(self, name)
  cls.__name = name
  cls.apply = function(...) return apply(cls, ...) end
  return cls
end

autograd.Function = Function

-- ---- gradcheck ----

-- A fixed projection of an output (no random numbers: fn may draw its own):
-- the check covers the whole vector-Jacobian product, not just column sums.
local function projection(y)
  local n = y:numel()
  local values = {}
  for i = 1, n do values[i] = math.sin(1.7 * i + 0.3) end
  -- On y's device: a CUDA output times a CPU projection is a device mismatch.
  local w = core.tensor(values, { dtype = "float64", device = y.device })
  return y:dim() == 0 and w:view() or w:view(y.shape)
end

-- sum over outputs of sum(output * projection), as a float64 0-dim tensor.
local function scalar_of(outputs)
  local total
  for i = 1, outputs.n do
    local y = outputs[i]
    if is_tensor(y) and (y.dtype == "float64" or y.dtype == "float32") then
      local term = (y:double() * projection(y)):sum()
      total = total and total + term or term
    end
  end
  if not total then raise("gradcheck: the function returned no floating point tensor") end
  return total
end

local function element(t, i) return t:view(-1)[i] end

-- Checks the gradients backward gives fn at inputs (a list; tensors that
-- require grad are checked, as float64 copies) against central finite
-- differences. Returns true, or raises an error naming the input, the
-- element and both values. opts: {eps=1e-6, atol=1e-5, rtol=1e-3}.
function autograd.gradcheck(fn, inputs, opts)
  opts = opts or {}
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  local args = {}
  local n = #inputs
  if inputs.n then n = inputs.n end
  for i = 1, n do
    local a = inputs[i]
    if is_tensor(a) and a.requires_grad then
      a = a:detach():double():contiguous():clone()
      a:requires_grad_(true)
    end
    args[i] = a
  end
  local loss = core.enable_grad(function() return scalar_of(pack(fn(unpack(args, 1, n)))) end)
  loss:backward()
  local function value()
    return core.no_grad(function() return scalar_of(pack(fn(unpack(args, 1, n)))):item() end)
  end
  for k = 1, n do
    local x = args[k]
    if is_tensor(x) and x.requires_grad then
      local grad = x.grad
      for i = 1, x:numel() do
        local original = element(x, i):item()
        core.no_grad(function() element(x, i):fill_(original + eps) end)
        local up = value()
        core.no_grad(function() element(x, i):fill_(original - eps) end)
        local down = value()
        core.no_grad(function() element(x, i):fill_(original) end)
        local numeric = (up - down) / (2 * eps)
        local analytic = grad and element(grad, i):item() or 0.0
        if not (math.abs(numeric - analytic) <= atol + rtol * math.abs(numeric)) then
          error(string.format(
            "gradcheck: gradient of input %d, element %d: backward gives %.10g, finite differences %.10g",
            k, i, analytic, numeric), 2)
        end
      end
    end
  end
  return true
end

return autograd
