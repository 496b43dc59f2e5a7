-- lt.distributed under mpirun (tests/host/test_distributed.sh runs it with 2
-- and 3 ranks): every collective against the same reduction computed here,
-- serially, from every rank's data, for every dtype and op, synchronous and
-- async, contiguous and not; the errors (before init, bad options, list
-- lengths, shapes and collectives that differ between ranks); destroy and
-- init again; and a timeout. Each rank prints "ok collectives rank R" at the
-- end, or "FAIL ..." lines. With backend nccl (tests/host/test_nccl_sim.sh on
-- the simulated devices, scripts/gpu_check.sh on a GPU at world size 1) the
-- same checks run on each rank's CUDA device; those that need a second rank
-- are left out in a world of one.
--   mpirun -np N lt tests/host/distributed/check.lua collectives | fail | die [mpi | nccl]
local lt = require "lt"
local dist = lt.distributed
local mode = arg[1] or "collectives"
local BACKEND = arg[2] or "mpi"

local failures, checks = 0, 0
local rank = -1
local function check(cond, what)
  checks = checks + 1
  if not cond then
    failures = failures + 1
    io.stderr:write(string.format("FAIL rank %d: %s\n", rank, what))
  end
end

-- pcall(f, ...) must fail with a message containing each of the parts (plain text).
local function fails(what, parts, f, ...)
  local ok, err = pcall(f, ...)
  err = tostring(err)
  local good = not ok
  for _, part in ipairs(parts) do good = good and err:find(part, 1, true) ~= nil end
  check(good, what .. ": got " .. (ok and "no error" or err))
  -- The message points at this script's line, not lt's library.
  check(ok or err:find("check.lua:%d+:") ~= nil, what .. ": error not placed at the caller: " .. err)
  return err
end

-- ---- before a group exists ----
check(not dist.is_initialized(), "no group at start")
fails("all_reduce before init", { "all_reduce: the default process group is not initialized" },
  dist.all_reduce, lt.ones(2))
fails("get_rank before init", { "get_rank: the default process group is not initialized" }, dist.get_rank)
fails("unknown backend", { "unknown backend 'mpii' (did you mean 'mpi'?)" }, dist.init_process_group, { backend = "mpii" })
fails("unknown init option", { "init_process_group: unknown option 'timout' (did you mean 'timeout'?)" },
  dist.init_process_group, { timout = 3 })
fails("bad timeout", { "timeout must be a positive number of seconds" }, dist.init_process_group, { timeout = -1 })

if mode == "singleton" then
  -- Not under mpirun: MPI's singleton, a world of one.
  dist.init_process_group({ backend = BACKEND, timeout = 30 })
  local t = lt.tensor({ 1.5, 2 }, { device = BACKEND == "nccl" and "cuda:0" or "cpu" })
  dist.all_reduce(t)
  check(dist.get_world_size() == 1 and dist.get_rank() == 0, "a world of one")
  check(t[1]:item() == 1.5 and t[2]:item() == 2, "all_reduce over one rank is the identity")
  dist.destroy_process_group()
  print("ok singleton rank 0")
  os.exit(failures == 0 and 0 or 1)
end

dist.init_process_group({ backend = BACKEND, timeout = 30 })
rank = dist.get_rank()
local world = dist.get_world_size()
check(dist.is_initialized() and dist.get_backend() == BACKEND, "initialized with backend " .. BACKEND)
-- The device this rank's tensors live on: nccl made cuda:<local rank> current.
local DEVICE = BACKEND == "nccl" and ("cuda:" .. lt.cuda.current_device()) or "cpu"
local ON = { device = DEVICE }
fails("init twice", { "already initialized" }, dist.init_process_group, { backend = "mpi" })

if mode == "fail" then
  -- Rank 1 fails between collectives; the others are inside the next one.
  local t = lt.ones(4, ON)
  dist.all_reduce(t)
  if rank == 1 then error("boom on rank 1") end
  dist.all_reduce(t)
  print("rank " .. rank .. " was not stopped")
  os.exit(0)
elseif mode == "die" then
  dist.barrier()
  if rank == 1 then os.execute("kill -KILL $PPID") end -- the shell's parent: this lt
  dist.all_reduce(lt.ones(4, ON))
  print("rank " .. rank .. " was not stopped")
  os.exit(0)
end

-- ---- data: small integers, so every reduction is exact in every dtype ----
local DTYPES = { "float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool" }
local FLOATING = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
local ROWS, COLS = 3, 4

-- Rank r's k-th matrix as a Lua table (1..5, or booleans).
local function values(r, k, dtype)
  local m = {}
  for i = 1, ROWS do
    m[i] = {}
    for j = 1, COLS do
      local v = (r * 7 + k * 5 + i * 3 + j) % 5 + 1
      if dtype == "bool" then m[i][j] = v % 2 == 0 else m[i][j] = v end
    end
  end
  return m
end

local function tensor(m, dtype) return lt.tensor(m, { dtype = dtype, device = DEVICE }) end

-- The elementwise reduction of every rank's k-th matrix, serially.
local function reduced(k, dtype, op)
  local out = {}
  for i = 1, ROWS do
    out[i] = {}
    for j = 1, COLS do
      local acc
      for r = 0, world - 1 do
        local v = values(r, k, dtype)[i][j]
        if dtype == "bool" then
          -- PyTorch's NCCL meaning: sum and max are "any", prod and min "all".
          if acc == nil then acc = v
          elseif op == "sum" or op == "max" then acc = acc or v
          else acc = acc and v end
        elseif acc == nil then acc = v
        elseif op == "sum" or op == "avg" then acc = acc + v
        elseif op == "prod" then acc = acc * v
        elseif op == "max" then acc = math.max(acc, v)
        else acc = math.min(acc, v) end
      end
      out[i][j] = acc
    end
  end
  local t = tensor(out, dtype)
  if op == "avg" then t = t / world end -- the same division in the same dtype
  return t
end

local function same(a, b)
  if a.dtype ~= b.dtype then return false end
  local x, y = a:contiguous():totable(), b:contiguous():totable()
  for i = 1, #x do
    for j = 1, #x[i] do
      if x[i][j] ~= y[i][j] then return false end
    end
  end
  return #x == #y
end

local function label(...) return table.concat({ ... }, " ") end

for _, dtype in ipairs(DTYPES) do
  local ops = { "sum", "max", "min", "prod" }
  if FLOATING[dtype] then ops[#ops + 1] = "avg" end
  for _, op in ipairs(ops) do
    for _, async in ipairs { false, true } do
      -- all_reduce, contiguous
      local t = tensor(values(rank, 1, dtype), dtype)
      local work = dist.all_reduce(t, { op = op, async_op = async })
      if async then
        check(work ~= nil and work:wait() == true and work:is_completed(), label("all_reduce work", dtype, op))
      else
        check(work == nil, "a synchronous call returns nothing")
      end
      check(same(t, reduced(1, dtype, op)), label("all_reduce", dtype, op, async and "async" or ""))
      -- all_reduce of a transposed view: staged and copied back
      local base = tensor(values(rank, 2, dtype), dtype):transpose(1, 2):contiguous()
      local view = base:transpose(1, 2)
      check(not view:is_contiguous(), "the view is not contiguous")
      work = dist.all_reduce(view, { op = op, async_op = async })
      if work then work:wait() end
      check(same(view, reduced(2, dtype, op)), label("all_reduce non-contiguous", dtype, op))
      -- reduce_scatter: rank r gets the reduction of every rank's list[r + 1]
      local ins = {}
      for k = 1, world do ins[k] = tensor(values(rank, 10 + k, dtype), dtype) end
      local out = lt.empty({ ROWS, COLS }, { dtype = dtype, device = DEVICE })
      work = dist.reduce_scatter(out, ins, { op = op, async_op = async })
      if work then work:wait() end
      check(same(out, reduced(10 + rank + 1, dtype, op)), label("reduce_scatter", dtype, op))
    end
  end
  if not FLOATING[dtype] then
    fails("avg of " .. dtype, { "all_reduce: op 'avg' needs a floating-point tensor, got " .. dtype },
      dist.all_reduce, tensor(values(rank, 1, dtype), dtype), { op = "avg" })
  end
  for _, async in ipairs { false, true } do
    -- broadcast from every rank
    for src = 0, world - 1 do
      local t = tensor(values(rank, 3, dtype), dtype)
      local work = dist.broadcast(t, { src = src, async_op = async })
      if work then work:wait() end
      check(same(t, tensor(values(src, 3, dtype), dtype)), label("broadcast", dtype, "src", src))
    end
    -- all_gather into a list, one of its tensors a non-contiguous view
    local outs = {}
    for k = 1, world do outs[k] = lt.empty({ ROWS, COLS }, { dtype = dtype, device = DEVICE }) end
    local holder = lt.empty({ COLS, ROWS }, { dtype = dtype, device = DEVICE })
    outs[world] = holder:transpose(1, 2)
    local work = dist.all_gather(outs, tensor(values(rank, 4, dtype), dtype), { async_op = async })
    if work then
      while not work:is_completed() do end
    end
    for r = 0, world - 1 do
      check(same(outs[r + 1], tensor(values(r, 4, dtype), dtype)), label("all_gather", dtype, "from", r))
    end
    -- all_to_all: outs[j] is rank j-1's ins[this rank + 1]
    local ins = {}
    for k = 1, world do ins[k] = tensor(values(rank * world + k, 5, dtype), dtype) end
    outs = {}
    for k = 1, world do outs[k] = lt.empty({ ROWS, COLS }, { dtype = dtype, device = DEVICE }) end
    work = dist.all_to_all(outs, ins, { async_op = async })
    if work then work:wait() end
    for r = 0, world - 1 do
      check(same(outs[r + 1], tensor(values(r * world + rank + 1, 5, dtype), dtype)), label("all_to_all", dtype, r))
    end
  end
end

-- ---- errors: the same on every rank, so the group stays usable ----
local t = lt.ones(3, ON)
fails("misspelt op", { "all_reduce: unknown op 'summ' (did you mean 'sum'?)" }, dist.all_reduce, t, { op = "summ" })
fails("unknown op", { "expected one of sum, avg, max, min, prod" }, dist.all_reduce, t, { op = "median" })
fails("misspelt option", { "all_reduce: unknown option 'opp' (did you mean 'op'?)" }, dist.all_reduce, t, { opp = "sum" })
fails("async_op not a boolean", { "async_op must be a boolean" }, dist.all_reduce, t, { async_op = 1 })
fails("src out of range", { "broadcast: src " .. world .. " is not a rank of the group (0 to " .. (world - 1) .. ")" },
  dist.broadcast, t, { src = world })
local short = world > 1 and { lt.empty(3, ON) } or { lt.empty(3, ON), lt.empty(3, ON) } -- a long one in a world of one
fails("short list", { "all_gather: the output list must hold one tensor per rank (the world size, " .. world
  .. "), got " .. #short }, dist.all_gather, short, t)
local wrong = {}
for k = 1, world do wrong[k] = lt.empty(k == world and 4 or 3, ON) end
fails("list of another shape", { "all_gather: the output list[" .. world .. "] is float32 [4] but the input is float32 [3]" },
  dist.all_gather, wrong, t)
fails("expand view", { "all_reduce: the tensor has elements that share memory (an expand view" },
  dist.all_reduce, lt.ones(1, ON):expand(3))
-- A collective's write is an in-place write: autograd names it.
local leaf = lt.ones(3, { requires_grad = true, device = DEVICE })
local saved = leaf * 2
local product = saved * saved
dist.all_reduce(saved)
fails("a saved tensor written", { "modified by an in-place operation (all_reduce)" },
  function() product:sum():backward() end)
fails("not a tensor", { "reduce_scatter: element 1 of the list is a number" }, dist.reduce_scatter, t, { 1, 2, 3 })

-- Shapes that differ between ranks: named on every rank, then the group goes on.
if world > 1 then
  local mine = rank == 0 and lt.ones(2, 3, ON) or lt.ones(3, ON)
  fails("shapes differ", { "all_reduce: tensors differ between ranks: rank 0 has float32 [2, 3], rank 1 has float32 [3]" },
    dist.all_reduce, mine)
  fails("dtypes differ", { "broadcast: tensors differ between ranks: rank 0 has float32 [3], rank 1 has float64 [3]" },
    dist.broadcast, rank == 0 and lt.ones(3, ON) or lt.ones(3, { dtype = "float64", device = DEVICE }))
  if rank == 0 then
    fails("collectives differ", { "the ranks called different collectives: rank 0 called all_reduce, rank 1 called broadcast" },
      dist.all_reduce, lt.ones(3, ON))
  else
    fails("collectives differ", { "the ranks called different collectives: rank 0 called all_reduce, rank 1 called broadcast" },
      dist.broadcast, lt.ones(3, ON))
  end
  fails("ops differ", { "the ranks asked for different ops: rank 0 'sum', rank 1 'max'" },
    dist.all_reduce, lt.ones(3, ON), { op = rank == 0 and "sum" or "max" })
  -- One rank's own check fails: it raises its error, the others learn it failed.
  if rank == 0 then
    fails("one rank's list too short", { "all_gather: the output list must hold one tensor per rank" },
      dist.all_gather, { lt.empty(3, ON) }, lt.ones(3, ON))
  else
    local parts = {}
    for k = 1, world do parts[k] = lt.empty(3, ON) end
    fails("another rank's list too short", { "all_gather: rank 0 failed before the collective started" },
      dist.all_gather, parts, lt.ones(3, ON))
  end
end
local after = lt.ones(3, ON)
dist.all_reduce(after)
check(after[1]:item() == world, "the group works after the errors")
dist.barrier()

-- ---- async_op: calls in flight together, their order, their errors ----
-- An async call only starts the exchange of its description; its payload
-- starts later, in call order on every rank, whichever call sees it ready.
local function sum_ranks(k) return world * k + world * (world - 1) / 2 end -- sum over r of (r + k)
do
  local ts, works = {}, {}
  for k = 1, 4 do
    ts[k] = lt.full({ 5 }, rank + k, ON)
    works[k] = dist.all_reduce(ts[k], { async_op = true })
  end
  local b = lt.full({ 3 }, rank, ON)
  works[5] = dist.broadcast(b, { src = world - 1, async_op = true })
  for k = #works, 1, -1 do check(works[k]:wait() == true, "async work " .. k .. " waited in reverse order") end
  for k = 1, 4 do check(ts[k][1]:item() == sum_ranks(k), "async all_reduce " .. k .. " of 4 in flight") end
  check(b[1]:item() == world - 1, "async broadcast after 4 all_reduces in flight")
end
do -- a synchronous call starts (and ends) the pending async ones first, in order
  local a = lt.full({ 4 }, rank + 1, ON)
  local wa = dist.all_reduce(a, { async_op = true })
  local b = lt.full({ 4 }, rank, ON)
  local wb = dist.broadcast(b, { src = 0, async_op = true })
  local s = lt.ones(2, ON)
  dist.all_reduce(s)
  check(s[1]:item() == world, "a synchronous call after pending async ones")
  check(wb:wait() and wa:wait() and a[1]:item() == sum_ranks(1) and b[1]:item() == 0,
    "the pending async calls before a synchronous one")
end
if world > 1 then
  -- A disagreement seen after the call returned: every rank's wait (and
  -- is_completed) names it, the payload is skipped everywhere, the group goes on.
  local w = dist.all_reduce(rank == 0 and lt.ones(2, 3, ON) or lt.ones(3, ON), { async_op = true })
  local good = lt.full({ 2 }, rank + 1, ON)
  local wg = dist.all_reduce(good, { async_op = true })
  local message = "all_reduce: tensors differ between ranks: rank 0 has float32 [2, 3], rank 1 has float32 [3]"
  fails("async shapes differ, at wait", { message }, function() return w:wait() end)
  fails("async shapes differ, at is_completed", { message }, function() return w:is_completed() end)
  check(wg:wait() and good[1]:item() == sum_ranks(1), "an async call after a skipped one")
  -- One rank's own check fails: its call raises at once; the others' waits name it.
  if rank == 0 then
    fails("async: one rank's list too short", { "all_gather: the output list must hold one tensor per rank" },
      dist.all_gather, { lt.empty(3, ON) }, lt.ones(3, ON), { async_op = true })
  else
    local parts = {}
    for k = 1, world do parts[k] = lt.empty(3, ON) end
    local wf = dist.all_gather(parts, lt.ones(3, ON), { async_op = true })
    fails("async: another rank's list too short", { "all_gather: rank 0 failed before the collective started" },
      function() return wf:wait() end)
  end
  local later = lt.ones(3, ON)
  dist.all_reduce(later)
  check(later[1]:item() == world, "the group works after async errors")
end

-- ---- destroy and init again, in the same process ----
dist.destroy_process_group()
check(not dist.is_initialized(), "destroyed")
fails("destroy twice", { "destroy_process_group: the default process group is not initialized" }, dist.destroy_process_group)
dist.init_process_group({ backend = BACKEND, timeout = 30 })
check(dist.get_rank() == rank and dist.get_world_size() == world, "the same rank after init again")
local again = lt.full({ 2 }, rank + 1, ON)
dist.all_reduce(again)
check(again[1]:item() == world * (world + 1) / 2, "all_reduce after init again")
-- A work handle dropped before its end: destroy waits for it; and it runs
-- the async calls still pending, a disagreeing one skipped.
dist.all_reduce(lt.ones(1000, ON), { async_op = true })
local kept = lt.ones(1000, ON)
local wk = dist.all_reduce(kept, { async_op = true })
if world > 1 then dist.all_reduce(rank == 0 and lt.ones(2, ON) or lt.ones(3, ON), { async_op = true }) end
local kept2 = lt.full({ 10 }, rank, ON)
local wk2 = dist.broadcast(kept2, { src = world - 1, async_op = true })
collectgarbage()
dist.destroy_process_group()
check(wk:wait() and wk2:is_completed() and kept[1]:item() == world and kept2[10]:item() == world - 1,
  "destroy ends the pending async calls")

-- ---- a timeout: the last rank skips a collective ----
dist.init_process_group({ backend = BACKEND, timeout = 1 })
if rank ~= world - 1 then
  local started = lt.clock()
  fails("timeout", { "all_reduce: timed out after 1 s (the process group's timeout)" }, dist.all_reduce, lt.ones(3, ON))
  local waited = lt.clock() - started
  check(waited >= 0.9 and waited < 5, "the timeout took " .. waited .. " s")
  fails("a broken group refuses", { "barrier: the process group is broken: all_reduce failed" }, dist.barrier)
end
dist.destroy_process_group()
dist.init_process_group({ backend = BACKEND, timeout = 30 })
local last = lt.ones(2, ON)
dist.all_reduce(last)
check(last[1]:item() == world, "a new group works after a timeout")
dist.destroy_process_group()
-- The same with async_op: the call returns at once, its wait times out
-- (after a healthy group, so that every rank arrives at once with timeout 1).
dist.init_process_group({ backend = BACKEND, timeout = 1 })
if rank ~= world - 1 then
  local started = lt.clock()
  local w = dist.all_reduce(lt.ones(3, ON), { async_op = true })
  check(lt.clock() - started < 0.5, "an async call whose peer is missing returns at once")
  fails("async timeout", { "all_reduce: timed out after 1 s (the process group's timeout)" },
    function() return w:wait() end)
  local waited = lt.clock() - started
  check(waited >= 0.9 and waited < 5, "the async timeout took " .. waited .. " s")
  fails("a broken group refuses async", { "broadcast: the process group is broken: all_reduce failed" },
    dist.broadcast, lt.ones(3, ON), { async_op = true })
end
dist.destroy_process_group()

io.stderr:flush()
if failures == 0 then print(string.format("ok collectives rank %d (%d checks)", rank, checks)) end
os.exit(failures == 0 and 0 or 1)
