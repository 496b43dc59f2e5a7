-- The recipes' training loop: it learns, it prints the accuracy line, and a run
-- resumed from a checkpoint ends with the same parameters as one that was not
-- interrupted. Small subsets of Fashion-MNIST keep it to seconds.
local lt = require "lt"
local training = require "lt.recipes.training"
local nn, optim = lt.nn, lt.optim

local have_data = io.open("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") ~= nil
local describe_data = have_data and describe or pending

local function opts_for(extra)
  local opts = {batch_size = 64, threads = 0, checkpoint = "", resume = false, limit = 2000, seed = 7,
    data = "/usr/share/datasets/fashion-mnist", epochs = 1}
  for k, v in pairs(extra or {}) do opts[k] = v end
  return opts
end

local function small_test_loader()
  local x, y = lt.data.fashion_mnist("test")
  return lt.data.DataLoader({x:narrow(1, 1, 1000), y:narrow(1, 1, 1000)}, {batch_size = 500})
end

local function mlp()
  return nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
end

-- Runs fit with its output (print and the progress lines on io.stdout)
-- captured; returns the accuracy and what it printed.
local function quiet_fit(model, opt, train, test, opts)
  local printed = {}
  local sink = {
    write = function(self, ...)
      for _, s in ipairs {...} do printed[#printed + 1] = tostring(s) end
      return self
    end,
    flush = function(self) return self end,
  }
  local real_print, real_stdout = print, io.stdout
  _G.print = function(...)
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    printed[#printed + 1] = table.concat(parts, "\t", 1, parts.n) .. "\n"
  end
  io.stdout = sink
  local ok, acc = pcall(training.fit, model, opt, train, test, opts)
  _G.print, io.stdout = real_print, real_stdout
  assert(ok, acc)
  return acc, table.concat(printed)
end

describe_data("training.fit", function()
  it("learns Fashion-MNIST and prints the accuracy last", function()
    local opts = opts_for()
    local train = training.fashion_loaders(opts)
    local model = mlp()
    local acc, printed = quiet_fit(model, optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9}),
      train, small_test_loader(), opts)
    assert.is_true(acc > 0.6, "accuracy after one small epoch: " .. acc)
    assert.truthy(printed:match("test accuracy 0%.%d%d%d%d\n$"), printed)
  end)

  it("resumes from a checkpoint to the same parameters as an uninterrupted run", function()
    local path = os.tmpname()
    local function run(epochs, resume, checkpoint)
      local opts = opts_for({epochs = epochs, resume = resume, checkpoint = checkpoint or "", limit = 600})
      local train = training.fashion_loaders(opts) -- seeds lt: same initial weights each run
      local model = mlp()
      local opt = optim.Adam(model:parameters(), {lr = 1e-3})
      quiet_fit(model, opt, train, small_test_loader(), opts)
      return model
    end
    local straight = run(2)
    run(1, false, path)             -- stops after epoch 1, checkpoint written
    local resumed = run(2, true, path)
    os.remove(path)
    local a, b = straight:state_dict(), resumed:state_dict()
    for name, t in pairs(a) do
      assert.equal(0.0, (t - b[name]):abs():max():item(), name .. " differs after resuming")
    end
  end)

  it("resumes a cosine schedule into a longer run as that run's schedule, never at rate 0", function()
    -- The 1-epoch run anneals to 0 at its end; a 2-epoch resume continues on
    -- the 2-epoch schedule from epoch 1, so it equals a straight 2-epoch run.
    local path = os.tmpname()
    local function run(epochs, resume, checkpoint)
      local opts = opts_for({epochs = epochs, resume = resume, checkpoint = checkpoint or "", limit = 600})
      local train = training.fashion_loaders(opts)
      local model = mlp()
      local opt = optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9})
      opts.scheduler = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = epochs})
      local _, printed = quiet_fit(model, opt, train, small_test_loader(), opts)
      return model, printed, opts.scheduler
    end
    local straight = run(2)
    local after_one = run(1, false, path)
    local resumed, printed, sched = run(2, true, path)
    os.remove(path)
    assert.truthy(printed:find("resume: the checkpoint's CosineAnnealingLR had T_max 1; continuing with this run's T_max 2 from epoch 1", 1, true), printed)
    assert.equal(2, sched.T_max)
    local a, b, c = straight:state_dict(), resumed:state_dict(), after_one:state_dict()
    for name, t in pairs(a) do
      assert.equal(0.0, (t - b[name]):abs():max():item(), name .. " differs after resuming")
      assert.is_true((b[name] - c[name]):abs():max():item() > 0, name .. " did not train after resuming")
    end
  end)

  it("refuses to resume a different kind of schedule, before restoring anything", function()
    local path = os.tmpname()
    local model = nn.Linear(3, 2)
    local opt = optim.SGD(model:parameters(), {lr = 0.1})
    training.save_checkpoint(path, {model = model, optimizer = opt, epoch = 1,
      scheduler = optim.lr_scheduler.StepLR(opt, {step_size = 2})})
    local other = nn.Linear(3, 2)
    local before = other.weight:clone()
    local opt2 = optim.SGD(other:parameters(), {lr = 0.1})
    local ok, err = pcall(training.load_checkpoint, path, {model = other, optimizer = opt2,
      scheduler = optim.lr_scheduler.CosineAnnealingLR(opt2, {T_max = 3})})
    os.remove(path)
    assert.is_false(ok)
    assert.matches("holds a StepLR schedule, this run has a CosineAnnealingLR", err)
    assert.equal(0.0, (other.weight - before):abs():max():item())
  end)

  it("--accum auto trains where the whole batch runs out of memory, with the whole batch's result", function()
    local function run(accum, extra)
      local opts = opts_for({batch_size = 2000, limit = 2000, accum = accum})
      local train = training.fashion_loaders(opts) -- seeds lt: same initial weights each run
      local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
        nn.Linear(256, 10))
      local opt = optim.SGD(model:parameters(), {lr = 0.05})
      local test = small_test_loader()
      lt.gc()
      lt.memory.empty_cache()
      lt.memory.reset_peak()
      local base = lt.memory.allocated()
      if extra then lt.memory.set_limit(base + extra) end
      local said, real = {}, io.stderr
      io.stderr = {write = function(self, ...) for _, v in ipairs {...} do said[#said + 1] = v end return self end}
      local ok, err = pcall(quiet_fit, model, opt, train, test, opts)
      io.stderr = real
      lt.memory.set_limit(nil)
      return ok, ok and model or err, table.concat(said), lt.memory.max_allocated() - base
    end
    local _, whole, _, peak = run(1)
    -- Limits in MiB steps below the whole batch's peak (limits count
    -- reserved bytes, so the first ones still fit): the first where the
    -- whole batch fails and auto, in fewer chunks than rows, succeeds. Found
    -- rather than fixed, so that allocator changes move it without breaking
    -- the test; just below the whole batch's need fragmentation can defeat
    -- any split, so a few steps are tried.
    local extra, fails_whole, ok, auto, said = (math.ceil(peak / 2 ^ 20) + 4) * 2 ^ 20, 0, false, nil, nil
    while not ok and extra > 2 ^ 20 and fails_whole < 6 do
      extra = extra - 2 ^ 20
      local whole_ok, err = run(1, extra)
      if not whole_ok then
        assert(tostring(err):find("out of memory", 1, true), err)
        fails_whole = fails_whole + 1
        ok, auto, said = run("auto", extra)
      end
    end
    assert(fails_whole > 0, "the whole batch never ran out of memory")
    assert(ok, auto)
    assert.truthy(said:match("^lt%.microbatch: out of memory at 1 chunk; %d+ chunks of %d+ rows worked"), said)
    local want, got = whole:parameters(), auto:parameters()
    for i = 1, #want do
      local diff = (want[i] - got[i]):abs():max():item()
      assert(diff <= 1e-5 * want[i]:abs():max():item(), ("parameter %d differs by %g"):format(i, diff))
    end
  end)
end)

describe("learning-rate schedulers' load_state_dict", function()
  local function sched()
    local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})
    return optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = 4}), opt
  end

  it("restores the options too by default, as PyTorch", function()
    local s, opt = sched()
    s:load_state_dict({last_epoch = 2, base_lrs = {0.2}, T_max = 8, eta_min = 0})
    assert.equal(8, s.T_max)
    assert.equal(2, s.last_epoch)
    assert.near(0.2 * (1 + math.cos(math.pi * 2 / 8)) / 2, opt.param_groups[1].lr, 1e-15)
  end)

  it("refuses a malformed state whole, leaving the schedule as it was", function()
    local bad = {
      {{last_epoch = -1, base_lrs = {0.1}}, "last_epoch must be a non%-negative integer, got %-1"},
      {{last_epoch = 1, base_lrs = {0.1, 0.2}}, "base_lrs must list 1 rate, one per parameter group"},
      {{last_epoch = 1, base_lrs = {"x"}}, "base_lrs%[1%] must be a number, got x"},
      {{last_epoch = 1, base_lrs = {0.1}, optimizer = 5}, "unknown key 'optimizer'"},
      {{last_epoch = 1, base_lrs = {0.1}, T_max = 0}, "invalid T_max: 0 %(a positive number%)"},
      {5, "expected a table %(from state_dict%(%)%), got number"},
    }
    for _, case in ipairs(bad) do
      local s, opt = sched()
      local ok, err = pcall(s.load_state_dict, s, case[1])
      assert.is_false(ok)
      assert.matches("CosineAnnealingLR: load_state_dict: " .. case[2], err)
      assert.equal(0, s.last_epoch)
      assert.equal(4, s.T_max)
      assert.equal(0.1, opt.param_groups[1].lr)
    end
  end)
end)

describe("training checkpoints", function()
  it("keep a GradScaler's scale and growth tracker", function()
    local path = os.tmpname()
    local model = nn.Linear(3, 2)
    local scaler = lt.amp.GradScaler({init_scale = 1024.0, growth_interval = 7})
    scaler:load_state_dict({scale = 256.0, growth_factor = 3.0, backoff_factor = 0.25,
      growth_interval = 7, _growth_tracker = 5})
    training.save_checkpoint(path, {model = model, scaler = scaler, epoch = 3})
    local fresh = lt.amp.GradScaler()
    assert.equal(3, training.load_checkpoint(path, {model = nn.Linear(3, 2), scaler = fresh}))
    assert.same(scaler:state_dict(), fresh:state_dict())
    assert.equal(256.0, fresh:get_scale())
    -- A checkpoint written without a scaler leaves a scaler as it was.
    training.save_checkpoint(path, {model = model, epoch = 4})
    local untouched = lt.amp.GradScaler()
    training.load_checkpoint(path, {model = nn.Linear(3, 2), scaler = untouched})
    os.remove(path)
    assert.equal(65536.0, untouched:get_scale())
  end)

end)

describe("training.memory_options", function()
  local cli = require "lt.recipes.cli"
  it("--accum takes a count or auto", function()
    local spec = training.memory_options({})
    assert.equal("auto", cli.parse({"--accum", "auto"}, spec, "r.lua").accum)
    assert.equal(4, cli.parse({"--accum", "4"}, spec, "r.lua").accum)
    local ok, err = pcall(cli.parse, {"--accum", "x"}, spec, "r.lua")
    assert.is_false(ok)
    -- An error object that prints as its message: the host shows no traceback.
    assert.equal("r.lua: option --accum expects a number or auto, got 'x'", tostring(err))
  end)
end)
