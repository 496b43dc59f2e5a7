-- Every memory-saving technique, measured: each one runs twice on the same
-- model and batch, without and with the technique, and the allocator's exact
-- figures say what it saved. scripts/memory_tricks.lua prints the table and
-- tests/lua/memory_tricks_spec.lua asserts on the same functions, so the
-- numbers a user reads are the numbers the tests check.
--
-- A "peak" is lt.memory.max_allocated(DEV) above what was allocated before the
-- run started: the run builds its model, batch and optimizer itself, so the
-- peak counts parameters, gradients, optimizer state and activations, as
-- torch.cuda.max_memory_allocated() does in a fresh process.
local lt = require "lt"
local step_theory = require "lt.recipes.step_theory"
local nn, F, optim = lt.nn, lt.nn.functional, lt.optim

local tricks = {}

tricks.BATCH = 64
tricks.MLP_BATCH = 1024
tricks.MLP_DEPTH, tricks.MLP_WIDTH = 16, 512
tricks.MICRO_BATCHES = 4
tricks.LOSS_STEPS = 8
local SEED = 42
-- The models and data live on the CPU device, whatever `lt --device` says
-- (lt.memory.* without a device would follow it), so the figures are the
-- exact byte counts of the CPU allocator.
local DEV = "cpu"

-- ---- models ----

local function cnn_block(cin, cout, opts)
  if opts.downsample == "strided" then -- the convolution itself halves the resolution
    return nn.Sequential(nn.Conv2d(cin, cout, 3, { stride = 2, padding = 1 }), nn.BatchNorm2d(cout),
      nn.ReLU { inplace = opts.inplace })
  end
  local block = nn.Sequential(nn.Conv2d(cin, cout, 3, { padding = 1 }), nn.BatchNorm2d(cout),
    nn.ReLU { inplace = opts.inplace })
  if opts.downsample ~= "none" then block:append(nn.MaxPool2d(2)) end
  return block
end

-- The Fashion CNN of scripts/train_fashion_cnn.lua: two blocks of
-- conv3x3-BatchNorm-ReLU-maxpool (32, 64 channels), then 3136-128-10.
-- opts.downsample: "maxpool" (the recipe), "strided" (stride-2 convolutions,
-- no pooling) or "none" (both blocks at full resolution, one 4x4 max pool
-- before the head, so that every variant has the same parameters).
function tricks.cnn(opts)
  opts = opts or {}
  local layers = nn.Sequential(cnn_block(1, 32, opts), cnn_block(32, 64, opts))
  if opts.downsample == "none" then layers:append(nn.MaxPool2d(4)) end
  layers:append(nn.Flatten())
  layers:append(nn.Linear(3136, 128))
  layers:append(nn.ReLU { inplace = opts.inplace })
  layers:append(nn.Linear(128, 10))
  return layers
end

-- A residual block of the deep MLP: relu(linear(x) + x). In place, the sum
-- and the activation overwrite the linear's output, which no backward
-- formula keeps (a linear saves its input), as ResNet's `out += identity`.
local Residual = nn.Module:extend("Residual")

function Residual:init(width, inplace)
  self.linear = nn.Linear(width, width)
  self.inplace = inplace
end

function Residual:forward(x)
  if self.inplace then return self.linear(x):add_(x):relu_() end
  return F.relu(self.linear(x) + x)
end

-- The deep MLP: MLP_DEPTH Linear(512, 512)+ReLU layers and a 512-10 head;
-- opts.residual makes each layer a Residual block.
function tricks.mlp(opts)
  opts = opts or {}
  local width, layers = tricks.MLP_WIDTH, nn.Sequential()
  for _ = 1, tricks.MLP_DEPTH do
    if opts.residual then
      layers:append(Residual(width, opts.inplace))
    else
      layers:append(nn.Linear(width, width))
      layers:append(nn.ReLU { inplace = opts.inplace })
    end
  end
  layers:append(nn.Linear(width, 10))
  return layers
end

tricks.MODEL_NAMES = { cnn = "CNN", mlp = "deep MLP" }

-- The model (seeded, so that without and with start from the same weights)
-- and a random batch of n examples with labels in 1..10.
function tricks.setup(model_name, opts, n)
  lt.manual_seed(SEED)
  local model = tricks[model_name](opts)
  n = n or (model_name == "mlp" and tricks.MLP_BATCH or tricks.BATCH)
  local x = model_name == "cnn" and lt.randn(n, 1, 28, 28) or lt.randn(n, tricks.MLP_WIDTH)
  return model, x, lt.randint(1, 10, { n })
end

-- The leaf layers of a model in forward order, for hand-written forwards.
function tricks.layers(model)
  local list = {}
  local function walk(m)
    local children = m:children()
    if #children == 0 then list[#list + 1] = m end
    for _, child in ipairs(children) do walk(child) end
  end
  walk(model)
  return list
end

-- ---- measuring ----

-- Runs fn from a settled allocator (garbage collected, peak reset) and
-- returns the peak bytes allocated above what was live before, then fn's
-- results. fn's locals die with it, so runs do not leak into each other.
function tricks.peak(fn, ...)
  lt.gc()
  local base = lt.memory.allocated(DEV)
  lt.memory.reset_peak(DEV)
  local results = table.pack(fn(...))
  local peak = lt.memory.max_allocated(DEV) - base
  return peak, table.unpack(results, 1, results.n)
end

-- Bytes of a tensor category now.
function tricks.category(name)
  return lt.memory.stats(DEV).by_category[name].current
end

-- Bytes the allocator gives a tensor of t's size (rounded up to 512).
function tricks.rounded_bytes(t)
  local bytes = t:nbytes()
  return math.max(512, (bytes + 511) // 512 * 512)
end

function tricks.parameter_bytes(model, rounded)
  local total = 0
  for _, p in ipairs(model:parameters()) do
    total = total + (rounded and tricks.rounded_bytes(p) or p:nbytes())
  end
  return total
end

-- One forward and backward (and an optimizer step when opt is given);
-- forward(model, x), when given, replaces model(x) (checkpointing).
function tricks.train_step(model, x, target, opt, forward)
  local loss = F.cross_entropy(forward and forward(model, x) or model(x), target)
  loss:backward()
  if opt then opt:step() end
  return loss
end

-- ---- the techniques ----
-- Each measure(model_name) returns the figure without the technique, the
-- figure with it, and a table of details the spec checks. theory(model_name,
-- details), where a technique has one, is the saving theory predicts from
-- the sizes of what the technique removes (measured apart from the peak:
-- parameter, state and output bytes), not from the two peaks.

local techniques = {}
tricks.techniques = techniques

local function technique(t)
  techniques[#techniques + 1] = t
  techniques[t.id] = t
  return t
end

local function sgd(params) return optim.SGD(params, { lr = 0.01 }) end

-- Peak of a training step (forward, backward, optimizer step, zero_grad)
-- that runs with the state a first step left (optimizer buffers), as every
-- step of a long run does. The garbage of the first step is collected
-- before the second, so that the figure is the step's own. SGD without
-- momentum unless optimizer says otherwise; also returns the optimizer's
-- state bytes and the step's activation peak. how, when given, changes the
-- run: how.batch (the batch size), how.prepare(model, x) -> model, x (a
-- dtype conversion, before the optimizer sees the parameters) and
-- how.step(model, x, target, opt) in place of tricks.train_step.
local function training_peak(model_name, opts, optimizer, how)
  how = how or {}
  lt.gc()
  local base = lt.memory.allocated(DEV)
  local model, x, target = tricks.setup(model_name, opts, how.batch)
  if how.prepare then model, x = how.prepare(model, x) end
  local opt = (optimizer or sgd)(model:parameters())
  local step = how.step or tricks.train_step
  step(model, x, target, opt)
  opt:zero_grad()
  lt.gc() -- also the float32 originals a conversion left behind
  lt.memory.reset_peak(DEV)
  step(model, x, target, opt)
  opt:zero_grad()
  return lt.memory.max_allocated(DEV) - base, opt:state_bytes(), lt.memory.stats(DEV).by_category.activation.peak
end
tricks.training_peak = training_peak

-- What theory says training_peak(model_name, opts, ...) peaks at, from the
-- model's shapes alone (lua/lt/recipes/step_theory.lua), with state_bytes of
-- optimizer state; theory_opts as step_theory.step_peak's; batch as
-- tricks.setup's.
function tricks.theory_peak(model_name, opts, state_bytes, theory_opts, batch)
  local model, x, target = tricks.setup(model_name, opts, batch)
  return step_theory.step_peak(step_theory.describe(model, x), x:numel(), target:numel(), state_bytes or 0,
    theory_opts)
end

-- A theory from the step timeline: the predicted peak without the
-- technique minus the predicted peak with it.
local function timeline_theory(_, d) return d.theory_without - d.theory_with end

technique {
  id = "inplace_relu", name = "in-place ReLU", models = { "cnn", "mlp" },
  theory = function() return 0 end,
  explain = "nn.ReLU{inplace=true} overwrites its input; ReLU saves its output either way and nothing saves the pre-activation, so a training step's peak stays",
  measure = function(model_name)
    return training_peak(model_name, { inplace = false }), training_peak(model_name, { inplace = true }), {}
  end,
}

technique {
  id = "inplace_residual", name = "in-place residual add", models = { "mlp" },
  theory = function() return 0 end,
  explain = "z:add_(x):relu_() instead of relu(z + x): the sum is a temporary either way and the block saves the same tensors, so the peak stays",
  measure = function(model_name)
    return training_peak(model_name, { residual = true, inplace = false }),
      training_peak(model_name, { residual = true, inplace = true }), {}
  end,
}

-- Hand-written inference forwards over the leaf layers, under no_grad.
local forwards = {}
tricks.forwards = forwards

-- x0, x1, ..., xn all kept in a list.
function forwards.keep_all(layers, x)
  local xs = { x }
  for i, layer in ipairs(layers) do xs[i + 1] = layer(xs[i]) end
  return xs[#xs]
end

-- x = layer(x): each old x becomes garbage, reclaimed by the collector as
-- the bytes charged to it add up.
function forwards.reuse(layers, x)
  for _, layer in ipairs(layers) do x = layer(x) end
  return x
end

-- Each intermediate released as soon as the next exists (the input is the
-- caller's). Out-of-place layers only: an in-place one returns its input.
function forwards.delete(layers, x)
  for i, layer in ipairs(layers) do
    local y = layer(x)
    if i > 1 then lt.del(x) end
    x = y
  end
  return x
end

-- The same with <close>: `previous` is released at the end of each iteration.
function forwards.close(layers, x)
  for i, layer in ipairs(layers) do
    local previous <close> = i > 1 and x or nil
    x = layer(x)
  end
  return x
end

-- Peak of an inference forward of the model's layers by one of the
-- forwards, above what was allocated before the model, its batch and its
-- labels existed (the model's construction is not part of the peak).
function tricks.forward_peak(model_name, forward)
  lt.gc()
  local base = lt.memory.allocated(DEV)
  local model, x, target = tricks.setup(model_name)
  model:eval()
  local layers = tricks.layers(model)
  lt.memory.reset_peak(DEV)
  local out = lt.no_grad(forward, layers, x)
  return lt.memory.max_allocated(DEV) - base, out, target
end

-- The most bytes two consecutive outputs take together: what a forward that
-- drops each intermediate once the next exists holds at its peak.
local function largest_pair(outputs)
  local pair = 0
  for i, bytes in ipairs(outputs) do pair = math.max(pair, bytes + (i > 1 and outputs[i - 1] or 0)) end
  return pair
end

-- The allocator's bytes of each leaf layer's output in an inference
-- forward, in order.
function tricks.output_bytes(model_name)
  local model, x = tricks.setup(model_name)
  model:eval()
  local sizes = {}
  lt.no_grad(function()
    for i, layer in ipairs(tricks.layers(model)) do
      x = layer(x)
      sizes[i] = tricks.rounded_bytes(x)
    end
  end)
  return sizes
end

technique {
  id = "reuse_x", name = "reuse x, not x0..xn", models = { "cnn", "mlp" },
  explain = "inference: x = layer(x) drops each intermediate once the next exists; a list x0..xn keeps all of them",
  measure = function(model_name)
    return tricks.forward_peak(model_name, forwards.keep_all), tricks.forward_peak(model_name, forwards.reuse), {
      outputs = tricks.output_bytes(model_name),
    }
  end,
  -- Keeping all holds every output at the end; reusing holds a layer's
  -- input and output at once (the batch itself is held either way).
  theory = function(_, d)
    local all = 0
    for _, bytes in ipairs(d.outputs) do all = all + bytes end
    return all - largest_pair(d.outputs)
  end,
}

technique {
  id = "close", name = "<close> / lt.del", models = { "cnn", "mlp" },
  theory = function() return 0 end,
  explain = "inference: lt.del or <close> release each intermediate at once; lt collects what a script dropped before any new peak, so plain x = layer(x) peaks the same",
  measure = function(model_name)
    return tricks.forward_peak(model_name, forwards.reuse), tricks.forward_peak(model_name, forwards.close), {
      delete = tricks.forward_peak(model_name, forwards.delete),
    }
  end,
}

-- A loop of steps that sums the loss, as a validation loop that forgot
-- no_grad does: as a tensor (total + loss, so the sum's graph holds every
-- step's graph and the activations it saved) or as a number (loss:item()).
-- on_step(step), when given, runs after each step.
function tricks.loss_loop(model_name, as_tensor, steps, on_step)
  local model, x, target = tricks.setup(model_name)
  local total = 0
  for step = 1, steps do
    local loss = F.cross_entropy(model(x), target)
    -- Past this iteration the step's graph is garbage, unless total holds it.
    if as_tensor then total = total + loss else total = total + loss:item() end
    if on_step then on_step(step) end
  end
  return lt.is_tensor(total) and total:item() or total
end

-- The bytes one training forward's graph holds once its loss is kept (the
-- saved activations, the loss and what the nodes hold), garbage collected.
function tricks.graph_bytes(model_name)
  lt.gc()
  local model, x, target = tricks.setup(model_name)
  lt.gc()
  local before = lt.memory.allocated(DEV)
  local loss = F.cross_entropy(model(x), target)
  lt.gc()
  local bytes = lt.memory.allocated(DEV) - before
  loss:free()
  return bytes
end

technique {
  id = "loss_item", name = "loss:item(), not a loss tensor", models = { "cnn", "mlp" },
  explain = ("summing %d losses as tensors keeps every step's graph; loss:item() keeps none"):format(tricks.LOSS_STEPS),
  measure = function(model_name)
    local steps = tricks.LOSS_STEPS
    return tricks.peak(tricks.loss_loop, model_name, true, steps), tricks.peak(tricks.loss_loop, model_name, false, steps), {
      graph_bytes = tricks.graph_bytes(model_name),
    }
  end,
  -- Every step but the last keeps its whole graph.
  theory = function(_, d) return (tricks.LOSS_STEPS - 1) * d.graph_bytes end,
}

-- A training step, zero_grad, then the next forward: the peak of that
-- forward, which runs with the first step's gradients freed (set to nil)
-- or zero-filled; also the bytes held after zero_grad and the gradients'
-- bytes as the allocator rounds them.
function tricks.zero_grad_peak(model_name, set_to_none)
  lt.gc()
  local base = lt.memory.allocated(DEV)
  local model, x, target = tricks.setup(model_name)
  local opt = sgd(model:parameters())
  tricks.train_step(model, x, target, opt)
  opt:zero_grad { set_to_none = set_to_none }
  lt.gc()
  local held = lt.memory.allocated(DEV) - base
  lt.memory.reset_peak(DEV)
  local loss = F.cross_entropy(model(x), target)
  local peak = lt.memory.max_allocated(DEV) - base
  return peak, held, tricks.parameter_bytes(model, true), loss
end

technique {
  id = "zero_grad", name = "zero_grad sets grads to nil", models = { "cnn", "mlp" },
  theory = function(_, d) return d.gradient_bytes end,
  explain = "the next forward runs without last step's gradients: opt:zero_grad() frees them, not zero-fills",
  measure = function(model_name)
    local without, held_without, grad_bytes = tricks.zero_grad_peak(model_name, false)
    local with, held_with = tricks.zero_grad_peak(model_name, true)
    return without, with, { held_without = held_without, held_with = held_with, gradient_bytes = grad_bytes }
  end,
}

-- Inference (eval mode) with a graph or under no_grad: the peak, the
-- activation bytes the forward left saved for a backward, the bytes still
-- held (output included) once the garbage is collected, and the input's.
function tricks.inference_peak(model_name, use_no_grad)
  return tricks.peak(function()
    local base = lt.memory.allocated(DEV)
    local model, x = tricks.setup(model_name)
    model:eval()
    local forward = function() return model(x) end
    local out = use_no_grad and lt.no_grad(forward) or forward()
    local saved = tricks.category("activation")
    lt.gc()
    return saved, lt.memory.allocated(DEV) - base, tricks.rounded_bytes(x), out
  end)
end

technique {
  id = "no_grad", name = "no_grad inference", models = { "cnn", "mlp" },
  explain = "lt.no_grad records no graph, so no activation is saved for a backward",
  measure = function(model_name)
    local without, saved, held = tricks.inference_peak(model_name, false)
    local with, saved_no_grad, held_no_grad, input_bytes = tricks.inference_peak(model_name, true)
    return without, with, {
      saved = saved, saved_no_grad = saved_no_grad, held = held, held_no_grad = held_no_grad,
      input_bytes = input_bytes, outputs = tricks.output_bytes(model_name),
    }
  end,
  -- With a graph the forward ends holding everything it saved; without,
  -- it holds two consecutive outputs at most.
  theory = function(_, d) return d.saved - largest_pair(d.outputs) end,
}

-- A forward and backward over the whole batch, or over k micro-batches with
-- the loss divided by k (the gradients add up to the full batch's). Returns
-- the activation peak and the gradients. opts.collect_between collects each
-- micro-batch's garbage before the next (taking the collector's pace out of
-- the activation peak); opts.eval runs BatchNorm on its running statistics.
function tricks.accumulation_step(model_name, k, opts)
  opts = opts or {}
  local model, x, target = tricks.setup(model_name, nil, opts.batch)
  if opts.eval then model:eval() end
  lt.gc()
  lt.memory.reset_peak(DEV)
  local n = x:size(1) // k
  for i = 1, k do
    if opts.collect_between and i > 1 then lt.gc() end
    local first = (i - 1) * n + 1
    local loss = F.cross_entropy(model(x:narrow(1, first, n)), target:narrow(1, first, n))
    if k > 1 then loss = loss / k end
    loss:backward()
  end
  local grads = {}
  for i, p in ipairs(model:parameters()) do grads[i] = p.grad end
  return lt.memory.stats(DEV).by_category.activation.peak, grads
end

technique {
  id = "micro_batches", name = ("%d micro-batches, grads accumulated"):format(tricks.MICRO_BATCHES),
  models = { "cnn", "mlp" },
  explain = "the same gradients (not with BatchNorm: statistics per micro-batch) from a quarter of the activations; the later micro-batches run with every gradient held (lt adds into it in place, no temporary), so it pays where activations outweigh gradients",
  measure = function(model_name)
    local k = tricks.MICRO_BATCHES
    local without, activations_full = tricks.peak(tricks.accumulation_step, model_name, 1)
    local with, activations_micro = tricks.peak(tricks.accumulation_step, model_name, k)
    return without, with, { activations_full = activations_full, activations_micro = activations_micro,
      gradient_bytes = tricks.parameter_bytes(tricks.setup(model_name), true),
      outputs = tricks.output_bytes(model_name) }
  end,
  -- A whole batch's backward trades saved activations A for gradients G as
  -- it goes (at most max(A, G) of both), with one output-sized gradient t
  -- in flight; with k micro-batches the later ones hold every gradient and
  -- 1/k of A and of t.
  theory = function(_, d)
    local k, a, g = tricks.MICRO_BATCHES, d.activations_full, d.gradient_bytes
    local t = 0
    for _, bytes in ipairs(d.outputs) do t = math.max(t, bytes) end
    return math.max(a, g) + t - g - (a + t) / k
  end,
}

technique {
  id = "empty_cache", name = "empty_cache (reserved)", models = { "cnn", "mlp" },
  -- Nothing is allocated after the step: every reserved byte is cache.
  theory = function(_, d) return d.reserved_before - d.allocated_before end,
  explain = "after a step, empty_cache gives cached free segments back: reserved drops, allocated does not",
  measure = function(model_name)
    lt.gc()
    lt.memory.empty_cache(DEV)
    training_peak(model_name, {}) -- fills the cache; everything it made is garbage after it
    lt.gc()
    local allocated, reserved = lt.memory.allocated(DEV), lt.memory.reserved(DEV)
    lt.memory.empty_cache(DEV)
    return reserved, lt.memory.reserved(DEV), { allocated_before = allocated, allocated_after = lt.memory.allocated(DEV),
      reserved_before = reserved }
  end,
}

-- Full resolution against a downsampling variant, with the timeline
-- theory of both.
local function downsampling(model_name, variant)
  local full, with = { downsample = "none" }, { downsample = variant }
  return training_peak(model_name, full), training_peak(model_name, with), {
    theory_without = tricks.theory_peak(model_name, full), theory_with = tricks.theory_peak(model_name, with),
  }
end

technique {
  id = "maxpool", name = "max pooling per block", models = { "cnn" },
  explain = "MaxPool2d(2) after each block, not full resolution: the second block sees 1/4 of the pixels",
  measure = function(model_name) return downsampling(model_name, "maxpool") end,
  theory = timeline_theory,
}

technique {
  id = "strided", name = "strided convolutions", models = { "cnn" },
  explain = "stride-2 convolutions instead of full resolution: every activation at 1/4 of the pixels or less",
  measure = function(model_name) return downsampling(model_name, "strided") end,
  theory = timeline_theory,
}

local function adam(params) return optim.Adam(params, { lr = 1e-3 }) end
local function sgd_momentum(params) return optim.SGD(params, { lr = 0.01, momentum = 0.9 }) end

technique {
  id = "sgd", name = "SGD, not Adam", models = { "cnn", "mlp" },
  theory = function(_, d) return d.adam_state - d.sgd_state end,
  explain = "SGD keeps no state; Adam keeps two buffers the size of the parameters",
  measure = function(model_name)
    local without, adam_state = training_peak(model_name, {}, adam)
    local with, sgd_state = training_peak(model_name, {}, sgd)
    return without, with, { adam_state = adam_state, sgd_state = sgd_state }
  end,
}

technique {
  id = "sgd_momentum", name = "SGD with momentum, not Adam", models = { "cnn", "mlp" },
  theory = function(_, d) return d.adam_state - d.momentum_state end,
  explain = "momentum keeps one buffer the size of the parameters, Adam two",
  measure = function(model_name)
    local without, adam_state = training_peak(model_name, {}, adam)
    local with, momentum_state = training_peak(model_name, {}, sgd_momentum)
    return without, with, { adam_state = adam_state, momentum_state = momentum_state }
  end,
}

-- ---- precision and recomputation ----

-- The model and its input in bfloat16: parameters, and so gradients and
-- activations, take 2 bytes a number instead of 4.
function tricks.to_bfloat16(model, x) return model:bfloat16(), x:bfloat16() end

-- The int64 bytes a step's peak holds that no dtype halves: the CNN's
-- max-pool indices, saved for backward.
function tricks.index_bytes(model_name)
  return model_name == "cnn" and tricks.BATCH * (32 * 14 * 14 + 64 * 7 * 7) * 8 or 0
end

technique {
  id = "bfloat16", name = "half precision (bfloat16 model)", models = { "cnn", "mlp" },
  explain = "model:bfloat16() and a bfloat16 input: parameters, gradients and activations all take 2 bytes, not 4",
  measure = function(model_name)
    local without = training_peak(model_name, {})
    return without, training_peak(model_name, {}, nil, { prepare = tricks.to_bfloat16 }), { without = without }
  end,
  -- Half of every floating-point byte of the step's peak.
  theory = function(model_name, d) return (d.without - tricks.index_bytes(model_name)) / 2 end,
}

-- A training step whose forward and loss run under bfloat16 autocast. The
-- backward runs outside the region, as PyTorch recommends: each backward
-- formula already works in the dtypes its forward op saw.
function tricks.autocast_step(model, x, target, opt)
  local loss
  do
    local region <close> = lt.autocast { dtype = "bfloat16" }
    loss = F.cross_entropy(model(x), target)
  end
  loss:backward()
  if opt then opt:step() end
  return loss
end

technique {
  id = "autocast", name = "autocast bfloat16", models = { "cnn", "mlp" },
  explain = "matmuls and convolutions in bfloat16 save 16-bit activations, but each weight gets a bfloat16 copy",
  measure = function(model_name)
    return training_peak(model_name, {}), training_peak(model_name, {}, nil, { step = tricks.autocast_step }), {
      theory_without = tricks.theory_peak(model_name, {}),
      theory_with = tricks.theory_peak(model_name, {}, 0, { autocast = true }),
    }
  end,
  theory = timeline_theory,
}

-- Checkpoint segments: 4 of the MLP's 33 layers; one per child of the CNN,
-- since its first block holds most of the activations and only segments
-- that split it off help (README, "Mixed precision and checkpointing").
function tricks.checkpoint_segments(model_name, model)
  return model_name == "mlp" and 4 or #model:children()
end

-- A forward for tricks.train_step through nn.checkpoint_sequential.
function tricks.checkpointed(model_name)
  return function(model, x)
    return nn.checkpoint_sequential(model, tricks.checkpoint_segments(model_name, model), x)
  end
end

-- One forward and backward of a fresh model, plain or checkpointed: the
-- activation category's peak and the gradients.
function tricks.checkpoint_step(model_name, checkpoint, batch)
  local model, x, target = tricks.setup(model_name, nil, batch)
  lt.gc()
  lt.memory.reset_peak(DEV)
  tricks.train_step(model, x, target, nil, checkpoint and tricks.checkpointed(model_name) or nil)
  local grads = {}
  for i, p in ipairs(model:parameters()) do grads[i] = p.grad end
  return lt.memory.stats(DEV).by_category.activation.peak, grads
end

technique {
  id = "checkpoint", name = "checkpointing", models = { "cnn", "mlp" },
  explain = "nn.checkpoint_sequential (MLP: 4 segments, CNN: one per child) keeps segment inputs, recomputes the rest",
  measure = function(model_name)
    local without, _, activations_plain = training_peak(model_name, {})
    local with, _, activations_checkpointed = training_peak(model_name, {}, nil, {
      step = function(model, x, target, opt)
        return tricks.train_step(model, x, target, opt, tricks.checkpointed(model_name))
      end,
    })
    local model = tricks.setup(model_name)
    local ranges = step_theory.checkpoint_ranges(model, tricks.checkpoint_segments(model_name, model))
    return without, with, { activations_plain = activations_plain, activations_checkpointed = activations_checkpointed,
      theory_without = tricks.theory_peak(model_name, {}),
      theory_with = tricks.theory_peak(model_name, {}, 0, { segments = ranges }) }
  end,
  theory = timeline_theory,
}

-- ---- the table ----

-- Every technique (or those of the list given) on every model it applies
-- to: a list of rows {technique, model, without, with, details, explain}.
function tricks.measure_all(list)
  local rows = {}
  for _, t in ipairs(list or techniques) do
    for _, model_name in ipairs(t.models) do
      local without, with, details = t.measure(model_name)
      rows[#rows + 1] = {
        technique = t.name, model = tricks.MODEL_NAMES[model_name], without = without, with = with,
        details = details, explain = t.explain, theory = t.theory and t.theory(model_name, details),
      }
    end
  end
  return rows
end

local function mib(bytes) return ("%.2f MiB"):format(bytes / 2 ^ 20) end

local function saving(row)
  local saved = row.without - row.with
  local percent = row.without > 0 and 100 * saved / row.without or 0
  return ("%s (%.0f%%)"):format(mib(saved), percent)
end

local HEADER = { "technique", "model", "peak without", "peak with", "saving", "theory" }

local function theory(row)
  if row.theory == nil then return "-" end
  local percent = row.without > 0 and 100 * row.theory / row.without or 0
  return ("%s (%.0f%%)"):format(mib(row.theory), percent)
end

local function cells(row)
  return { row.technique, row.model, mib(row.without), mib(row.with), saving(row), theory(row) }
end

-- An aligned text table, each row followed by its explanation.
function tricks.format_text(rows)
  local widths = {}
  for i, h in ipairs(HEADER) do widths[i] = #h end
  for _, row in ipairs(rows) do
    for i, c in ipairs(cells(row)) do widths[i] = math.max(widths[i], utf8.len(c)) end
  end
  local function line(cs)
    local parts = {}
    for i, c in ipairs(cs) do
      local pad = (" "):rep(widths[i] - utf8.len(c))
      parts[i] = i <= 2 and c .. pad or pad .. c -- text left, figures right
    end
    return table.concat(parts, "  ")
  end
  local out = { line(HEADER) }
  local rule = {}
  for i, w in ipairs(widths) do rule[i] = ("-"):rep(w) end
  out[#out + 1] = table.concat(rule, "  ")
  for _, row in ipairs(rows) do
    out[#out + 1] = line(cells(row))
    out[#out + 1] = "    " .. row.explain
  end
  return table.concat(out, "\n")
end

-- The same table in Markdown, the explanation as a last column.
function tricks.format_markdown(rows)
  local out = {
    "| " .. table.concat(HEADER, " | ") .. " | why |",
    "|---|---|---:|---:|---:|---:|---|",
  }
  for _, row in ipairs(rows) do
    local cs = cells(row)
    cs[1] = cs[1]:gsub("<", "&lt;"):gsub("|", "\\|")
    cs[#cs + 1] = row.explain:gsub("|", "\\|")
    out[#out + 1] = "| " .. table.concat(cs, " | ") .. " |"
  end
  return table.concat(out, "\n")
end

return tricks
