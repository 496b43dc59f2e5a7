-- A character-level GPT (lt.models.gpt, nanoGPT's model) on a text file:
-- by default Debian's GPL-3 text (/usr/share/common-licenses/GPL-3, 35 KB,
-- on every Debian machine). The vocabulary is the file's sorted distinct
-- characters; the last 10% is held out for the validation loss. AdamW over
-- nanoGPT's weight-decay groups, the rate warmed up linearly then cosine
-- annealed (LinearLR then CosineAnnealingLR in a SequentialLR, stepped every
-- step), gradients clipped at norm 1.0. Prints the validation loss before
-- and after training ("val loss X -> Y" last but the sample), then a sample
-- of generated text.
--   lt scripts/train_gpt.lua                       # about a minute on 2 cores
--   lt scripts/train_gpt.lua --steps 2000 --n_layer 4 --n_embd 128 --block_size 128
--   lt scripts/train_gpt.lua --checkpoint gpt.safetensors [--resume]
--   lt scripts/train_gpt.lua --help
-- Memory options: --amp bf16|fp16 (autocast; fp16 adds a GradScaler),
-- --checkpoint_segments N (the blocks recomputed in backward, in N
-- segments), --accum K (K micro-batches per step, the same gradients; auto:
-- split only on out of memory). The step is lua/lt/recipes/training.lua's.
local lt = lt or require "lt"
local cli, training = require "lt.recipes.cli", require "lt.recipes.training"
local usage_error = cli.usage_error

local PROGRAM = "scripts/train_gpt.lua"
local opts = cli.parse(arg, training.memory_options {
  {"data", "/usr/share/common-licenses/GPL-3", "the text file to learn, character by character", arg = "FILE"},
  {"steps", 600, "optimizer steps", min = 1},
  {"batch_size", 32, "sequences per step", min = 1},
  {"block_size", 64, "context length (characters)", min = 1},
  {"n_layer", 3, "transformer blocks", min = 1},
  {"n_head", 4, "attention heads", min = 1},
  {"n_embd", 96, "embedding width (a multiple of --n_head)", min = 1},
  {"dropout", 0.0, "dropout probability", min = 0},
  {"lr", 3e-3, "peak learning rate", min = 0},
  {"warmup", 30, "steps of linear warm-up (from lr/warmup) before the cosine", min = 0},
  {"min_lr_ratio", 0.1, "the cosine ends at lr * X", min = 0},
  {"weight_decay", 0.1, "AdamW's decay of the 2-D parameters", min = 0},
  {"grad_clip", 1.0, "clip the gradients' norm; 0 turns clipping off", min = 0},
  {"log_every", 100, "steps between two printed loss lines", min = 1},
  {"sample", 300, "characters to generate at the end", min = 0},
  {"temperature", 0.8, "sampling temperature", min = 0},
  {"top_k", 10, "sample among the K likeliest characters; 0: all", min = 0},
  {"checkpoint", "", "save model, optimizer, schedule and RNG to FILE every --checkpoint_every steps"
    .. " and at the end", arg = "FILE"},
  {"checkpoint_every", 200, "steps between two checkpoints", min = 1},
  {"resume", false, "continue from --checkpoint"},
  {"seed", 1, "random seed (initialisation, batches, sampling)"},
  {"threads", 0, "threads to compute with; the default, 0, uses all cores", min = 0},
  {"device", "", "cpu, cuda or cuda:N; by default lt's --device, else cpu", arg = "DEVICE"},
}, PROGRAM)

if opts.n_embd % opts.n_head ~= 0 then
  usage_error(("--n_embd %d must be a multiple of --n_head %d"):format(opts.n_embd, opts.n_head))
end
if opts.dropout >= 1 then usage_error("--dropout must be below 1") end
if opts.temperature <= 0 then usage_error("--temperature must be above 0") end
if opts.resume and opts.checkpoint == "" then usage_error("--resume needs --checkpoint FILE") end
if opts.threads > 0 then lt.set_num_threads(opts.threads) end
local device = training.device(opts)

-- ---- data: characters to ids (1-based), a train and a validation split ----
local f, err = io.open(opts.data, "rb")
if not f then usage_error("--data: " .. err) end
local text = f:read("a")
f:close()
local T = opts.block_size
local seen, chars = {}, {}
for c in text:gmatch(".") do
  if not seen[c] then seen[c] = true; chars[#chars + 1] = c end
end
table.sort(chars)
local stoi = {}
for i, c in ipairs(chars) do stoi[c] = i end
local ids = {}
for c in text:gmatch(".") do ids[#ids + 1] = stoi[c] end
local n_val = #ids // 10
local train_ids, val_ids = table.move(ids, 1, #ids - n_val, 1, {}), table.move(ids, #ids - n_val + 1, #ids, 1, {})
if #train_ids < T + 2 or #val_ids < T + 2 then
  usage_error(("--data %s: %d characters is too short for --block_size %d"):format(opts.data, #ids, T))
end
print(("%s: %d characters, %d distinct; %d to train on, %d held out"):format(opts.data, #ids, #chars,
  #train_ids, #val_ids))

-- A batch of sequences starting at the given 1-based positions of data:
-- x and y (x shifted by one), [B, T] int64 on the device.
local function batch_at(data, starts)
  local x, y = {}, {}
  for b, s in ipairs(starts) do
    local xr, yr = {}, {}
    for t = 1, T do xr[t], yr[t] = data[s + t - 1], data[s + t] end
    x[b], y[b] = xr, yr
  end
  local xt, yt = lt.tensor(x, {dtype = "int64"}), lt.tensor(y, {dtype = "int64"})
  if device ~= "cpu" then xt, yt = xt:to(device), yt:to(device) end
  return xt, yt
end

-- A random training batch (lt's RNG, so a resumed run draws what an
-- uninterrupted one would).
local function train_batch()
  local starts = lt.randint(1, #train_ids - T, {opts.batch_size}):totable()
  return batch_at(train_ids, starts)
end

-- ---- model, optimizer, schedule ----
lt.manual_seed(opts.seed)
local model = lt.models.gpt {vocab_size = #chars, block_size = T, n_layer = opts.n_layer, n_head = opts.n_head,
  n_embd = opts.n_embd, dropout = opts.dropout}
model:to(device)
model.checkpoint_segments = opts.checkpoint_segments
print(("GPT: %d layers, %d heads, %d wide, block %d: %d parameters"):format(opts.n_layer, opts.n_head,
  opts.n_embd, T, model:num_parameters()))
local optimizer = model:configure_optimizers {weight_decay = opts.weight_decay, lr = opts.lr, betas = {0.9, 0.95}}
local sched = lt.optim.lr_scheduler
local warmup = math.min(opts.warmup, opts.steps - 1)
local cosine = sched.CosineAnnealingLR(optimizer, {T_max = math.max(opts.steps - warmup, 1),
  eta_min = opts.lr * opts.min_lr_ratio})
local scheduler = cosine
if warmup > 0 then
  local linear = sched.LinearLR(optimizer, {start_factor = 1 / warmup, end_factor = 1, total_iters = warmup})
  scheduler = sched.SequentialLR(optimizer, {schedulers = {linear, cosine}, milestones = {warmup}})
end
local scaler = opts.amp == "fp16" and lt.amp.GradScaler() or nil

-- The validation loss: the mean over 8 fixed batches of the held-out text.
local function val_loss()
  local starts, span = {}, #val_ids - T
  for b = 1, 8 * opts.batch_size do starts[b] = 1 + (b * 7919) % span end
  local sum, count = 0, 0
  local was_training = model.training
  model:eval()
  lt.no_grad(function()
    for first = 1, #starts, opts.batch_size do
      local x, y = batch_at(val_ids, table.move(starts, first, first + opts.batch_size - 1, 1, {}))
      local _, loss = model(x, y)
      sum, count = sum + loss:item(), count + 1
    end
  end)
  model:train(was_training)
  return sum / count
end

local first_step = 1
if opts.resume then
  local f = io.open(opts.checkpoint, "r")
  if not f then usage_error(("--resume: there is no checkpoint at %s"):format(opts.checkpoint)) end
  f:close()
  first_step = training.load_checkpoint(opts.checkpoint,
    {model = model, optimizer = optimizer, scheduler = scheduler, scaler = scaler}) + 1
  print(("resumed from %s after step %d"):format(opts.checkpoint, first_step - 1))
end
local function save(step)
  training.save_checkpoint(opts.checkpoint,
    {model = model, optimizer = optimizer, scheduler = scheduler, scaler = scaler, epoch = step})
end

-- ---- training ----
local step_opts = {amp = opts.amp, accum = opts.accum, max_grad_norm = opts.grad_clip,
  loss_of = function(x, y)
    local _, loss = model(x, y)
    return loss
  end}
local initial = val_loss()
print(("val loss %.4f before training"):format(initial))
local bar = require("lt.progress").new(opts.steps - first_step + 1, {desc = "train", unit = "step"})
model:train()
local recent = {}
for step = first_step, opts.steps do
  local lr = optimizer.param_groups[1].lr
  local x, y = train_batch()
  local loss = training.train_step(model, optimizer, x, y, step_opts, scaler)
  local value = loss:item()
  loss:free()
  recent[#recent + 1] = value
  scheduler:step()
  bar:update(1, {loss = value, lr = lr})
  if step == first_step or step % opts.log_every == 0 or step == opts.steps then
    local sum = 0
    for _, v in ipairs(recent) do sum = sum + v end
    bar:write(("step %d/%d  loss %.4f  lr %.2e"):format(step, opts.steps, sum / #recent, lr))
    recent = {}
  end
  if opts.checkpoint ~= "" and (step % opts.checkpoint_every == 0 or step == opts.steps) then save(step) end
end
local seconds = bar:close()
local final = val_loss()
print(("trained %d steps in %.1f s"):format(opts.steps - first_step + 1, seconds or 0))
print(("val loss %.4f -> %.4f"):format(initial, final))

-- ---- a sample ----
if opts.sample > 0 then
  local start = stoi["\n"] or 1
  local context = lt.tensor({{start}}, {dtype = "int64"})
  if device ~= "cpu" then context = context:to(device) end
  local out = model:generate(context, opts.sample,
    {temperature = opts.temperature, top_k = opts.top_k > 0 and opts.top_k or nil})
  local decoded = {}
  for i, id in ipairs(out:cpu():totable()[1]) do decoded[i] = chars[id] end
  print("sample:")
  print(table.concat(decoded))
end
