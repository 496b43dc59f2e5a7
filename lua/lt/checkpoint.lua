-- lt.checkpoint(fn, ...): gradient checkpointing (torch.utils.checkpoint,
-- non-reentrant form). The forward runs fn without recording a graph and
-- keeps only fn's tensor arguments (plus the RNG and autocast state); backward
-- runs fn again with grad enabled on detached copies of those arguments and
-- backpropagates the output gradients through the recomputed graph. So the
-- activations inside fn live only while its own backward runs: memory for
-- one more forward of fn.
--
--   local y = lt.checkpoint(block, x)            -- block: a module or a function
--
-- Parameters used inside fn get their .grad from that inner backward. When no
-- argument requires grad, a dummy input that does ties the outputs to the
-- node anyway, so that parameters inside fn still receive gradients (the
-- output of PyTorch's checkpoint would not require grad there).
local raise = require "lt.user_error"
local core = require "lt.core"
local autograd = require "lt.autograd"
local recompute = require "lt.recompute"

local is_tensor = core.is_tensor
local grad_of = core._grad
local pack, unpack = table.pack, table.unpack

local shape_text = require("lt.shapes").text

-- The autocast region fn runs in, re-entered for the recomputation (a
-- disabled region when there is none: the backward may itself run inside one).
local function autocast_state()
  local enabled, dtype, device_type = core._autocast_state()
  return { enabled = enabled, dtype = dtype, device_type = device_type }
end

local function under_autocast(state, fn, ...) return core.autocast(state, fn, ...) end

-- May fn involve a parameter that requires grad? A module says; a plain
-- function might, so it is assumed to.
local function may_need_grad(fn)
  if type(fn) ~= "table" or type(fn.parameters) ~= "function" then return true end
  for _, p in ipairs(fn:parameters()) do
    if p.requires_grad then return true end
  end
  return false
end

local Checkpoint = autograd.Function:extend("Checkpoint")

-- forward(ctx, fn, nargs, arg_1, ..., arg_nargs [, dummy])
function Checkpoint.forward(ctx, fn, nargs, ...)
  local args = pack(...)
  ctx.fn, ctx.nargs = fn, nargs
  ctx.rng_state = core.get_rng_state()
  ctx.autocast = autocast_state()
  -- Non-tensor arguments are kept as they are; tensors through the engine,
  -- which checks that nothing wrote to them before backward.
  ctx.plain_args, ctx.is_tensor_arg = {}, {}
  local tensors = {}
  for i = 1, nargs do
    if is_tensor(args[i]) then
      tensors[#tensors + 1] = args[i]
      ctx.is_tensor_arg[i] = true
    else
      ctx.plain_args[i] = args[i]
    end
  end
  ctx:save_for_backward(unpack(tensors))
  local outputs = pack(fn(unpack(args, 1, nargs)))
  ctx.shapes = {}
  for i = 1, outputs.n do
    local y = outputs[i]
    if is_tensor(y) then
      -- The engine ties outputs to inputs with one node: an argument returned
      -- as it is becomes a copy.
      for k = 1, args.n do
        if rawequal(y, args[k]) then y = y:clone() outputs[i] = y break end
      end
      ctx.shapes[i] = y.shape
    end
  end
  return unpack(outputs, 1, outputs.n)
end

-- fn's arguments for the recomputation: tensors detached, requiring grad
-- where the forward's did, so that their gradients can be read afterwards.
local function recompute_args(ctx)
  local saved = pack(ctx:saved_tensors())
  local args, inputs, k = {}, {}, 0
  for i = 1, ctx.nargs do
    if not ctx.is_tensor_arg[i] then
      args[i] = ctx.plain_args[i]
    else
      k = k + 1
      local x = saved[k]:detach()
      if ctx.needs_input_grad[i + 2] then x:requires_grad_(true) end
      args[i], inputs[i] = x, x
    end
  end
  return args, inputs
end

-- The recomputed outputs, checked against the forward's.
local function check_outputs(ctx, outputs)
  for i, shape in pairs(ctx.shapes) do
    local y = outputs[i]
    if not is_tensor(y) then
      error(string.format("checkpoint: recomputed output %d is %s, the forward's was a tensor of shape %s",
        i, type(y), shape_text(shape)), 0)
    end
    local got = y.shape
    local same = #got == #shape
    for d = 1, #shape do same = same and got[d] == shape[d] end
    if not same then
      error(string.format("checkpoint: recomputed output %d has shape %s, the forward's was %s",
        i, shape_text(got), shape_text(shape)), 0)
    end
  end
end

-- Backpropagates grads (by output position) through the recomputed outputs
-- in one backward pass: over several outputs, through sum_i <y_i, g_i>, whose
-- gradient at y_i is exactly g_i.
local function backward_through(outputs, grads)
  local seeded = {}
  for i = 1, outputs.n do
    local y, g = outputs[i], grads[i]
    if is_tensor(y) and y.requires_grad and g ~= nil then seeded[#seeded + 1] = { y, g } end
  end
  if #seeded == 1 then
    seeded[1][1]:backward(seeded[1][2])
  elseif #seeded > 1 then
    -- Backward functions run without grad mode: the sum must be recorded.
    local root = core.enable_grad(function()
      local total = (seeded[1][1] * seeded[1][2]):sum()
      for k = 2, #seeded do total = total + (seeded[k][1] * seeded[k][2]):sum() end
      return total
    end)
    root:backward()
  end
end

function Checkpoint.backward(ctx, ...)
  -- Tensors the backward so far has let go of (the activations of later
  -- layers, still pinned by unreachable Lua handles) are released before
  -- the recomputation allocates: otherwise the collector's timing, not the
  -- segment size, decides the peak.
  collectgarbage("collect")
  local grads_by_tensor = pack(...)
  local args, inputs = recompute_args(ctx)
  -- grads come one per tensor output; place them at the outputs' positions.
  local grads, k = {}, 0
  local positions = {}
  for i in pairs(ctx.shapes) do positions[#positions + 1] = i end
  table.sort(positions)
  for _, i in ipairs(positions) do k = k + 1 grads[i] = grads_by_tensor[k] end

  -- The recomputation draws the forward's random numbers (dropout masks);
  -- the generator continues afterwards as if it had not run.
  local rng_after = core.get_rng_state()
  core.set_rng_state(ctx.rng_state)
  local ok, outputs = pcall(function()
    return pack(core.enable_grad(recompute.run, under_autocast, ctx.autocast, ctx.fn, unpack(args, 1, ctx.nargs)))
  end)
  core.set_rng_state(rng_after)
  if not ok then error(outputs, 0) end
  check_outputs(ctx, outputs)
  backward_through(outputs, grads)

  local result = { nil, nil } -- fn and nargs take no gradient
  for i = 1, ctx.nargs do
    local x = inputs[i]
    -- Not x.grad: x:free() below would then find its cached handle.
    result[i + 2] = x and grad_of(x) or nil
  end
  -- The recomputed outputs and the detached inputs are garbage now; released
  -- here, not when the collector comes, so that the next segment's recompute
  -- does not stack on top of them. Leaves among the outputs (a parameter fn
  -- returned as it is) belong to someone else and stay.
  for i = 1, outputs.n do
    local y = outputs[i]
    if is_tensor(y) and y.grad_fn ~= nil then y:free() end
  end
  for _, x in pairs(inputs) do x:free() end
  return unpack(result, 1, ctx.nargs + 3) -- the dummy (if any) takes none either
end

-- lt.checkpoint(fn, ...): fn(...)'s results, with fn's activations recomputed
-- at backward instead of kept.
return function(fn, ...)
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call) then
    raise("checkpoint: expected a function or a module, got " .. type(fn))
  end
  if not core.is_grad_enabled() then return fn(...) end
  local n = select("#", ...)
  local any_requires_grad = false
  for i = 1, n do
    local a = select(i, ...)
    if is_tensor(a) and a.requires_grad then any_requires_grad = true break end
  end
  if not any_requires_grad and may_need_grad(fn) then
    local args = pack(...)
    args[n + 1] = core.zeros({}, { requires_grad = true })
    return Checkpoint.apply(fn, n, unpack(args, 1, n + 1))
  end
  return Checkpoint.apply(fn, n, ...)
end
