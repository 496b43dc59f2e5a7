-- DistributedDataParallel over backend nccl, each rank on its CUDA device
-- (tests/host/test_nccl_sim.sh: the simulated devices at -np 2; works at any
-- world size that divides 12). K steps of DDP, with several buckets and with
-- one, give the parameters of one process that trains the same model on the
-- full batch, and so does ZeroRedundancyOptimizer over it (Adam's); a model
-- whose shapes differ between ranks is refused with the parameter named.
-- Prints "ok ddp_cuda rank R" or raises the failure.
--   mpirun -np 2 lt_simdev tests/host/distributed/ddp_cuda.lua
local lt = require "lt"
local lockstep = dofile("tests/host/ddp/lockstep.lua")
local dist, nn = lt.distributed, lt.nn
local F = nn.functional

dist.init_process_group({ backend = "nccl", timeout = 30 })
local rank, world = dist.get_rank(), dist.get_world_size()
local device = "cuda:" .. lt.cuda.current_device()

local function check(cond, fmt, ...)
  if not cond then error(("rank %d: " .. fmt):format(rank, ...), 2) end
end

local function mlp(seed)
  lt.manual_seed(seed)
  return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3)):to(device)
end

-- The full batch, the same on every rank, and this rank's contiguous share.
local N = 12
lt.manual_seed(100)
local X, Y = lt.randn(N, 6):to(device), lt.randint(1, 3, { N }):to(device)
local per = N // world
local x, y = X:narrow(1, rank * per + 1, per), Y:narrow(1, rank * per + 1, per)

-- Each rank seeds its own model: only DDP's broadcast makes them rank 0's.
for _, cap in ipairs { 1e-3, 25 } do
  local model, ref = mlp(1 + rank), mlp(1)
  local ddp = nn.parallel.DistributedDataParallel(model, { bucket_cap_mb = cap })
  local opt = lt.optim.SGD(ddp:parameters(), { lr = 0.1, momentum = 0.9 })
  local ropt = lt.optim.SGD(ref:parameters(), { lr = 0.1, momentum = 0.9 })
  lockstep(4, { model = ddp, opt = opt, x = x, y = y }, { model = ref, opt = ropt, x = X, y = Y })
  local mine = model:state_dict()
  for name, t in pairs(ref:state_dict()) do
    check(mine[name].device == device, "%s is on %s, not %s", name, mine[name].device, device)
    local d = (mine[name] - t):abs():max():item()
    check(d <= 2e-6, "DDP (bucket_cap_mb %g): %s differs from the single process by %g", cap, name, d)
  end
end

-- ZeRO over DDP's gradients equals plain Adam; its consolidated state (the
-- shards broadcast from their owners) is Adam's, on the device.
do
  local model, ref = mlp(11 + rank), mlp(11)
  local ddp = nn.parallel.DistributedDataParallel(model)
  local opt = lt.optim.ZeroRedundancyOptimizer(ddp:parameters(), lt.optim.Adam, { lr = 0.01 })
  local ropt = lt.optim.Adam(ref:parameters(), { lr = 0.01 })
  lockstep(3, { model = ddp, opt = opt, x = x, y = y }, { model = ref, opt = ropt, x = X, y = Y })
  local mine = model:state_dict()
  for name, t in pairs(ref:state_dict()) do
    local d = (mine[name] - t):abs():max():item()
    check(d <= 2e-6, "ZeRO: %s differs from plain Adam by %g", name, d)
  end
  local sd = opt:state_dict()
  for i, st in pairs(ropt:state_dict().state) do
    local d = (sd.state[i].exp_avg_sq - st.exp_avg_sq):abs():max():item()
    check(sd.state[i].step == st.step and d <= 1e-9, "ZeRO: consolidated state %d differs by %g", i, d)
  end
end

-- Shapes that differ between ranks: refused on every rank, the parameter named.
if world > 1 then
  lt.manual_seed(1)
  local odd = nn.Sequential(nn.Linear(6, rank == 1 and 5 or 4)):to(device)
  local ok, err = pcall(nn.parallel.DistributedDataParallel, odd)
  check(not ok and tostring(err):find("('0.weight') has shape", 1, true) ~= nil, "a model that differs was not refused by name: %s",
    tostring(err))
end

dist.destroy_process_group()
print(("ok ddp_cuda rank %d"):format(rank))
