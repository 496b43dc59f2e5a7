-- What the training recipes share: evaluation and resumable checkpoints.
--
-- A checkpoint is one safetensors file (lt.save): the model's state_dict under
-- "model.<name>" (PyTorch's names: container children from 0), the
-- optimizer's state tensors under "optim.<index>.<buffer>", and in the
-- metadata the epoch, lt's RNG state and the optimizer's (and scheduler's
-- and GradScaler's) scalar state, serialised as Lua table constructors.
-- Loading it restores all of these, so a resumed run continues exactly as an
-- uninterrupted one would.

local raise = require "lt.user_error"
local core = require "lt.core"
local usage_error = require("lt.recipes.cli").usage_error

local training = {}

-- Serialises a tree of numbers, strings and booleans (optimizer groups,
-- scheduler state) as a Lua constructor; integers and floats round-trip exactly.
local function serialise(v)
  local t = type(v)
  if t == "number" then
    if math.type(v) == "integer" then return string.format("%d", v) end
    if v ~= v then return "0/0" end
    if v == math.huge then return "math.huge" elseif v == -math.huge then return "-math.huge" end
    return string.format("%.17g", v)
  elseif t == "string" then
    return string.format("%q", v)
  elseif t == "boolean" then
    return tostring(v)
  elseif t == "table" then
    local parts, keys = {}, {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b)
      if type(a) == type(b) then return a < b end
      return type(a) == "number"
    end)
    for _, k in ipairs(keys) do
      local key = type(k) == "number" and ("[" .. serialise(k) .. "]") or ("[" .. string.format("%q", k) .. "]")
      parts[#parts + 1] = key .. "=" .. serialise(v[k])
    end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  raise("training: cannot save a value of type " .. t .. " in a checkpoint")
end

local function deserialise(text, what)
  local chunk, err = load("return " .. text, "=" .. what, "t", {math = {huge = math.huge}})
  if not chunk then raise("training: corrupt checkpoint field " .. what .. ": " .. err) end
  return chunk()
end

-- Writes model, optimizer, scheduler and scaler (a GradScaler; all three
-- optional) and epoch to path.
function training.save_checkpoint(path, parts)
  local tensors, meta = {}, {epoch = tostring(parts.epoch or 0), rng = core.get_rng_state()}
  for name, t in pairs(parts.model:state_dict()) do tensors["model." .. name] = t end
  if parts.optimizer then
    local sd = parts.optimizer:state_dict()
    local scalars = {}
    for index, state in pairs(sd.state) do
      local s = {}
      for key, value in pairs(state) do
        if core.is_tensor(value) then tensors[("optim.%d.%s"):format(index, key)] = value
        else s[key] = value end
      end
      scalars[index] = s
    end
    meta.optim_state = serialise(scalars)
    meta.optim_groups = serialise(sd.param_groups)
  end
  if parts.scheduler then
    meta.scheduler = serialise(parts.scheduler:state_dict())
    meta.scheduler_class = getmetatable(parts.scheduler).name
  end
  if parts.scaler then meta.scaler = serialise(parts.scaler:state_dict()) end
  core.save(path, tensors, {metadata = meta})
end

-- Restores what save_checkpoint wrote into the given model/optimizer/
-- scheduler/scaler and lt's RNG; returns the saved epoch. A scaler whose
-- checkpoint has no scaler state (written without --amp fp16) keeps its own.
function training.load_checkpoint(path, parts)
  local tensors, meta = core.load(path)
  local class = parts.scheduler and getmetatable(parts.scheduler).name
  if class and meta.scheduler_class and meta.scheduler_class ~= class then
    -- Checked before anything is restored: a refused resume changes nothing.
    raise(("training: %s holds a %s schedule, this run has a %s"):format(path, meta.scheduler_class, class))
  end
  local model_sd = {}
  for name, t in pairs(tensors) do
    local key = name:match("^model%.(.+)$")
    if key then model_sd[key] = t end
  end
  parts.model:load_state_dict(model_sd)
  if parts.optimizer then
    if not meta.optim_state then raise("training: " .. path .. " holds no optimizer state") end
    local state = deserialise(meta.optim_state, "optim_state")
    for name, t in pairs(tensors) do
      local index, key = name:match("^optim%.(%d+)%.(.+)$")
      if index then
        index = math.tointeger(tonumber(index))
        state[index] = state[index] or {}
        state[index][key] = t
      end
    end
    parts.optimizer:load_state_dict({state = state, param_groups = deserialise(meta.optim_groups, "optim_groups")})
  end
  if parts.scheduler and meta.scheduler then
    -- The run's own schedule (its length from --epochs) continues from the
    -- saved epoch: the old one may have annealed the rate to 0.
    local differ = parts.scheduler:load_state_dict(deserialise(meta.scheduler, "scheduler"), {keep_options = true})
    for key, saved in pairs(differ) do
      print(("resume: the checkpoint's %s had %s %s; continuing with this run's %s %s from epoch %d")
        :format(class, key, tostring(saved), key, tostring(parts.scheduler[key]), parts.scheduler.last_epoch))
    end
  end
  if parts.scaler and meta.scaler then
    local sd = deserialise(meta.scaler, "scaler")
    if next(sd) ~= nil then parts.scaler:load_state_dict(sd) end
  end
  core.set_rng_state(meta.rng)
  return math.tointeger(tonumber(meta.epoch)) or 0
end

-- sum + t, freeing both (every temporary evaluate makes is freed at once
-- rather than left for the collector).
local function accumulate(sum, t)
  if sum == nil then return t end
  local new = sum + t
  sum:free()
  t:free()
  return new
end

-- Accuracy and mean loss of model over loader, without a graph. prepare turns
-- a batch's images into the model's input; batches move to device (default
-- the CPU). The counts add up on the device and are read once at the end, so
-- that a GPU runs the batches without waiting for the host in between.

function training.evaluate(model, loader, prepare, loss_fn, device)
  local lt = require "lt"
  local was_training = model.training
  model:eval()
  local correct, seen, loss_sum = nil, 0, nil
  lt.no_grad(function()
    for images, labels in lt.data.prefetch(loader:iter(), device) do
      local logits = model(prepare(images))
      local n = labels:size(1)
      if loss_fn then
        local loss = loss_fn(logits, labels)
        local wide = loss:double()
        local batch_loss = wide * n
        if not rawequal(wide, loss) then wide:free() end
        loss_sum = accumulate(loss_sum, batch_loss)
      end
      local predicted = logits:argmax(2)
      local equal = predicted:eq(labels)
      local hits = equal:sum()
      predicted:free()
      equal:free()
      correct = accumulate(correct, hits)
      seen = seen + n
    end
  end)
  model:train(was_training)
  if seen == 0 then return 0 / 0, 0 / 0 end
  return correct:item() / seen, loss_sum and loss_sum:item() / seen or 0.0
end

-- The options every Fashion-MNIST recipe takes, after the recipe's own.
function training.fashion_options(own)
  local spec = {
    {"batch_size", 128, "examples per step"},
    {"threads", 0, "threads (0: all cores)"},
    {"checkpoint", "", "file to save model and optimizer to after every epoch"},
    {"resume", false, "continue from --checkpoint"},
    {"limit", 0, "train on the first N images only (0: all)"},
    {"seed", 1, "random seed (initialisation and shuffling)"},
    {"data", "/usr/share/datasets/fashion-mnist", "directory of the Fashion-MNIST IDX files"},
    {"device", "", "cpu, cuda or cuda:N (default: lt's --device, else cpu)"},
    {"estimate", false, "print the predicted peak memory of the first two training steps"
      .. " (lt.memory.estimate: nothing allocated) and exit"},
  }
  for i = #own, 1, -1 do table.insert(spec, 1, own[i]) end
  return spec
end

-- The device a recipe trains on: --device, else lt's (`lt --device cuda`),
-- else the CPU.
function training.device(opts)
  local lt = require "lt"
  if opts.device and opts.device ~= "" then return opts.device end
  return lt.default_device or "cpu"
end

-- uint8 pixels to the normalised float input (Fashion-MNIST's mean and std).
function training.fashion_prepare(images)
  return images:float():div_(255):sub_(0.2860):div_(0.3530)
end

-- Seeds lt, sets threads and returns the train and test loaders; batches for
-- a GPU come in pinned memory, so that their copies run asynchronously.
function training.fashion_loaders(opts)
  local lt = require "lt"
  if opts.threads > 0 then lt.set_num_threads(opts.threads) end
  lt.manual_seed(opts.seed)
  local train_x, train_y = lt.data.fashion_mnist("train", {dir = opts.data})
  local test_x, test_y = lt.data.fashion_mnist("test", {dir = opts.data})
  if opts.limit > 0 then
    train_x, train_y = train_x:narrow(1, 1, opts.limit), train_y:narrow(1, 1, opts.limit)
  end
  local pin = training.device(opts) ~= "cpu"
  local train = lt.data.DataLoader({train_x, train_y},
    {batch_size = opts.batch_size, shuffle = true, seed = opts.seed, pin_memory = pin})
  local test = lt.data.DataLoader({test_x, test_y}, {batch_size = 1000, pin_memory = pin})
  return train, test
end

-- The memory options of the recipes, after their own (see training.fit).
function training.memory_options(own)
  local spec = table.move(own, 1, #own, 1, {})
  spec[#spec + 1] = {"amp", "", "mixed precision: bf16 (autocast) or fp16 (autocast and a GradScaler)"}
  spec[#spec + 1] = {"checkpoint_segments", 0, "recompute activations in N checkpointed segments (0: off)"}
  spec[#spec + 1] = {"accum", 1, "split each batch into K micro-batches whose gradients accumulate"
    .. " (auto: whole, twice as many on out of memory)", words = {"auto"}}
  return spec
end

local AMP_DTYPES = {bf16 = "bfloat16", fp16 = "float16"}
-- Steps between two reads of the loss for the progress bar on a GPU.
local LOSS_READ_EVERY = 20

-- One optimizer step over a batch: the forward (checkpointed in segments when
-- asked) under autocast when asked, over `accum` micro-batches (a count, or
-- "auto": as many as it takes to fit, see lt.microbatch) whose losses are
-- weighted by their share of the batch, so the accumulated gradient is the
-- full batch's; with fp16 the loss is scaled and the step skipped on
-- inf/NaN. Returns the batch's mean loss as a float32 0-dim tensor on the
-- batch's device, detached (it keeps no graph alive): reading it is the
-- caller's choice, since on a GPU every read waits for the step.
local function train_step(model, optimizer, x, labels, opts, scaler)
  local lt = require "lt"
  local F = lt.nn.functional
  local segments = opts.checkpoint_segments or 0
  local dtype = AMP_DTYPES[opts.amp or ""]
  local device_type = x.device == "cpu" and "cpu" or "cuda"
  local function loss_of(xb, yb)
    local logits = segments > 0 and lt.nn.checkpoint_sequential(model, segments, xb) or model(xb)
    return F.cross_entropy(logits, yb)
  end
  local function step_loss(xb, yb)
    if dtype then return lt.autocast({dtype = dtype, device_type = device_type}, loss_of, xb, yb) end
    return loss_of(xb, yb)
  end
  optimizer:zero_grad()
  -- The count that fits is remembered per model.
  local mean_loss = lt.microbatch(step_loss, {x, labels},
    {chunks = opts.accum or 1, params = model, key = model, scaler = scaler})
  if mean_loss.dtype ~= "float32" then
    local wide = mean_loss:float()
    mean_loss:free()
    mean_loss = wide
  end
  if scaler then
    scaler:step(optimizer)
    scaler:update()
  else
    optimizer:step()
  end
  return mean_loss
end

-- The training loop of the recipes: epochs of shuffled batches with a progress
-- bar, test accuracy after each epoch, a checkpoint after each epoch when
-- asked, resuming from one. opts.scheduler (optional) steps once per epoch.
-- The memory options (training.memory_options; all off by default): opts.amp
-- ("bf16" | "fp16"), opts.checkpoint_segments (N > 0), opts.accum (K > 1 or
-- "auto").
-- Batches move to training.device(opts), where the model must already be
-- (model:to(training.device(opts)) before the optimizer is made).
-- Prints "test accuracy 0.XXXX" last; returns it.
function training.fit(model, optimizer, train, test, opts)
  local progress = require "lt.progress"
  local prepare = opts.prepare or training.fashion_prepare
  local device = training.device(opts)
  if opts.amp and opts.amp ~= "" and not AMP_DTYPES[opts.amp] then
    usage_error(("--amp must be bf16 or fp16, got '%s'"):format(opts.amp))
  end
  if opts.accum and opts.accum ~= "auto" and (math.type(opts.accum) ~= "integer" or opts.accum < 1) then
    usage_error(("--accum must be a positive integer or auto, got %s"):format(tostring(opts.accum)))
  end
  -- float16's range needs loss scaling; bfloat16 has float32's.
  local scaler = opts.amp == "fp16" and require("lt.amp").GradScaler() or nil
  local first_epoch = 1
  if opts.resume then
    if opts.checkpoint == "" then usage_error("--resume needs --checkpoint FILE") end
    first_epoch = training.load_checkpoint(opts.checkpoint,
      {model = model, optimizer = optimizer, scheduler = opts.scheduler, scaler = scaler}) + 1
    print(("resumed from %s after epoch %d"):format(opts.checkpoint, first_epoch - 1))
  end
  if opts.estimate then return training.print_estimate(model, optimizer, train, opts, scaler) end
  local accuracy
  for epoch = first_epoch, opts.epochs do
    core.memory.mark("epoch " .. epoch) -- for the memory report; nothing when not recording
    model:train()
    local bar = progress.new(#train, {label = ("epoch %d/%d"):format(epoch, opts.epochs)})
    local loss_sum, steps, shown = nil, 0, nil
    -- On a GPU the loss is read (a wait for the step to finish) every
    -- LOSS_READ_EVERY steps only, so that the host queues the next steps
    -- while the device runs; on the CPU reading costs nothing.
    local read_every = device == "cpu" and 1 or LOSS_READ_EVERY
    train:set_epoch(epoch)
    for images, labels in require("lt.data").prefetch(train:iter(), device) do
      local l = train_step(model, optimizer, prepare(images), labels, opts, scaler)
      loss_sum, steps = loss_sum and loss_sum + l or l, steps + 1
      if steps % read_every == 0 or steps == 1 then shown = l:item() end
      bar:step({loss = shown})
    end
    core.memory.mark("evaluate")
    accuracy = training.evaluate(model, test, prepare, nil, device)
    core.memory.mark("evaluated")
    bar:finish({loss = loss_sum and loss_sum:item() / steps or 0 / 0, ["test acc"] = accuracy})
    if opts.scheduler then opts.scheduler:step() end
    if opts.checkpoint ~= "" then
      training.save_checkpoint(opts.checkpoint,
        {model = model, optimizer = optimizer, scheduler = opts.scheduler, scaler = scaler, epoch = epoch})
    end
  end
  accuracy = accuracy or training.evaluate(model, test, prepare, nil, device)
  print(("test accuracy %.4f"):format(accuracy))
  return accuracy
end

local function mib(bytes) return ("%.1f MiB"):format(bytes / 2 ^ 20) end

-- --estimate: the first two steps of an epoch (the second has the gradients
-- and optimizer state the first made) under lt.memory.estimate, their
-- batches taken from the loader inside it; prints the peak by category and,
-- under a memory limit, whether it fits. Returns the estimate.
function training.print_estimate(model, optimizer, train, opts, scaler)
  local prepare = opts.prepare or training.fashion_prepare
  local device = training.device(opts)
  model:train()
  train:set_epoch(1)
  local est = core.memory.estimate(function()
    local batches = require("lt.data").prefetch(train:iter(), device)
    for _ = 1, 2 do
      local images, labels = batches()
      if images == nil then break end
      train_step(model, optimizer, prepare(images), labels, opts, scaler)
    end
  end)
  local parts = {}
  for _, cat in ipairs {"parameter", "gradient", "optimizer", "activation", "other", "workspace"} do
    if (est.by_category[cat] or 0) > 0 then parts[#parts + 1] = ("%s %s"):format(cat, mib(est.by_category[cat])) end
  end
  print(("estimated peak of a training step on %s (batch %d): %s, of which %s held before it (model, data);"
    .. " at the peak: %s; reserved %s"):format(est.device, opts.batch_size, mib(est.peak), mib(est.baseline),
    table.concat(parts, ", "), mib(est.reserved)))
  if est.limit then
    print(est.fits and ("fits under the limit of %s"):format(mib(est.limit))
      or ("does not fit under the limit of %s: %s"):format(mib(est.limit), est.oom))
  end
  return est
end

training.train_step = train_step -- lt.memory.estimate of a recipe step (tests)
return training
