-- The recipes' training loop: it learns, it prints the accuracy line, and a run
-- resumed from a checkpoint ends with the same parameters as one that was not
-- interrupted. Small subsets of Fashion-MNIST keep it to seconds.
local lt = require "lt"
local training = require "lt.training"
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
