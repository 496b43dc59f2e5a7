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
-- optional) and epoch to path; with parts.write == false only gathers them
-- (the ranks of a distributed run all take part in a sharded optimizer's
-- state_dict, and rank 0 alone writes).
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
  if parts.write ~= false then core.save(path, tensors, {metadata = meta}) end
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
-- opts.progress (a label, e.g. "eval") draws a bar over the batches whose
-- final line shows the test loss and accuracy. Returns the accuracy, the mean
-- loss (0 without loss_fn) and the seconds it took.
function training.evaluate(model, loader, prepare, loss_fn, device, opts)
  local lt = require "lt"
  opts = opts or {}
  local started = core.clock()
  local bar = opts.progress and require("lt.progress").new(#loader, {desc = opts.progress, unit = "batch"})
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
      if bar then bar:update(1) end
    end
  end)
  model:train(was_training)
  local accuracy, loss = 0 / 0, 0 / 0
  if seen > 0 then accuracy, loss = correct:item() / seen, loss_sum and loss_sum:item() / seen or 0.0 end
  if bar then
    local shown = {{"test accuracy", accuracy}}
    if loss_fn then table.insert(shown, 1, {"test loss", loss}) end
    bar:set_postfix(shown)
    bar:close()
  end
  return accuracy, loss, core.clock() - started
end

-- The options every Fashion-MNIST recipe takes, after the recipe's own.
function training.fashion_options(own)
  local spec = {
    {"batch_size", 128, "examples per step", min = 1},
    {"threads", 0, "threads to compute with; the default, 0, uses all cores", min = 0},
    {"checkpoint", "", "save model, optimizer, schedule and RNG to FILE after every epoch", arg = "FILE"},
    {"resume", false, "continue from --checkpoint"},
    {"limit", 0, "a quick run: train on the first N training images and evaluate on the first N test"
      .. " images (of 60000 and 10000); the default, 0, uses all", min = 0},
    {"seed", 1, "random seed (initialisation and shuffling)"},
    {"data", "/usr/share/datasets/fashion-mnist", "directory of the Fashion-MNIST IDX files", arg = "DIR"},
    {"device", "", "cpu, cuda or cuda:N; by default lt's --device, else cpu", arg = "DEVICE"},
    {"metrics", "", "write the metrics to FILE as JSON lines: one per --log_every steps (batch loss,"
      .. " learning rate, memory) and one per epoch (epoch mean loss, test loss and accuracy)", arg = "FILE"},
    {"log_every", 10, "steps between two step lines of --metrics and --plot", min = 1},
    {"plot", "", "write loss, accuracy, learning-rate and memory charts to FILE, one HTML page"
      .. " (rewritten after every epoch)", arg = "FILE"},
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
  if opts.device and opts.device ~= "" then
    -- Checked here, where a recipe first asks, so that a wrong --device is
    -- a usage error and not a traceback from model:to.
    local index = opts.device:match("^cuda:(%d+)$")
    if opts.device ~= "cpu" and opts.device ~= "cuda" and not index then
      usage_error(("--device must be cpu, cuda or cuda:N, got '%s'"):format(opts.device))
    end
    if opts.device ~= "cpu" then
      local count = core.cuda.is_available() and core.cuda.device_count() or 0
      if count == 0 then usage_error(("--device %s: CUDA is not available here"):format(opts.device)) end
      if index and tonumber(index) >= count then
        usage_error(("--device %s: there are %d CUDA devices (cuda:0 to cuda:%d)"):format(opts.device, count, count - 1))
      end
    end
    return opts.device
  end
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
  local function read(split)
    local ok, x, y = pcall(lt.data.fashion_mnist, split, {dir = opts.data})
    -- A missing file is the command line's mistake (--data), said without a
    -- traceback; anything else (a damaged file) stays an error with one.
    if not ok and tostring(x):find("not found", 1, true) then
      local message = tostring(x):gsub("^.-fashion_mnist: ", ""):gsub(" or pass {dir=%.%.%.}", "")
      usage_error("--data " .. tostring(opts.data) .. ": " .. message)
    end
    if not ok then error(x, 0) end
    return x, y
  end
  local train_x, train_y = read("train")
  local test_x, test_y = read("test")
  -- --limit N: the first N of each set (all of a smaller one), the test set
  -- too, so that a quick run is quick to the end.
  if opts.limit > 0 then
    local function first(x, y)
      local n = math.min(opts.limit, x:size(1))
      return x:narrow(1, 1, n), y:narrow(1, 1, n)
    end
    train_x, train_y = first(train_x, train_y)
    test_x, test_y = first(test_x, test_y)
  end
  local pin = training.device(opts) ~= "cpu"
  -- distributed (recipes/distributed.lua): this rank's share of each epoch.
  local train = lt.data.DataLoader({train_x, train_y},
    {batch_size = opts.batch_size, shuffle = true, seed = opts.seed, pin_memory = pin, distributed = opts.distributed})
  local test = lt.data.DataLoader({test_x, test_y}, {batch_size = 1000, pin_memory = pin})
  return train, test
end

-- The memory options of the recipes, after their own (see training.fit).
function training.memory_options(own)
  local spec = table.move(own, 1, #own, 1, {})
  spec[#spec + 1] = {"amp", "", "mixed precision: bf16 (autocast) or fp16 (autocast and a GradScaler)",
    arg = "bf16|fp16", choices = {"bf16", "fp16"}}
  spec[#spec + 1] = {"checkpoint_segments", 0, "recompute activations in N checkpointed segments;"
    .. " the default, 0, keeps them", min = 0}
  spec[#spec + 1] = {"accum", 1, "split each batch into K micro-batches whose gradients accumulate;"
    .. " auto: the batch whole, split in twice as many on out of memory", words = {"auto"}, arg = "K|auto", min = 1}
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
-- A recipe whose model is not a classifier over a Sequential gives
-- opts.loss_of(xb, yb) -> the micro-batch's mean loss (it then handles
-- checkpoint_segments itself); opts.max_grad_norm clips the gradients'
-- norm (nn.utils.clip_grad_norm_, after the GradScaler's unscale_) before
-- the step.
local function train_step(model, optimizer, x, labels, opts, scaler)
  local lt = require "lt"
  local F = lt.nn.functional
  local segments = opts.checkpoint_segments or 0
  local dtype = AMP_DTYPES[opts.amp or ""]
  local device_type = x.device == "cpu" and "cpu" or "cuda"
  local loss_of = opts.loss_of or function(xb, yb)
    -- The Sequential itself (inside DistributedDataParallel, whose hooks
    -- still average the gradients in the recomputing backward).
    local logits = segments > 0 and lt.nn.checkpoint_sequential(opts.module or model, segments, xb) or model(xb)
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
  if opts.max_grad_norm and opts.max_grad_norm > 0 then
    if scaler then scaler:unscale_(optimizer) end
    local norm = lt.nn.utils.clip_grad_norm_(model:parameters(), opts.max_grad_norm)
    if lt.is_tensor(norm) then norm:free() end
  end
  if scaler then
    scaler:step(optimizer)
    scaler:update()
  else
    optimizer:step()
  end
  return mean_loss
end

-- ---- the metrics log (--metrics, --plot) ----
--
-- One JSON object a line (lt.json.encode), "kind" first:
--   start: the run: recipe, device, epochs, steps_per_epoch, batch_size,
--          train_examples, test_examples, first_epoch, lt_version, date,
--          options (the command line's values)
--   step:  every --log_every steps: step (counted over the whole run, from
--          1), epoch, batch_loss (that step's mean loss), lr, time (seconds
--          since the run started), memory_allocated, memory_reserved and
--          memory_max_allocated (bytes on the training device, lt.memory's)
--   epoch: after each epoch's evaluation: step (the epoch's last), epoch,
--          epoch_mean_loss, test_loss, test_accuracy, lr (the rate the
--          epoch trained at), train_seconds, eval_seconds, time and the
--          memory figures
-- lt.plot draws the same records.

local KEY_ORDER = {"kind", "step", "epoch"}

local MetricsLog = {}
MetricsLog.__index = MetricsLog

-- Whether path can be written, found before any training: a typo in a
-- directory would otherwise end a long run at its first epoch. Leaves the
-- file as it was (made and removed when it was not there).
local function check_writable(option, path)
  local existing = io.open(path, "r")
  if existing then
    existing:close()
    local f, err = io.open(path, "a")
    if not f then usage_error(("--%s: %s"):format(option, err)) end
    f:close()
    return
  end
  local f, err = io.open(path, "w")
  if not f then usage_error(("--%s: %s"):format(option, err)) end
  f:close()
  os.remove(path)
end

-- The records of an earlier run's log up to and including `epoch`: what a
-- resumed run keeps (steps past the checkpoint were trained again).
local function earlier_records(path, epoch)
  local json = require "lt.json"
  local f = io.open(path, "r")
  if not f then return {} end
  local kept, number = {}, 0
  for line in f:lines() do
    number = number + 1
    if line:find("%S") then
      local ok, record = pcall(json.decode, line, ("%s:%d"):format(path, number))
      -- A run killed while writing leaves a cut last line: skipped.
      if ok and type(record) == "table" and (record.kind == "start" or (tonumber(record.epoch) or 0) <= epoch) then
        kept[#kept + 1] = record
      end
    end
  end
  f:close()
  return kept
end

-- A log for this run, or nil when neither --metrics nor --plot asks for one.
-- run: device, epochs, first_epoch, steps_per_epoch, train, test.
function training.metrics_log(opts, run)
  local metrics = opts.metrics ~= nil and opts.metrics ~= "" and opts.metrics or nil
  local plot = opts.plot ~= nil and opts.plot ~= "" and opts.plot or nil
  if not metrics and not plot then return nil end
  local log = setmetatable({records = {}, device = run.device, plot_path = plot, started = core.clock(),
    log_every = opts.log_every or 10}, MetricsLog)
  if plot then check_writable("plot", plot) end
  if metrics then
    local json = require "lt.json"
    -- A resumed run continues its log: the lines up to the checkpoint's
    -- epoch are kept (written back whole), the rest trained again.
    if opts.resume then log.records = earlier_records(metrics, run.first_epoch - 1) end
    local f, err = io.open(metrics, "w")
    if not f then usage_error("--metrics: " .. err) end
    for _, record in ipairs(log.records) do f:write(json.encode(record, {order = KEY_ORDER}), "\n") end
    f:setvbuf("line")
    log.file = f
  end
  local options = {}
  for k, v in pairs(opts) do
    local t = type(v)
    if t == "number" or t == "string" or t == "boolean" then options[k] = v end
  end
  local args = rawget(_G, "arg")
  log:write({kind = "start", recipe = type(args) == "table" and args[-1] and args[0] or nil,
    device = run.device, epochs = opts.epochs, first_epoch = run.first_epoch,
    steps_per_epoch = run.steps_per_epoch, batch_size = opts.batch_size,
    train_examples = run.train and run.train.size or nil, test_examples = run.test and run.test.size or nil,
    lt_version = core.version, date = os.date("!%Y-%m-%dT%H:%M:%SZ"), options = options})
  return log
end

function MetricsLog:memory(record)
  local memory = core.memory
  record.memory_allocated = memory.allocated(self.device)
  record.memory_reserved = memory.reserved(self.device)
  record.memory_max_allocated = memory.max_allocated(self.device)
  return record
end

function MetricsLog:write(record)
  self.records[#self.records + 1] = record
  if self.file then self.file:write(require("lt.json").encode(record, {order = KEY_ORDER}), "\n") end
end

-- Whether global step `step` is one to log: the first, then every log_every.
function MetricsLog:wants(step) return step == 1 or step % self.log_every == 0 end

-- Six significant digits (a float32 loss has about seven; the log is read by
-- people too), milliseconds for times.
local function round(v, digits)
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then return v end
  return tonumber(string.format("%." .. (digits or 6) .. "g", v))
end
local function seconds(t) return math.floor(t * 1000 + 0.5) / 1000 end

function MetricsLog:step(step, epoch, batch_loss, lr)
  self:write(self:memory({kind = "step", step = step, epoch = epoch, batch_loss = round(batch_loss), lr = lr,
    time = seconds(core.clock() - self.started)}))
end

-- The epoch's record; rewrites the plot, so that a long run can be watched.
function MetricsLog:epoch(record)
  record.kind = "epoch"
  for _, k in ipairs {"epoch_mean_loss", "test_loss", "test_accuracy"} do record[k] = round(record[k]) end
  for _, k in ipairs {"train_seconds", "eval_seconds"} do record[k] = record[k] and seconds(record[k]) end
  record.time = seconds(core.clock() - self.started)
  self:write(self:memory(record))
  if self.plot_path then require("lt.plot")(self.records, self.plot_path) end
end

function MetricsLog:close()
  if self.file then self.file:close() end
  self.file = nil
end

-- The training loop of the recipes: epochs of shuffled batches with a progress
-- bar, then the test set's loss and accuracy with a bar of their own ("eval"),
-- a checkpoint after each epoch when asked, resuming from one.
-- opts.scheduler (optional) steps once per epoch.
-- The memory options (training.memory_options; all off by default): opts.amp
-- ("bf16" | "fp16"), opts.checkpoint_segments (N > 0), opts.accum (K > 1 or
-- "auto").
-- opts.metrics (a file of JSON lines), opts.plot (an HTML page) and
-- opts.log_every (steps between step records, 10): see the metrics log above.
-- Batches move to training.device(opts), where the model must already be
-- (model:to(training.device(opts)) before the optimizer is made).
-- Prints "test accuracy 0.XXXX" last; returns it.
-- A distributed run (recipes/distributed.lua) gives opts.rank and
-- opts.module (the bare model inside DistributedDataParallel): every rank
-- trains, rank 0 alone evaluates opts.module and writes the metrics and the
-- checkpoint (of opts.module, so that it loads into a single-process run too).
function training.fit(model, optimizer, train, test, opts)
  local net = opts.module or model
  local main = (opts.rank or 0) == 0
  local progress = require "lt.progress"
  local cross_entropy = require("lt.nn").functional.cross_entropy
  local prepare = opts.prepare or training.fashion_prepare
  local device = training.device(opts)
  if opts.amp and opts.amp ~= "" and not AMP_DTYPES[opts.amp] then
    usage_error(("--amp must be bf16 or fp16, got '%s'"):format(opts.amp))
  end
  if opts.accum and opts.accum ~= "auto" and (math.type(opts.accum) ~= "integer" or opts.accum < 1) then
    usage_error(("--accum must be a positive integer or auto, got %s"):format(tostring(opts.accum)))
  end
  if opts.resume then
    if opts.checkpoint == "" then usage_error("--resume needs --checkpoint FILE") end
    local f = io.open(opts.checkpoint, "r")
    if not f then usage_error(("--resume: there is no checkpoint at %s"):format(opts.checkpoint)) end
    f:close()
  end
  if opts.checkpoint ~= "" and not opts.estimate then check_writable("checkpoint", opts.checkpoint) end
  -- float16's range needs loss scaling; bfloat16 has float32's.
  local scaler = opts.amp == "fp16" and require("lt.amp").GradScaler() or nil
  local first_epoch = 1
  if opts.resume then
    first_epoch = training.load_checkpoint(opts.checkpoint,
      {model = net, optimizer = optimizer, scheduler = opts.scheduler, scaler = scaler}) + 1
    print(("resumed from %s after epoch %d"):format(opts.checkpoint, first_epoch - 1))
  end
  if opts.estimate then return training.print_estimate(model, optimizer, train, opts, scaler) end
  local steps_per_epoch = #train
  local log = main and training.metrics_log(opts, {device = device, first_epoch = first_epoch,
    steps_per_epoch = steps_per_epoch, train = train, test = test}) or nil
  -- "eval" padded to the width of "epoch 10/10", so that the bars line up.
  local width = #("epoch %d/%d"):format(opts.epochs, opts.epochs)
  local eval_label = ("%-" .. width .. "s"):format("eval")
  local accuracy
  for epoch = first_epoch, opts.epochs do
    core.memory.mark("epoch " .. epoch) -- for the memory report; nothing when not recording
    model:train()
    -- The rate this epoch trains at (the schedule steps after it).
    local lr = optimizer.param_groups[1].lr
    local bar = progress.new(steps_per_epoch, {desc = ("epoch %d/%d"):format(epoch, opts.epochs), unit = "batch"})
    local loss_sum, steps, shown = nil, 0, nil
    -- On a GPU the loss is read (a wait for the step to finish) every
    -- LOSS_READ_EVERY steps only (and for the log's steps), so that the host
    -- queues the next steps while the device runs; on the CPU reading costs
    -- nothing.
    local read_every = device == "cpu" and 1 or LOSS_READ_EVERY
    train:set_epoch(epoch)
    for images, labels in require("lt.data").prefetch(train:iter(), device) do
      local l = train_step(model, optimizer, prepare(images), labels, opts, scaler)
      loss_sum, steps = loss_sum and loss_sum + l or l, steps + 1
      local step = (epoch - 1) * steps_per_epoch + steps
      local logged = log and log:wants(step)
      if logged or steps % read_every == 0 or steps == 1 then shown = l:item() end
      -- The last batch's loss while the epoch runs; its mean at the end,
      -- under its own name.
      bar:update(1, {["batch loss"] = shown})
      if logged then log:step(step, epoch, shown, lr) end
    end
    local mean_loss = loss_sum and loss_sum:item() / steps or 0 / 0
    bar:set_postfix({["epoch mean loss"] = mean_loss, lr = lr})
    local train_seconds = bar:close()
    core.memory.mark("evaluate")
    local test_loss, eval_seconds
    if main then
      accuracy, test_loss, eval_seconds = training.evaluate(net, test, prepare, cross_entropy, device,
        {progress = eval_label})
    end
    core.memory.mark("evaluated")
    if log then
      log:epoch({step = epoch * steps_per_epoch, epoch = epoch, epoch_mean_loss = mean_loss,
        test_loss = test_loss, test_accuracy = accuracy, lr = lr,
        train_seconds = train_seconds, eval_seconds = eval_seconds})
    end
    if opts.scheduler then opts.scheduler:step() end
    if opts.checkpoint ~= "" then
      training.save_checkpoint(opts.checkpoint, {model = net, optimizer = optimizer, scheduler = opts.scheduler,
        scaler = scaler, epoch = epoch, write = main})
    end
  end
  if log then log:close() end
  if not main then return nil end
  accuracy = accuracy or training.evaluate(net, test, prepare, nil, device, {progress = eval_label})
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
