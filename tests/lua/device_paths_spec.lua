-- Device paths: the plumbing a GPU run depends on (moves, copies between
-- devices, optimizer state, autocast and the scaler, clipping, data loading),
-- checked on a CUDA device. On the simulated slot (tests/simdev/sim_cuda.c:
-- two "cuda" devices running the CPU's kernels) every result must equal the
-- CPU's exactly; on a GPU, within float32 rounding (bfloat16 for autocast).
-- Anything that reaches the host shows as allocations on the CPU device.
-- Without a device the spec is pending.
--   LT_SIM_CUDA_DEVICES=2 busted --lua=build-sanitize/lt_simdev tests/lua/device_paths_spec.lua
local lt = require "lt"
local nn, F = lt.nn, lt.nn.functional

local simulated = os.getenv("LT_SIM_CUDA_DEVICES") ~= nil

-- max |got - want| relative to want's largest magnitude (at least 1) must be
-- 0 on the simulated slot, and at most tol on a GPU.
local function assert_close(want, got, tol)
  local e = (got:detach():cpu():double() - want:detach():double()):abs():max():item()
  local scale = math.max(1, want:detach():double():abs():max():item())
  local limit = simulated and 0 or tol
  assert(e / scale <= limit, string.format("off by %.3g (relative), allowed %.3g", e / scale, limit))
end

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

describe("device paths", function()
  if not lt.cuda.is_available() then
    pending("skipped: no CUDA device (or run under lt_simdev)")
    return
  end
  local devices = lt.cuda.device_count() > 1 and {"cuda", "cuda:1"} or {"cuda"}

  if simulated then
    it("the simulated slot has the devices asked for", function()
      assert.equal(tonumber(os.getenv("LT_SIM_CUDA_DEVICES")), lt.cuda.device_count())
    end)
  end

  for _, c in ipairs {
    {"SGD with momentum", function(p) return lt.optim.SGD(p, {lr = 0.1, momentum = 0.9}) end},
    {"Adam", function(p) return lt.optim.Adam(p, {lr = 1e-2}) end},
    {"AdamW, amsgrad", function(p) return lt.optim.AdamW(p, {lr = 1e-2, amsgrad = true}) end},
  } do
    for _, dev in ipairs(devices) do
      it(c[1] .. " on " .. dev .. " gives the CPU's parameters", function()
        local want = trained("cpu", c[2], 4)
        local got, opt = trained(dev, c[2], 4)
        for i, p in ipairs(got) do
          assert.equal(dev == "cuda" and "cuda:0" or dev, p.device)
          assert_close(want[i], p, 1e-4)
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
    for i, p in ipairs(got) do assert_close(want[i], p, 2e-2) end
  end)

  it("a CUDA region runs CUDA's float32 list, a CPU region torch.autocast('cpu')'s", function()
    lt.manual_seed(4)
    local x, w = lt.randn(4, 8), lt.randn(6, 8)
    for _, case in ipairs { {"cuda", "float16", "float32"}, {"cpu", "bfloat16", "bfloat16"} } do
      local device_type, dtype, wide = table.unpack(case)
      local xd, wd = x:to(device_type), w:to(device_type)
      lt.autocast({device_type = device_type, dtype = dtype}, function()
        local y = F.linear(xd, wd)
        assert.equal(dtype, y.dtype)
        for name, r in pairs { softmax = F.softmax(y, 2), log_softmax = F.log_softmax(y, 2), exp = y:exp(),
                               sum = y:sum(), layer_norm = F.layer_norm(y, {6}) } do
          assert.equal(wide, r.dtype, device_type .. " " .. name)
        end
        assert.equal("float32", F.mse_loss(y, y:detach()).dtype, device_type .. " mse_loss")
      end)
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

  it("clipping over parameters on the CPU and the device: one norm of all, each scaled where it is", function()
    lt.manual_seed(5)
    local ga, gb = lt.randn(5, 3), lt.randn(70001)
    for _, norm_type in ipairs {2, math.huge, 3} do
      local a, b = lt.zeros(5, 3):requires_grad_(true), lt.zeros(70001, {device = "cuda"}):requires_grad_(true)
      a.grad, b.grad = ga:clone(), gb:to("cuda")
      local total = nn.utils.clip_grad_norm_({a, b}, 0.1, {norm_type = norm_type})
      -- the reference: the same gradients, both on the CPU
      local c, d = lt.zeros(5, 3):requires_grad_(true), lt.zeros(70001):requires_grad_(true)
      c.grad, d.grad = ga:clone(), gb:clone()
      local want = nn.utils.clip_grad_norm_({c, d}, 0.1, {norm_type = norm_type})
      -- Over two devices the total is the norm of the devices' norms (as
      -- PyTorch's): float32 rounding apart from one norm over everything.
      local function close(x, y)
        local e = (x:cpu():double() - y:double()):abs():max():item() / math.max(1, y:abs():max():item())
        assert(e <= 1e-6, string.format("norm %s: off by %.3g", tostring(norm_type), e))
      end
      assert.equal("cpu", total.device)
      close(total, want)
      close(a.grad, c.grad)
      close(b.grad, d.grad)
      assert.equal("cuda:0", b.grad.device)
    end
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

  it("labels with ignore_index at either end are checked without reading them back", function()
    local x = lt.randn(6, 5):to("cuda")
    local below = lt.tensor({-100, 1, 5, -100, 2, 3}, {dtype = "int64"}):to("cuda")
    local above = lt.tensor({255, 1, 5, 255, 2, 3}, {dtype = "int64"}):to("cuda")
    assert.equal(0, cpu_allocations(function() F.cross_entropy(x, below, {ignore_index = -100}) end))
    assert.equal(0, cpu_allocations(function() F.cross_entropy(x, above, {ignore_index = 255}) end))
    -- a label out of range beside the ignored ones is still caught
    local bad = lt.tensor({-100, 1, 6, -100, 2, 3}, {dtype = "int64"}):to("cuda")
    local ok, err = pcall(F.cross_entropy, x, bad, {ignore_index = -100})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("target 6 is out of bounds", 1, true), err)
  end)

  it("labels copied into a buffer on the device are checked without reading them back", function()
    local x = lt.randn(8, 5):to("cuda")
    local buffer = lt.zeros({8}, {dtype = "int64", device = "cuda"})
    buffer:copy_(lt.randint(1, 5, {8}))
    assert.equal(0, cpu_allocations(function() F.cross_entropy(x, buffer) end))
    -- a partial write makes the range unknown again: then the check reads
    buffer:narrow(1, 1, 4):copy_(lt.randint(1, 5, {4}))
    assert.is_true(cpu_allocations(function() F.cross_entropy(x, buffer) end) > 0)
  end)

  it("copies between two devices keep values, and labels keep their range", function()
    if lt.cuda.device_count() < 2 then return end
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

  it("an event recorded on one device orders a stream of another", function()
    if lt.cuda.device_count() < 2 then return end
    local e = lt.cuda.Event({device = 0})
    e:record()
    local other = lt.cuda.Stream(1)
    e:wait(other) -- as cudaStreamWaitEvent: across devices
    e:wait() -- the current device's current stream
    -- Not query() at once: work queued before the record may still run (the
    -- CUDA emulator's streams run it only when waited for, as a busy GPU).
    e:synchronize()
    assert.is_true(e:query())
  end)

  it("each device keeps its own memory statistics", function()
    if lt.cuda.device_count() < 2 then return end
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
