-- DistributedDataParallel's training step on this machine's ranks, and how
-- much of its communication the bucketing hides. Run under mpirun (every
-- rank one thread), and once alone for the one-rank figures:
--   mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 lt scripts/bench/ddp_step.lua [mlp|cnn] [batch] [steps]
--   lt --threads 1 scripts/bench/ddp_step.lua [mlp|cnn] [batch] [steps]
-- (scripts/bench/ddp_bench.sh runs both and prints one table.)
-- Per step (forward, backward, SGD step; batch per rank), the time over
-- the steps (the fastest of each, see fastest), rank 0 printing:
--   alone:   no communication at all (the rank's own compute, under no_sync)
--   overlap: DDP as it is: each bucket's all-reduce starts in backward
--   after:   DDP with each all-reduce held back until the end of backward,
--            then run one after another (the same copies, no overlap)
--   comm:    the buckets' all-reduces alone
-- hidden = (after - overlap) / comm: the share of the communication that
-- overlapping took off the step.
local lt = lt or require "lt"
local nn, F = lt.nn, lt.nn.functional
local dist = lt.distributed

local kind, batch, steps = arg[1] or "mlp", tonumber(arg[2] or 64), tonumber(arg[3] or 20)
lt.set_num_threads(1)
dist.init_process_group({ backend = "mpi" })
local rank, world = dist.get_rank(), dist.get_world_size()

local function make_model()
  lt.manual_seed(1)
  if kind == "cnn" then -- scripts/train_fashion_cnn.lua's
    local function block(cin, cout)
      return nn.Sequential(nn.Conv2d(cin, cout, 3, { padding = 1 }), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))
    end
    return nn.Sequential(block(1, 32), block(32, 64), nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
  end
  return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
    nn.Linear(1024, 10))
end

-- The same DDP twice: over lt.distributed (overlap), and over a group whose
-- asynchronous all-reduce only starts when waited for (after): DDP waits in
-- the hook of its last bucket, at the end of backward, so the reductions then
-- run one after another with nothing left to overlap, and the copies are
-- the same as overlap's.
local deferred = setmetatable({
  all_reduce = function(t, opts)
    if not (opts and opts.async_op) then return dist.all_reduce(t, opts) end
    return { wait = function() dist.all_reduce(t, { op = opts.op }) end }
  end,
}, { __index = dist })

local model, model2 = make_model(), make_model()
local ddp = nn.parallel.DistributedDataParallel(model)
local ddp_after = nn.parallel.DistributedDataParallel(model2, { process_group = deferred })
local opt = lt.optim.SGD(model:parameters(), { lr = 0.01 })
local opt2 = lt.optim.SGD(model2:parameters(), { lr = 0.01 })
local x, y = lt.randn(batch, 1, 28, 28), lt.randint(1, 10, { batch })

-- Buffers of the buckets' sizes, for the communication alone.
local numel = {}
for name, p in model:named_parameters() do numel[name] = p:numel() end
local flats = {}
for i, names in ipairs(ddp:bucket_names()) do
  local n = 0
  for _, name in ipairs(names) do n = n + numel[name] end
  flats[i] = lt.zeros(n)
end

local function step(mode)
  local net, o = mode == "after" and ddp_after or ddp, mode == "after" and opt2 or opt
  o:zero_grad()
  if mode == "alone" then
    local g <close> = net:no_sync()
    F.cross_entropy(net(x), y):backward()
  else
    F.cross_entropy(net(x), y):backward()
  end
  o:step()
end

local function reduce_buckets()
  for _, flat in ipairs(flats) do dist.all_reduce(flat, { op = "avg" }) end
end

-- The fastest step: other processes on a shared machine only ever add time.
local function fastest(list)
  table.sort(list)
  return list[1]
end

-- The modes take turns step by step, so that a load that comes and goes on
-- a shared machine falls on all of them alike.
local MODES = { "alone", "overlap", "after", "comm" }
local function run(mode)
  if mode == "comm" then reduce_buckets() else step(mode) end -- comm: the last step's gradients
end
for _, mode in ipairs(MODES) do
  for _ = 1, 2 do run(mode) end -- warm up the allocator's cache
end
local times = {}
for _, mode in ipairs(MODES) do times[mode] = {} end
for i = 1, steps do
  for _, mode in ipairs(MODES) do
    dist.barrier()
    local t0 = lt.clock()
    run(mode)
    times[mode][i] = lt.clock() - t0
  end
end
local result = {}
for _, mode in ipairs(MODES) do result[mode] = fastest(times[mode]) * 1e3 end
local bytes = 0
for _, p in ipairs(model:parameters()) do bytes = bytes + p:nbytes() end
if rank == 0 then
  -- one rank communicates with nobody: nothing to hide
  local hidden = world > 1 and ("%.0f%%"):format(100 * (result.after - result.overlap) / result.comm) or "-"
  print(("%s batch %d/rank, %d rank(s), %.1f MiB of gradients in %d buckets: alone %.2f ms, overlap %.2f ms, "
    .. "after %.2f ms, comm %.2f ms, hidden %s"):format(kind, batch, world, bytes / 2 ^ 20, #flats,
    result.alone, result.overlap, result.after, result.comm, hidden))
end
dist.destroy_process_group()
