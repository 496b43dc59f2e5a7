-- Device paths on the simulated CUDA slot (tests/simdev/sim_cuda.c: two
-- "cuda" devices running the CPU's kernels). The kernels being the CPU's,
-- every result must equal the CPU's exactly, and anything that reaches the
-- host shows as allocations on the CPU device: so these check the plumbing
-- a GPU run depends on (moves, copies between devices, optimizer state,
-- autocast and the scaler, data loading) without a GPU.
--   LT_SIM_CUDA_DEVICES=2 busted --lua=build-sanitize/lt_simdev tests/simdev/simdev_spec.lua
local lt = require "lt"
local nn, F = lt.nn, lt.nn.functional

-- Allocations fn makes on the CPU device (host copies, host-side state).
local function cpu_allocations(fn)
  local before = lt.memory.stats("cpu").allocation.all.allocated
  fn()
  return lt.memory.stats("cpu").allocation.all.allocated - before
end

local function mlp()
  lt.manual_seed(0)
  return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
end

-- The model's parameters after `steps` steps of make_opt's optimizer on dev.
local function trained(dev, make_opt, steps, amp)
  local model = mlp()
  local opt = make_opt(model:parameters()) -- before the move, as PyTorch's usual order
  model:to(dev)
  lt.manual_seed(1)
  local x, y = lt.randn(16, 20):to(dev), lt.randint(1, 5, {16}):to(dev)
  local scaler = amp and lt.amp.GradScaler()
  for _ = 1, steps do
    opt:zero_grad()
    if amp then
      local loss = lt.autocast({device_type = dev:match("^%a+"), dtype = "bfloat16"},
        function() return F.cross_entropy(model(x), y) end)
      scaler:scale(loss):backward()
      scaler:step(opt)
      scaler:update()
    else
      F.cross_entropy(model(x), y):backward()
      opt:step()
    end
  end
  return model:parameters(), opt
end

describe("the simulated CUDA slot", function()
  it("has two devices", function()
    assert.is_true(lt.cuda.is_available())
    assert.equal(2, lt.cuda.device_count())
  end)

  for _, c in ipairs {
    {"SGD with momentum", function(p) return lt.optim.SGD(p, {lr = 0.1, momentum = 0.9}) end},
    {"Adam", function(p) return lt.optim.Adam(p, {lr = 1e-2}) end},
    {"AdamW, amsgrad", function(p) return lt.optim.AdamW(p, {lr = 1e-2, amsgrad = true}) end},
  } do
    for _, dev in ipairs {"cuda", "cuda:1"} do
      it(c[1] .. " on " .. dev .. " gives the CPU's parameters exactly", function()
        local want = trained("cpu", c[2], 4)
        local got, opt = trained(dev, c[2], 4)
        for i, p in ipairs(got) do
          assert.equal(dev == "cuda" and "cuda:0" or dev, p.device)
          assert.equal(0, (p:detach():cpu() - want[i]:detach()):abs():max():item())
        end
        -- the optimizer's state lives beside its parameters
        for _, state in pairs(opt.state) do
          for _, v in pairs(state) do
            if lt.is_tensor(v) and v:numel() > 1 then assert.equal(got[1].device, v.device) end
          end
        end
      end)
    end
  end

  it("autocast and the grad scaler on the device give the CPU's parameters", function()
    local make = function(p) return lt.optim.Adam(p, {lr = 1e-2}) end
    local want = trained("cpu", make, 3, true)
    local got = trained("cuda", make, 3, true)
    for i, p in ipairs(got) do
      assert.equal(0, (p:detach():cpu() - want[i]:detach()):abs():max():item())
    end
  end)

  it("a training step on the device (scaler, unscale_, clipping) does nothing on the host", function()
    local model = mlp():to("cuda")
    local opt = lt.optim.Adam(model:parameters(), {lr = 1e-3})
    local x, y = lt.randn(16, 20):to("cuda"), lt.randint(1, 5, {16}):to("cuda")
    local scaler = lt.amp.GradScaler()
    local function step()
      opt:zero_grad()
      local loss = lt.autocast({device_type = "cuda", dtype = "float16"},
        function() return F.cross_entropy(model(x), y) end)
      scaler:scale(loss):backward()
      scaler:unscale_(opt)
      nn.utils.clip_grad_norm_(model:parameters(), 1.0)
      scaler:step(opt)
      scaler:update()
    end
    step() -- the optimizer's state is made at the first step
    assert.equal(0, cpu_allocations(step))
  end)

  it("a DataLoader over device tensors gathers every batch on the device", function()
    local images, labels = lt.randn(256, 20):to("cuda"), lt.randint(1, 5, {256}):to("cuda")
    local loader = lt.data.DataLoader({images, labels}, {batch_size = 32, shuffle = true, seed = 3})
    local model = mlp():to("cuda")
    local batches = 0
    -- one allocation per epoch: the shuffled order, made on the host
    assert.equal(1, cpu_allocations(function()
      for xb, yb in loader:iter() do
        batches = batches + 1
        assert.equal("cuda:0", xb.device)
        F.cross_entropy(model(xb), yb)
      end
    end))
    assert.equal(8, batches)
    -- the same batches as the CPU's loader
    loader:set_epoch(1)
    local cpu_loader = lt.data.DataLoader({images:cpu(), labels:cpu()},
      {batch_size = 32, shuffle = true, seed = 3})
    local it_dev, it_cpu = loader:iter(), cpu_loader:iter()
    local xd, yd = it_dev()
    local xc, yc = it_cpu()
    assert.equal(0, (xd:cpu() - xc):abs():max():item())
    assert.equal(0, (yd:cpu() - yc):abs():max():item())
  end)

  it("copies between the two devices keep values, and labels keep their range", function()
    local t = lt.randn(5, 7)
    local a = t:to("cuda:0")
    local b = a:to("cuda:1")
    assert.equal("cuda:1", b.device)
    assert.equal(0, (b:cpu() - t):abs():max():item())
    local y = lt.randint(1, 7, {5}):to("cuda:0"):to("cuda:1")
    local x = lt.randn(5, 7):to("cuda:1")
    assert.equal(0, cpu_allocations(function() F.cross_entropy(x, y) end))
    -- an op on two devices is an error naming both
    local ok, err = pcall(function() return a + b end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("cuda:0", 1, true) and tostring(err):find("cuda:1", 1, true))
  end)

  it("each device keeps its own memory statistics", function()
    lt.gc()
    local before0, before1 = lt.memory.allocated("cuda:0"), lt.memory.allocated("cuda:1")
    local t = lt.empty({1024, 256}, {device = "cuda:1"})
    assert.equal(before0, lt.memory.allocated("cuda:0"))
    assert.equal(before1 + 1024 * 256 * 4, lt.memory.allocated("cuda:1"))
    t = nil -- luacheck: ignore
    lt.gc()
    assert.equal(before1, lt.memory.allocated("cuda:1"))
  end)

  it("an embedding and its backward on the device read no index back", function()
    local emb = nn.Embedding(50, 8):to("cuda")
    local idx = lt.randint(1, 50, {4, 6}):to("cuda")
    assert.equal(0, cpu_allocations(function() emb(idx):sum():backward() end))
    local want = nn.Embedding(50, 8)
    want.weight = nn.Parameter(emb.weight:detach():cpu())
    want(idx:cpu()):sum():backward()
    assert.equal(0, (emb.weight.grad:cpu() - want.weight.grad):abs():max():item())
  end)
end)
