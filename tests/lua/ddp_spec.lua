-- DistributedDataParallel and ZeroRedundancyOptimizer in one process: over
-- a recording process group (the collectives' calls are what is checked:
-- buckets, their order and contents, no_sync, the shape check's error as a
-- second rank would make it, ZeRO's partition). lt.distributed's own group
-- (a world of one without mpirun, and several ranks) is tests/host/test_ddp.sh's:
-- this spec never starts MPI.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn = lt.nn

-- A process group of `world` ranks seen from `rank`, whose collectives
-- change nothing (every other rank holds what this one does) and record
-- each call. all_gather of another rank's data goes through `others`.
local function recording_group(world, rank, others)
  local g = { calls = {} }
  local function done(opts)
    if opts and opts.async_op then return { wait = function() end } end
  end
  function g.is_initialized() return true end
  function g.get_rank() return rank or 0 end
  function g.get_world_size() return world or 1 end
  function g.all_reduce(t, opts)
    g.calls[#g.calls + 1] = { "all_reduce", opts and opts.op, t:clone() }
    return done(opts)
  end
  function g.broadcast(t, opts)
    g.calls[#g.calls + 1] = { "broadcast", opts and opts.src }
    return done(opts)
  end
  function g.all_gather(list, t, opts)
    for r, out in ipairs(list) do out:copy_(others and others(r - 1, t) or t) end
    return done(opts)
  end
  return g
end

local function reduces(g)
  local out = {}
  for _, c in ipairs(g.calls) do
    if c[1] == "all_reduce" and c[2] == "avg" then out[#out + 1] = c[3] end
  end
  return out
end

local function mlp()
  lt.manual_seed(3)
  return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
end

local function grads(model)
  local out = {}
  for name, p in model:named_parameters() do out[name] = p.grad and p.grad:totable() end
  return out
end

describe("DistributedDataParallel", function()
  it("wraps the model: forward, module, state_dict names with PyTorch's module. prefix", function()
    local model = mlp()
    local ddp = nn.parallel.DistributedDataParallel(model, { process_group = recording_group() })
    assert.equal(model, ddp.module)
    local x = lt.randn(2, 4)
    assert.same(model(x):totable(), ddp(x):totable())
    local keys = {}
    for k in pairs(ddp:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.same({ "module.0.bias", "module.0.weight", "module.2.bias", "module.2.weight" }, keys)
    assert.equal(4, #ddp:parameters())
  end)

  it("checks shapes and broadcasts rank 0's parameters and buffers at wrap time, coalesced by dtype", function()
    local g = recording_group()
    local from_rank_0 = g.broadcast
    g.broadcast = function(t, opts) -- rank 0's values: 1, 2, 3, ... over the coalesced buffer
      t:copy_(lt.arange(1, t:numel() + 1):view(t.shape))
      return from_rank_0(t, opts)
    end
    local model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    nn.parallel.DistributedDataParallel(model, { process_group = g })
    local kinds = {}
    for _, c in ipairs(g.calls) do kinds[#kinds + 1] = c[1] .. ":" .. tostring(c[2]) end
    -- the longest shape list (max); the 6 float32 parameters in one buffer; the
    -- float32 buffers in one and the int64 count in another
    assert.same({ "all_reduce:max", "broadcast:0", "broadcast:0", "broadcast:0" }, kinds)
    assert.same({ { 1, 2 }, { 3, 4 } }, model[1].weight:totable())
    assert.same({ 5, 6 }, model[1].bias:totable())
    assert.same({ 7, 8 }, model[2].weight:totable())
    assert.same({ 9, 10 }, model[2].bias:totable())
    assert.same({ 1, 2 }, model[2].running_mean:totable())
    assert.same({ 3, 4 }, model[2].running_var:totable())
    assert.equal(1, model[2].num_batches_tracked:item())
  end)

  it("buckets parameters in reverse order, the first capped at 1 MiB, then at bucket_cap_mb", function()
    local model = nn.Sequential(nn.Linear(1024, 256), nn.Linear(256, 1024), nn.Linear(1024, 8))
    local ddp = nn.parallel.DistributedDataParallel(model, { process_group = recording_group() })
    -- 2.* is 32 KiB, 1.weight 1 MiB: the first bucket closes there
    assert.same({ { "2.bias", "2.weight", "1.bias", "1.weight" }, { "0.bias", "0.weight" } }, ddp:bucket_names())
    local small = nn.parallel.DistributedDataParallel(model, { process_group = recording_group(), bucket_cap_mb = 0.5 })
    assert.same({ { "2.bias", "2.weight", "1.bias", "1.weight" }, { "0.bias", "0.weight" } }, small:bucket_names())
    local tiny = nn.parallel.DistributedDataParallel(mlp(), { process_group = recording_group(), bucket_cap_mb = 1e-4 })
    assert.same({ { "2.bias", "2.weight" }, { "0.bias", "0.weight" } }, tiny:bucket_names())
  end)

  it("all-reduces each bucket's flat gradients (avg) during backward, and leaves the averages in .grad", function()
    local g = recording_group()
    local model, plain = mlp(), mlp()
    local ddp = nn.parallel.DistributedDataParallel(model, { process_group = g, bucket_cap_mb = 1e-4 })
    local x = lt.randn(5, 4)
    local y = ddp(x):pow(2):sum()
    y:backward()
    plain(x):pow(2):sum():backward()
    assert.same(grads(plain), grads(model))
    local sent = reduces(g)
    assert.equal(2, #sent)
    -- bucket 1 holds 2.bias then 2.weight, flattened
    local b1 = lt.cat({ plain[3].bias.grad, plain[3].weight.grad:flatten() }, 1)
    assert.same(b1:totable(), sent[1]:totable())
  end)

  it("skips communication under no_sync; the next synced backward reduces the accumulated sum", function()
    local g = recording_group()
    local model, plain = mlp(), mlp()
    local ddp = nn.parallel.DistributedDataParallel(model, { process_group = g })
    local x1, x2 = lt.randn(3, 4), lt.randn(3, 4)
    do
      local guard <close> = ddp:no_sync()
      ddp(x1):sum():backward()
    end
    assert.equal(0, #reduces(g))
    ddp(x2):sum():backward()
    plain(x1):sum():backward()
    plain(x2):sum():backward()
    assert.equal(1, #reduces(g))
    for name, gr in pairs(grads(plain)) do
      local got = grads(model)[name]
      for i, row in ipairs(gr) do
        if type(row) == "table" then
          for j, v in ipairs(row) do assert.near(v, got[i][j], 1e-6) end
        else
          assert.near(row, got[i], 1e-6)
        end
      end
    end
    -- the function form runs fn without communication and returns its results
    assert.equal(7, ddp:no_sync(function() ddp(x1):sum():backward() return 7 end))
    assert.equal(1, #reduces(g))
  end)

  it("reduces too when its children run without its forward (nn.checkpoint_sequential(ddp, ...))", function()
    local g = recording_group()
    local model, plain = mlp(), mlp()
    local ddp = nn.parallel.DistributedDataParallel(model, { process_group = g, bucket_cap_mb = 1e-4 })
    local x = lt.randn(5, 4)
    local y = nn.checkpoint_sequential(ddp.module, 2, x):sum()
    y:backward() -- the recomputing backward inside gives the hooks their gradients
    plain(x):sum():backward()
    assert.equal(2, #reduces(g))
    for name, gr in pairs(grads(plain)) do
      local got = lt.tensor(grads(model)[name])
      assert.is_true((got - lt.tensor(gr)):abs():max():item() < 1e-6, name)
    end
  end)

  it("leaves out parameters that do not require grad", function()
    local model = mlp()
    model[1].weight:requires_grad_(false)
    local ddp = nn.parallel.DistributedDataParallel(model, { process_group = recording_group() })
    assert.same({ { "2.bias", "2.weight", "0.bias" } }, ddp:bucket_names())
    ddp(lt.randn(2, 4)):sum():backward()
    assert.is_nil(model[1].weight.grad)
    ddp(lt.randn(2, 4)):sum():backward() -- the reduction finished: no error
  end)

  it("names the parameters that got no gradient at the next forward, or handles them with find_unused_parameters", function()
    local Two = nn.Module:extend("DdpSpecTwo")
    function Two:init() self.used = nn.Linear(2, 2); self.spare = nn.Linear(2, 2) end
    function Two:forward(x) return self.used(x) end
    local ddp = nn.parallel.DistributedDataParallel(Two(), { process_group = recording_group() })
    ddp(lt.randn(1, 2)):sum():backward()
    h.fails(function() ddp(lt.randn(1, 2)) end,
      "DistributedDataParallel: the previous backward produced no gradient for parameter(s) 3 ('spare.weight'), "
        .. "4 ('spare.bias')", "find_unused_parameters = true")
    ddp(lt.randn(1, 2)):sum():backward() -- the error reset the reducer: training can go on
    local g = recording_group()
    local found = nn.parallel.DistributedDataParallel(Two(), { process_group = g, find_unused_parameters = true })
    for _ = 1, 2 do
      found(lt.randn(1, 2)):sum():backward()
      assert.is_nil(found.module.spare.weight.grad) -- unused on every rank: no gradient, as PyTorch
      assert.is_table(found.module.used.weight.grad:totable())
    end
    assert.equal(2, #reduces(g))
  end)

  it("refuses, on every rank, a model whose shapes differ between ranks, naming the parameter", function()
    local model = mlp()
    -- rank 1 has a 9-wide first layer: its shape code differs at that weight
    local function others(r, t)
      if r == 0 then return t end
      local code = t:totable()
      code[4] = 9 -- count, ndim, 8, 4 -> 8, 9
      return lt.tensor(code, { dtype = "int64" })
    end
    h.fails(function()
      nn.parallel.DistributedDataParallel(model, { process_group = recording_group(2, 0, others) })
    end, "DistributedDataParallel: parameter 1 ('0.weight') has shape [8, 4] on rank 0 and [8, 9] on rank 1")
    local function fewer(r, t)
      if r == 0 then return t end
      local code = t:totable()
      code[1] = 3
      return lt.tensor(code, { dtype = "int64" })
    end
    h.fails(function()
      nn.parallel.DistributedDataParallel(model, { process_group = recording_group(2, 0, fewer) })
    end, "DistributedDataParallel: rank 0 has 4 parameters, rank 1 has 3 (the models differ)")
  end)

  it("refuses bad arguments", function()
    h.fails(function() nn.parallel.DistributedDataParallel(42) end,
      "DistributedDataParallel: expected a module to wrap, got number")
    h.fails(function() nn.parallel.DistributedDataParallel(mlp(), { bucket_cap = 1 }) end,
      "DistributedDataParallel: unknown option 'bucket_cap' (did you mean 'bucket_cap_mb'?)")
    h.fails(function()
      nn.parallel.DistributedDataParallel(mlp(), { bucket_cap_mb = 0, process_group = recording_group() })
    end, "DistributedDataParallel: bucket_cap_mb must be a positive number, got 0")
    local idle = recording_group()
    idle.is_initialized = function() return false end
    h.fails(function() nn.parallel.DistributedDataParallel(mlp(), { process_group = idle }) end,
      "DistributedDataParallel: no process group: call lt.distributed.init_process_group() first")
  end)
end)

describe("ZeroRedundancyOptimizer", function()
  local function params(sizes)
    local out = {}
    for i, n in ipairs(sizes) do out[i] = lt.zeros(n, { requires_grad = true }) end
    return out
  end

  it("partitions by PyTorch's greedy rule: largest first, to the rank with the fewest elements", function()
    local ps = params { 10, 100, 50, 60 }
    local z0 = lt.optim.ZeroRedundancyOptimizer(ps, lt.optim.Adam, { process_group = recording_group(2, 0) })
    local z1 = lt.optim.ZeroRedundancyOptimizer(ps, lt.optim.Adam, { process_group = recording_group(2, 1) })
    -- 100 -> 0, 60 -> 1, 50 -> 1 (60 < 100), 10 -> 0 (100 < 110)
    assert.same({ ps[1], ps[2] }, z0:shard())
    assert.same({ ps[3], ps[4] }, z1:shard())
  end)

  it("keeps the state of its shard only, and broadcasts the parameters from their owners", function()
    local ps = params { 10, 100, 50, 60 }
    local g = recording_group(2, 1)
    local z = lt.optim.ZeroRedundancyOptimizer(ps, lt.optim.Adam, { lr = 0.1, process_group = g })
    for _, p in ipairs(ps) do p.grad = lt.ones(p:numel()) end
    z:step()
    assert.equal((50 + 60) * 4 * 2, z:state_bytes()) -- exp_avg and exp_avg_sq of its 110 elements
    local srcs = {}
    for _, c in ipairs(g.calls) do srcs[#srcs + 1] = c[2] end
    assert.same({ 0, 1 }, srcs) -- one coalesced broadcast per owner
    assert.near(-0.1, ps[3][1]:item(), 1e-6) -- stepped here
    assert.equal(0, ps[1][1]:item())          -- rank 0's: it broadcasts the new values
    z:zero_grad()
    assert.is_nil(ps[1].grad)
  end)

  it("at world size 1 equals plain Adam, with the same state bytes and state_dict", function()
    local model, plain = mlp(), mlp()
    local z = lt.optim.ZeroRedundancyOptimizer(model:parameters(), lt.optim.Adam,
      { lr = 0.01, process_group = recording_group() })
    local adam = lt.optim.Adam(plain:parameters(), { lr = 0.01 })
    local x = lt.randn(4, 4)
    for _ = 1, 3 do
      z:zero_grad(); model(x):sum():backward(); z:step()
      adam:zero_grad(); plain(x):sum():backward(); adam:step()
    end
    assert.equal(adam:state_bytes(), z:state_bytes())
    assert.same(plain:state_dict()["0.weight"]:totable(), model:state_dict()["0.weight"]:totable())
    local sd, ref = z:state_dict(), adam:state_dict()
    assert.equal(ref.state[1].step, sd.state[1].step)
    assert.same(ref.state[1].exp_avg:totable(), sd.state[1].exp_avg:totable())
    assert.same(ref.param_groups[1].params, sd.param_groups[1].params)
    -- it loads into a fresh ZeRO and into plain Adam
    local again = lt.optim.ZeroRedundancyOptimizer(model:parameters(), lt.optim.Adam,
      { process_group = recording_group() })
    again:load_state_dict(sd)
    assert.equal(z:state_bytes(), again:state_bytes())
    assert.equal(0.01, again.param_groups[1].lr)
    lt.optim.Adam(plain:parameters()):load_state_dict(sd)
  end)

  it("passes a schedule's learning rate to its shard, and returns a closure's loss", function()
    local model = mlp()
    local z = lt.optim.ZeroRedundancyOptimizer(model:parameters(), lt.optim.SGD,
      { lr = 0.5, process_group = recording_group() })
    local sched = lt.optim.lr_scheduler.StepLR(z, { step_size = 1, gamma = 0.1 })
    sched:step()
    local loss = z:step(function()
      z:zero_grad()
      local l = model(lt.ones(1, 4)):sum()
      l:backward()
      return l
    end)
    assert.is_true(lt.is_tensor(loss))
    assert.near(0.05, z.optim.param_groups[1].lr, 1e-12)
  end)

  it("refuses a missing optimizer class", function()
    h.fails(function() lt.optim.ZeroRedundancyOptimizer(params { 2 }, "Adam", { process_group = recording_group() }) end,
      "ZeroRedundancyOptimizer: expected an optimizer class (such as lt.optim.Adam) as argument 2, got string")
  end)
end)
