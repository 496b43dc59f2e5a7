-- One rank of tests/host/test_ddp.sh: `mpirun -np W lt tests/host/ddp/check.lua MODE`.
-- Every rank checks what it can see and prints "ok MODE rank R"; a failed
-- check is an error (the job stops with it on every rank).
local lt = require "lt"
local lockstep = dofile("tests/host/ddp/lockstep.lua")
local dist = lt.distributed
local nn = lt.nn
local mode = arg[1]

dist.init_process_group({ backend = "mpi" })
local rank, world = dist.get_rank(), dist.get_world_size()

local function check(cond, fmt, ...)
  if not cond then error(("rank %d: " .. fmt):format(rank, ...), 2) end
end

local function max_diff(a, b) return (a - b):abs():max():item() end

-- The same model on every rank only after DDP's broadcast: each rank seeds
-- its own, rank 0's is the reference's.
local function mlp(seed)
  lt.manual_seed(seed)
  return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))
end

-- The full batch (the same on every rank) and this rank's contiguous share.
local N = 12
lt.manual_seed(100)
local X, Y = lt.randn(N, 6), lt.randint(1, 3, { N })
local per = N // world
local x, y = X:narrow(1, rank * per + 1, per), Y:narrow(1, rank * per + 1, per)
local F = nn.functional

local function compare_params(model, ref, tol, what)
  local mine = model:state_dict()
  for name, t in pairs(ref:state_dict()) do
    local d = max_diff(mine[name], t)
    check(d <= tol, "%s: %s differs from the single process by %g", what, name, d)
  end
end

if mode == "ddp" then
  -- K steps of DDP (several buckets, and the default one) equal one process
  -- on the full batch: the mean of equal-sized shards' mean losses is the
  -- full batch's mean loss.
  for _, cap in ipairs { 1e-3, 25 } do
    local model, ref = mlp(1 + rank), mlp(1)
    local ddp = nn.parallel.DistributedDataParallel(model, { bucket_cap_mb = cap })
    local opt = lt.optim.SGD(ddp:parameters(), { lr = 0.1, momentum = 0.9 })
    local ropt = lt.optim.SGD(ref:parameters(), { lr = 0.1, momentum = 0.9 })
    lockstep(5, { model = ddp, opt = opt, x = x, y = y }, { model = ref, opt = ropt, x = X, y = Y })
    compare_params(model, ref, 2e-6, ("DDP (bucket_cap_mb %g, %d buckets)"):format(cap, #ddp:bucket_names()))
  end
elseif mode == "no_sync" then
  -- Two micro-batches per rank, the first under no_sync, each loss halved:
  -- the full batch's gradient, communicated once.
  local model, ref = mlp(7 + rank), mlp(7)
  local ddp = nn.parallel.DistributedDataParallel(model, { bucket_cap_mb = 1e-3 })
  local opt = lt.optim.SGD(ddp:parameters(), { lr = 0.2 })
  local ropt = lt.optim.SGD(ref:parameters(), { lr = 0.2 })
  local half = per // 2
  for _ = 1, 3 do
    opt:zero_grad()
    do
      local g <close> = ddp:no_sync()
      local first = F.cross_entropy(ddp(x:narrow(1, 1, half)), y:narrow(1, 1, half)) * 0.5
      first:backward()
    end
    local second = F.cross_entropy(ddp(x:narrow(1, half + 1, per - half)), y:narrow(1, half + 1, per - half)) * 0.5
    second:backward()
    opt:step()
    ropt:zero_grad()
    F.cross_entropy(ref(X), Y):backward()
    ropt:step()
  end
  compare_params(model, ref, 2e-6, "no_sync accumulation")
elseif mode == "loader" then
  -- Every rank's indices of each epoch, gathered: each sample once (the
  -- padding repeats the start of the order when the size does not divide),
  -- and the single-process loader's order interleaved.
  for _, n in ipairs { 12, 10 } do
    local data = lt.arange(1, n + 1)
    local loader = lt.data.DataLoader({ data }, { batch_size = 2, shuffle = true, seed = 5, distributed = true })
    local single = lt.data.DataLoader({ data }, { batch_size = n, shuffle = true, seed = 5 })
    local per_rank = (n + world - 1) // world
    local previous
    for epoch = 1, 3 do
      local mine = {}
      for batch in loader:epoch(epoch) do
        for _, v in ipairs(batch:totable()) do mine[#mine + 1] = v end
      end
      check(#mine == per_rank, "n %d: %d samples on this rank, expected %d", n, #mine, per_rank)
      local all = {}
      for r = 1, world do all[r] = lt.zeros(per_rank, { dtype = "int64" }) end
      dist.all_gather(all, lt.tensor(mine, { dtype = "int64" }))
      local order = single:epoch(epoch)():totable()
      local count = {}
      for k = 1, per_rank * world do
        local r, j = (k - 1) % world + 1, (k - 1) // world + 1
        local v = all[r][j]:item()
        check(v == order[(k - 1) % n + 1], "n %d epoch %d: position %d is %d, the single loader has %d", n, epoch,
          k, v, order[(k - 1) % n + 1])
        count[v] = (count[v] or 0) + 1
      end
      -- the padding (per_rank * world - n < n here) gives the order's first samples a second turn
      local padded = {}
      for k = 1, per_rank * world - n do padded[order[k]] = true end
      for i = 1, n do
        local expected = padded[i] and 2 or 1
        check(count[i] == expected, "n %d epoch %d: sample %d seen %s times, expected %d", n, epoch, i,
          tostring(count[i]), expected)
      end
      check(previous == nil or table.concat(previous, ",") ~= table.concat(order, ","), "epochs share an order")
      previous = order
    end
  end
elseif mode == "zero" then
  -- ZeRO over DDP's gradients equals plain Adam in one process; each rank
  -- holds the Adam state of its shard only, to the byte, and the shards
  -- together hold all of it.
  local model, ref = mlp(11 + rank), mlp(11)
  local ddp = nn.parallel.DistributedDataParallel(model)
  local opt = lt.optim.ZeroRedundancyOptimizer(ddp:parameters(), lt.optim.Adam, { lr = 0.01 })
  local ropt = lt.optim.Adam(ref:parameters(), { lr = 0.01 })
  lockstep(4, { model = ddp, opt = opt, x = x, y = y }, { model = ref, opt = ropt, x = X, y = Y })
  compare_params(model, ref, 2e-6, "ZeRO")
  local shard = 0
  for _, p in ipairs(opt:shard()) do shard = shard + p:nbytes() end
  local bytes = opt:state_bytes()
  check(bytes == 2 * shard, "state bytes %d, expected 2 x its shard's %d", bytes, shard)
  local total = lt.tensor({ bytes }, { dtype = "int64" })
  dist.all_reduce(total, { op = "sum" })
  check(total:item() == ropt:state_bytes(), "the shards hold %d bytes of state, Adam %d", total:item(),
    ropt:state_bytes())
  local largest = 0
  for _, p in ipairs(ref:parameters()) do largest = math.max(largest, 2 * p:nbytes()) end
  check(math.abs(bytes - ropt:state_bytes() / world) <= largest,
    "state bytes %d are not 1/%d of Adam's %d up to one parameter's (%d)", bytes, world, ropt:state_bytes(), largest)
  -- the consolidated state_dict is plain Adam's
  local sd, rsd = opt:state_dict(), ropt:state_dict()
  for i, s in pairs(rsd.state) do
    check(sd.state[i].step == s.step, "state %d: step %d, expected %d", i, sd.state[i].step, s.step)
    check(max_diff(sd.state[i].exp_avg_sq, s.exp_avg_sq) <= 1e-9, "state %d: exp_avg_sq differs", i)
  end
  io.stdout:write(("zero rank %d state bytes %d of %d\n"):format(rank, bytes, ropt:state_bytes()))
elseif mode == "mismatch" then
  -- The last rank's model is one unit wider: every rank stops with the same
  -- error naming the first parameter that differs.
  lt.manual_seed(1)
  local width = rank == world - 1 and 17 or 16
  local model = nn.Sequential(nn.Linear(6, width), nn.ReLU(), nn.Linear(width, 3))
  local ok, err = pcall(nn.parallel.DistributedDataParallel, model)
  check(not ok, "a mismatched model was accepted")
  local expected = rank == world - 1
    and ("parameter 1 ('0.weight') has shape [17, 6] on rank %d and [16, 6] on rank 0"):format(rank)
    or ("parameter 1 ('0.weight') has shape [16, 6] on rank %d and [17, 6] on rank %d"):format(rank, world - 1)
  check(tostring(err):find(expected, 1, true), "unexpected error: %s", tostring(err))
elseif mode == "unused" then
  -- Rank 0 never uses the branch "b", the others do: with
  -- find_unused_parameters the step equals one process on the mean of the
  -- ranks' losses; without it, the next forward stops every rank with the
  -- parameters named (never a hang).
  local Branches = nn.Module:extend("Branches")
  function Branches:init() self.a = nn.Linear(6, 3); self.b = nn.Linear(6, 3) end
  function Branches:forward(input, use_b)
    local out = self.a(input)
    if use_b then out = out + self.b(input) end
    return out
  end
  local function build() lt.manual_seed(5); return Branches() end
  local model, ref = build(), build()
  local ddp = nn.parallel.DistributedDataParallel(model, { find_unused_parameters = true })
  local opt = lt.optim.SGD(ddp:parameters(), { lr = 0.1 })
  local ropt = lt.optim.SGD(ref:parameters(), { lr = 0.1 })
  for _ = 1, 3 do
    opt:zero_grad()
    F.cross_entropy(ddp(x, rank ~= 0), y):backward()
    opt:step()
    ropt:zero_grad()
    local total = nil
    for r = 0, world - 1 do
      local l = F.cross_entropy(ref(X:narrow(1, r * per + 1, per), r ~= 0), Y:narrow(1, r * per + 1, per)) / world
      total = total and total + l or l
    end
    total:backward()
    ropt:step()
  end
  compare_params(model, ref, 2e-6, "find_unused_parameters")
  local strict = nn.parallel.DistributedDataParallel(build())
  F.cross_entropy(strict(x, false), y):backward()
  local ok, err = pcall(strict, x, false)
  check(not ok and tostring(err):find("no gradient for parameter(s) 3 ('b.weight'), 4 ('b.bias')", 1, true),
    "unexpected: %s", tostring(err))
else
  error("unknown mode " .. tostring(mode))
end

dist.barrier()
print(("ok %s rank %d"):format(mode, rank))
dist.destroy_process_group()
