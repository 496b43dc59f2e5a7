-- What theory says a training step of a sequential model peaks at: a
-- timeline of the step's tensors worked out from the layers' shapes and what
-- each layer keeps for its backward, without running the step. The memory
-- tricks table (lua/lt/recipes/memory_tricks.lua) sets it beside the measured peaks
-- for the techniques whose saving depends on where each tensor lives and
-- dies in the step (downsampling, autocast, checkpointing).
--
-- The rules are those of PyTorch's backward formulas, which lt's follow:
--   Conv2d, Linear  keep their input (its bfloat16 cast under autocast, and
--                   the weight's cast); a convolution's scratch, forward and
--                   backward, is at most its output's size
--   BatchNorm2d     keeps its input and two per-channel statistics
--   ReLU            keeps its output (in place: its input, overwritten)
--   MaxPool2d       keeps the argmax indices (int64, the output's size)
--   Flatten         a view: no bytes of its own
--   cross_entropy   keeps its (float32) logits and a per-row logsumexp
-- A Sequential drops each intermediate once the next layer has run; the
-- backward frees each node's gradient and saved tensors once the node has
-- run; parameter gradients are made by the first backward that reaches them
-- (zero_grad set them to nil), in float32; every tensor takes the allocator's
-- blocks (a multiple of 512 bytes).
local raise = require "lt.user_error"
local theory = {}

local LOWER = 2 -- bytes of a bfloat16 or float16 element (autocast)
local FLOAT = 4
local INDEX = 8

local function blocks(bytes) return bytes <= 0 and 0 or (bytes + 511) // 512 * 512 end

-- ---- the timeline ----

-- Live bytes and their peak; a tensor is {bytes, refs}, freed when its last
-- holder lets go.
local Timeline = {}
Timeline.__index = Timeline

local function timeline(live) return setmetatable({ live = live, peak = live }, Timeline) end

function Timeline:alloc(numel, size)
  local t = { bytes = blocks(numel * size), numel = numel, size = size, refs = 1 }
  self.live = self.live + t.bytes
  if self.live > self.peak then self.peak = self.live end
  return t
end

function Timeline:hold(t)
  t.refs = t.refs + 1
  return t
end

function Timeline:drop(t)
  if not t then return end
  t.refs = t.refs - 1
  if t.refs == 0 then self.live = self.live - t.bytes end
end

-- A temporary of the given bytes, freed before the next tensor is made.
function Timeline:scratch(bytes)
  if self.live + blocks(bytes) > self.peak then self.peak = self.live + blocks(bytes) end
end

-- ---- the layers ----
-- forward(tl, layer, x, ac) returns the output and what the node saved;
-- backward(tl, layer, g, node, ac) returns the input's gradient (nil where the
-- input needs none) after making the parameters' gradients; Conv2d and Linear
-- return instead their gradients as computed and a function that widens them
-- (autocast's casts), which runs once g is dropped, as the casts' nodes do.

-- A gradient of numel elements made in the element size `used` for an
-- operand whose own is `size`: the cast's backward widens it afterwards.
local function lower_gradient(tl, numel, size, used)
  local g = tl:alloc(numel, used)
  return { g = g, numel = numel, size = size, cast = used ~= size }
end

-- The gradient the operand gets once its cast's backward has run.
local function widen(tl, lower)
  if not lower.cast then return lower.g end
  local g = tl:alloc(lower.numel, lower.size)
  tl:drop(lower.g)
  return g
end

local layers = {}

-- Conv2d and Linear: autocast casts the input (unless already lower), the
-- weight and the bias; the node keeps the input's and the weight's.
local function weighted(scratch)
  return {
    forward = function(tl, layer, x, ac)
      local node = { x = x, used = ac and LOWER or x.size }
      if ac and x.size ~= LOWER then node.x = tl:alloc(x.numel, LOWER) else tl:hold(x) end
      if ac then
        node.w = tl:alloc(layer.params[1], LOWER)
        tl:drop(tl:alloc(layer.params[2] or 0, LOWER))
      end
      local y = tl:alloc(layer.out_numel, node.used)
      if scratch then tl:scratch(y.bytes) end
      return y, node
    end,
    backward = function(tl, layer, g, node, ac, needs_input_grad)
      -- The node makes its operands' gradients in the dtypes it ran in and
      -- lets go of what it saved; then each cast's backward widens its own.
      local grad = needs_input_grad and lower_gradient(tl, layer.in_numel, layer.in_size, node.used)
      local lower = {}
      for i, numel in ipairs(layer.params) do lower[i] = lower_gradient(tl, numel, FLOAT, ac and LOWER or FLOAT) end
      if scratch then tl:scratch(g.bytes) end
      tl:drop(node.x)
      tl:drop(node.w)
      -- The casts' backwards run after the node has let go of its output's
      -- gradient too: the widening is what the caller finishes with.
      return grad, function()
        layer.grads = {}
        for i, l in ipairs(lower) do layer.grads[i] = widen(tl, l) end
        return grad and widen(tl, grad)
      end
    end,
  }
end
layers.Conv2d = weighted(true)
layers.Linear = weighted(false)

layers.BatchNorm2d = {
  forward = function(tl, layer, x)
    local y = tl:alloc(x.numel, x.size)
    return y, { x = tl:hold(x), mean = tl:alloc(layer.channels, FLOAT), invstd = tl:alloc(layer.channels, FLOAT) }
  end,
  backward = function(tl, layer, g, node, _, needs_input_grad)
    local grad = needs_input_grad and tl:alloc(node.x.numel, node.x.size)
    layer.grads = {}
    for i, numel in ipairs(layer.params) do layer.grads[i] = tl:alloc(numel, FLOAT) end
    tl:drop(node.x)
    tl:drop(node.mean)
    tl:drop(node.invstd)
    return grad
  end,
}

layers.ReLU = {
  forward = function(tl, layer, x)
    local y = layer.inplace and tl:hold(x) or tl:alloc(x.numel, x.size)
    return y, { y = tl:hold(y) }
  end,
  backward = function(tl, _, g, node, _, needs_input_grad)
    local grad = needs_input_grad and tl:alloc(g.numel, g.size)
    tl:drop(node.y)
    return grad
  end,
}

layers.MaxPool2d = {
  forward = function(tl, layer, x)
    local y = tl:alloc(layer.out_numel, x.size)
    return y, { indices = tl:alloc(layer.out_numel, INDEX), size = x.size }
  end,
  backward = function(tl, layer, _, node, _, needs_input_grad)
    local grad = needs_input_grad and tl:alloc(layer.in_numel, node.size)
    tl:drop(node.indices)
    return grad
  end,
}

layers.Flatten = {
  forward = function(tl, _, x) return tl:hold(x), {} end,
  backward = function(tl, _, g) return tl:hold(g) end,
}

-- ---- the step ----

-- The leaf layers of model in forward order with their shapes: a no_grad
-- forward of x gives each one's input and output sizes.
function theory.describe(model, x)
  local lt = require "lt"
  local list = {}
  local function walk(m)
    local children = m:children()
    if #children == 0 then list[#list + 1] = m end
    for _, child in ipairs(children) do walk(child) end
  end
  walk(model)
  local described = {}
  lt.no_grad(function()
    local was_training = model.training
    model:eval()
    for i, m in ipairs(list) do
      local y = m(x)
      local params = {}
      for j, p in ipairs(m:parameters()) do params[j] = p:numel() end
      local buffer_bytes = 0
      for _, b in ipairs(m:buffers()) do buffer_bytes = buffer_bytes + blocks(b:nbytes()) end
      local kind = getmetatable(m).__name
      if not layers[kind] then raise("step_theory: no rule for a " .. tostring(kind) .. " layer") end
      described[i] = { kind = kind, module = m, in_numel = x:numel(), out_numel = y:numel(), params = params,
        buffer_bytes = buffer_bytes, channels = kind == "BatchNorm2d" and x:size(2) or nil, inplace = m.inplace }
      x = y
    end
    if was_training then model:train() end
  end)
  return described
end

-- What a node holds, let go (a forward without a graph keeps nothing).
local function release(tl, node)
  for _, t in pairs(node) do
    if type(t) == "table" then tl:drop(t) end
  end
end

-- The leaf ranges {first, last} that nn.checkpoint_sequential(model,
-- segments) checkpoints: its children in chunks of n // segments, all but
-- the last chunk (which runs as usual).
function theory.checkpoint_ranges(model, segments)
  local leaves_before, leaf = {}, 0
  local function count(m)
    local children = m:children()
    if #children == 0 then return 1 end
    local n = 0
    for _, child in ipairs(children) do n = n + count(child) end
    return n
  end
  local children = model:children()
  for i, child in ipairs(children) do
    leaves_before[i] = leaf
    leaf = leaf + count(child)
  end
  leaves_before[#children + 1] = leaf
  local size, ranges = #children // segments, {}
  for first = 1, size * (segments - 1), size do
    ranges[#ranges + 1] = { leaves_before[first] + 1, leaves_before[first + size] }
  end
  return ranges
end

-- The forward of layers[first..last] from x (a timeline tensor): returns
-- the output and, when it records a graph, the nodes; the input stays the
-- caller's.
local function forward_range(tl, described, first, last, x, ac, record)
  local nodes = {}
  for i = first, last do
    local layer = described[i]
    layer.in_size = x.size
    local y, node = layers[layer.kind].forward(tl, layer, x, ac)
    if record then nodes[i] = node else release(tl, node) end
    if i > first then tl:drop(x) end
    x = y
  end
  return x, nodes
end

-- The backward of layers[last..first] from the output gradient g: returns
-- the gradient of layers[first]'s input (nil when first is the first layer).
local function backward_range(tl, described, first, last, nodes, g, ac)
  for i = last, first, -1 do
    local layer = described[i]
    local grad, finish = layers[layer.kind].backward(tl, layer, g, nodes[i], ac, i > 1)
    tl:drop(g)
    if finish then grad = finish() end
    g = grad
  end
  return g
end

-- The peak bytes of one training step (forward, cross-entropy, backward,
-- optimizer step) of the described layers on a batch of batch_numel input
-- elements with `rows` labels, above what was allocated before the model:
-- the parameters, the batch and its labels and state_bytes of optimizer
-- state are live throughout, the gradients are made by the backward.
-- opts.autocast: conv and linear in bfloat16; opts.segments: a list of
-- {first, last} layer ranges run under lt.checkpoint (the rest as usual).
function theory.step_peak(described, batch_numel, rows, state_bytes, opts)
  opts = opts or {}
  local ac = opts.autocast
  local fixed = state_bytes + blocks(batch_numel * FLOAT) + blocks(rows * INDEX)
  for _, layer in ipairs(described) do
    for _, numel in ipairs(layer.params) do fixed = fixed + blocks(numel * FLOAT) end
    fixed = fixed + layer.buffer_bytes
  end
  local tl = timeline(fixed)
  local x = { bytes = 0, numel = batch_numel, size = FLOAT, refs = 1 } -- the caller's batch, counted in fixed
  -- The stages of the forward: checkpointed segments and plain runs between.
  local stages, at = {}, 1
  for _, seg in ipairs(opts.segments or {}) do
    if seg[1] > at then stages[#stages + 1] = { at, seg[1] - 1 } end
    stages[#stages + 1] = { seg[1], seg[2], checkpointed = true }
    at = seg[2] + 1
  end
  if at <= #described then stages[#stages + 1] = { at, #described } end
  for _, stage in ipairs(stages) do
    stage.input = x
    if stage.checkpointed then
      -- No graph: each intermediate goes once the next exists; the node
      -- keeps the segment's input.
      local y = forward_range(tl, described, stage[1], stage[2], x, ac, false)
      tl:hold(x)
      x = y
    else
      local y, nodes = forward_range(tl, described, stage[1], stage[2], x, ac, true)
      stage.nodes = nodes
      x = y
    end
    if stage ~= stages[1] then tl:drop(stage.input) end
  end
  -- The loss: float32 logits (a cast under autocast), a logsumexp per row.
  local logits = x
  local loss_node = { z = logits.size == FLOAT and tl:hold(logits) or tl:alloc(logits.numel, FLOAT),
    lse = tl:alloc(rows, FLOAT) }
  local loss = tl:alloc(1, FLOAT)
  tl:drop(logits) -- the script's handle on the logits (a temporary)
  -- The backward.
  local seed = tl:alloc(1, FLOAT)
  local g = widen(tl, lower_gradient(tl, logits.numel, logits.size, FLOAT))
  tl:drop(seed)
  tl:drop(loss_node.z)
  tl:drop(loss_node.lse)
  for s = #stages, 1, -1 do
    local stage = stages[s]
    if stage.checkpointed then
      -- Recomputed with a graph from (a detached view of) the kept input;
      -- the output gradient and the recomputed output stay until the
      -- segment's backward returns.
      local y, nodes = forward_range(tl, described, stage[1], stage[2], stage.input, ac, true)
      local outer = tl:hold(g)
      g = backward_range(tl, described, stage[1], stage[2], nodes, g, ac)
      tl:drop(outer)
      tl:drop(y)
      tl:drop(stage.input)
    else
      g = backward_range(tl, described, stage[1], stage[2], stage.nodes, g, ac)
    end
  end
  tl:drop(g)
  tl:drop(loss)
  return tl.peak
end

return theory
