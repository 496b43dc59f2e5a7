-- lt's side of the training-step benchmark (scripts/bench/run.sh): the same
-- models, data shapes, losses and optimizers as step_torch.py. Prints one line:
-- model batch threads ms_per_step peak_rss_mib peak_allocated_mib, and on a
-- GPU also device_used_mib (total minus free as cudaMemGetInfo reports it:
-- the whole process, context included, as nvidia-smi shows it).
--   lt [--device cuda] scripts/bench/step.lua mlp|cnn BATCH THREADS STEPS [DEVICE]
local lt = lt or require "lt"
local nn, optim = lt.nn, lt.optim

local model_name, batch, threads, steps = arg[1], tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4])
local device = arg[5] or lt.default_device or "cpu"
local on_gpu = device ~= "cpu"
lt.set_num_threads(threads)
lt.manual_seed(0)

local model
if model_name == "mlp" then
  model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
    nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
else
  model = nn.Sequential(
    nn.Conv2d(1, 32, 3, {padding = 1}), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, {padding = 1}), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
end
model:to(device)
local opt = model_name == "mlp" and optim.SGD(model:parameters(), {lr = 0.01, momentum = 0.9})
  or optim.Adam(model:parameters(), {lr = 1e-3})
local x = lt.randn(batch, 1, 28, 28):to(device)
local y = lt.randint(1, 10, {batch}):to(device)
local loss_fn = nn.CrossEntropyLoss()

local function step()
  opt:zero_grad()
  local loss = loss_fn(model(x), y)
  loss:backward()
  opt:step()
  -- GPU kernels run asynchronously: a step ends when the device is done.
  if on_gpu then lt.cuda.synchronize() end
end

for _ = 1, 3 do step() end -- warm up, as the PyTorch side
lt.memory.reset_peak(device)
local times = {}
for i = 1, steps do
  local t0 = lt.clock()
  step()
  times[i] = lt.clock() - t0
end
table.sort(times)
-- The best step, or with LT_BENCH_STAT=median the median (contention.sh:
-- under load the best step hides the slow ones).
local best = os.getenv("LT_BENCH_STAT") == "median" and times[(steps + 1) // 2] or times[1]
local line = string.format("%s %d %d %.3f %.1f %.1f", model_name, batch, threads, best * 1e3,
  lt.peak_rss() / 2^20, lt.memory.max_allocated(device) / 2^20)
if on_gpu then
  local free, total = lt.cuda.mem_get_info(device)
  line = line .. string.format(" %.1f", (total - free) / 2^20)
end
print(line)
