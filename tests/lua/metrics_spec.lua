-- The recipes' metrics log and what the loop prints: --metrics writes JSON
-- lines (a start record, the logged steps, one record per epoch with its
-- evaluation), --plot the page of their curves, a resumed run continues the
-- log, --limit shortens the evaluation too, and the bars name every field.
-- Small subsets of Fashion-MNIST keep it to seconds.
local lt = require "lt"
local json = require "lt.json"
local cli = require "lt.recipes.cli"
local training = require "lt.recipes.training"
local nn, optim = lt.nn, lt.optim

local have_data = io.open("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") ~= nil
local describe_data = have_data and describe or pending

local function opts_for(extra)
  local opts = {batch_size = 64, threads = 0, checkpoint = "", resume = false, limit = 640, seed = 3,
    data = "/usr/share/datasets/fashion-mnist", epochs = 2, metrics = "", plot = "", log_every = 10}
  for k, v in pairs(extra or {}) do opts[k] = v end
  return opts
end

local function mlp()
  return nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10))
end

-- Runs fit (made as a recipe makes it) with what it prints captured.
local function run(extra)
  local opts = opts_for(extra)
  local train, test = training.fashion_loaders(opts)
  local model = mlp()
  local opt = optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9})
  opts.scheduler = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = opts.epochs})
  local printed = {}
  local sink = {write = function(self, ...)
    for _, s in ipairs {...} do printed[#printed + 1] = tostring(s) end
    return self
  end, flush = function(self) return self end}
  local real_print, real_stdout = print, io.stdout
  _G.print = function(...)
    local parts = table.pack(...)
    for i = 1, parts.n do parts[i] = tostring(parts[i]) end
    printed[#printed + 1] = table.concat(parts, "\t", 1, parts.n) .. "\n"
  end
  io.stdout = sink
  local ok, acc = pcall(training.fit, model, opt, train, test, opts)
  _G.print, io.stdout = real_print, real_stdout
  if not ok then error(acc, 0) end
  return acc, table.concat(printed), test
end

local function read_records(path)
  local records = {}
  for line in io.lines(path) do records[#records + 1] = json.decode(line) end
  return records
end

local function of_kind(records, kind)
  local out = {}
  for _, r in ipairs(records) do
    if r.kind == kind then out[#out + 1] = r end
  end
  return out
end

describe_data("the recipes' metrics log", function()
  it("writes a start line, every logged step and each epoch with its evaluation", function()
    local metrics, page = os.tmpname(), os.tmpname()
    local acc, printed = run({metrics = metrics, plot = page, log_every = 1})
    local records = read_records(metrics)
    local start = records[1]
    assert.equal("start", start.kind)
    assert.equal("cpu", start.device)
    assert.equal(10, start.steps_per_epoch)
    assert.equal(640, start.train_examples)
    assert.equal(640, start.test_examples)
    assert.equal(1, start.options.log_every)
    local steps, epochs = of_kind(records, "step"), of_kind(records, "epoch")
    assert.equal(20, #steps)
    assert.equal(2, #epochs)
    for i, s in ipairs(steps) do
      assert.equal(i, s.step)
      assert.equal((i - 1) // 10 + 1, s.epoch)
      assert.equal("float", math.type(s.batch_loss))
      assert.equal("integer", math.type(s.memory_allocated))
      assert.is_true(s.memory_reserved >= s.memory_allocated and s.memory_max_allocated >= s.memory_allocated)
    end
    -- The epoch's mean loss is the mean of its batches' (six digits kept).
    for e, record in ipairs(epochs) do
      local sum = 0
      for i = (e - 1) * 10 + 1, e * 10 do sum = sum + steps[i].batch_loss end
      assert.near(sum / 10, record.epoch_mean_loss, 1e-5 * record.epoch_mean_loss)
      assert.equal(e * 10, record.step)
      assert.is_true(record.test_loss > 0 and record.train_seconds >= 0 and record.eval_seconds >= 0)
    end
    assert.near(acc, epochs[2].test_accuracy, 1e-6)
    -- The rate each epoch trained at: the cosine's from 0.05.
    assert.equal(0.05, epochs[1].lr)
    assert.near(0.025, epochs[2].lr, 1e-12)
    assert.equal(0.05, steps[10].lr)
    -- Records keep kind, step, epoch first.
    local f = assert(io.open(metrics))
    f:read("l")
    assert.truthy(f:read("l"):match('^{"kind":"step","step":1,"epoch":1,'))
    f:close()
    -- The page of the same records.
    local html = assert(io.open(page)):read("a")
    assert.truthy(html:find('data-series="batch loss" data-points="20"', 1, true))
    assert.truthy(html:find('data-series="test accuracy"', 1, true))
    os.remove(metrics)
    os.remove(page)
    -- What it printed: each field named, the evaluation a bar of its own.
    assert.truthy(printed:find("epoch 1/2 ", 1, true), printed)
    assert.truthy(printed:find("epoch mean loss %d%.%d%d%d%d  lr 0%.0500"), printed)
    assert.truthy(printed:match("\neval +1/1 %(100%%%)  took [%d.]+ s  [%d.]+ batch/s  test loss %d%.%d+  test accuracy 0%.%d%d%d%d\n"), printed)
    assert.truthy(printed:match("test accuracy 0%.%d%d%d%d\n$"), printed)
  end)

  it("logs the first step and then every log_every steps", function()
    local metrics = os.tmpname()
    run({metrics = metrics, log_every = 4})
    local steps = {}
    for _, s in ipairs(of_kind(read_records(metrics), "step")) do steps[#steps + 1] = s.step end
    os.remove(metrics)
    assert.same({1, 4, 8, 12, 16, 20}, steps)
  end)

  it("continues on --resume: the lines up to the checkpoint kept, the rest trained again", function()
    local metrics, checkpoint = os.tmpname(), os.tmpname()
    run({metrics = metrics, checkpoint = checkpoint, epochs = 1, log_every = 5})
    -- As if the run had gone on into epoch 2 before it was killed.
    local f = assert(io.open(metrics, "a"))
    f:write('{"kind":"step","step":15,"epoch":2,"batch_loss":9.0}\n')
    f:close()
    run({metrics = metrics, checkpoint = checkpoint, epochs = 2, resume = true, log_every = 5})
    local records = read_records(metrics)
    os.remove(metrics)
    os.remove(checkpoint)
    local kinds = {}
    for i, r in ipairs(records) do kinds[i] = r.kind .. (r.step and (" " .. r.step) or "") end
    assert.same({"start", "step 1", "step 5", "step 10", "epoch 10", "start", "step 15", "step 20", "epoch 20"}, kinds)
    assert.equal(2, records[6].first_epoch)
    assert.is_true(records[7].batch_loss < 9)
  end)

  it("--limit N evaluates the first N test images", function()
    local _, test = training.fashion_loaders(opts_for({limit = 50}))
    assert.equal(50, test.size)
    local _, full = training.fashion_loaders(opts_for({limit = 0}))
    assert.equal(10000, full.size)
  end)

  it("command-line mistakes found before training are usage errors (no traceback)", function()
    local function usage(extra, wanted)
      local ok, err = pcall(run, extra)
      assert.is_false(ok)
      assert.is_true(cli.is_usage_error(err), tostring(err))
      assert.truthy(tostring(err):find(wanted, 1, true), tostring(err))
    end
    usage({metrics = "/nonexistent/dir/m.jsonl"}, "--metrics: /nonexistent/dir/m.jsonl: No such file or directory")
    usage({plot = "/nonexistent/dir/p.html"}, "--plot: /nonexistent/dir/p.html: No such file or directory")
    usage({checkpoint = "/nonexistent/dir/c.safetensors"}, "--checkpoint: /nonexistent/dir/c.safetensors: ")
    usage({checkpoint = "/nonexistent/c", resume = true}, "--resume: there is no checkpoint at /nonexistent/c")
    usage({device = "gpu"}, "--device must be cpu, cuda or cuda:N, got 'gpu'")
    usage({data = "/nonexistent"}, "--data /nonexistent: /nonexistent/train-images-idx3-ubyte.gz not found")
  end)
end)

describe("recipe options", function()
  local spec = training.fashion_options({{"epochs", 5, "passes over the training set", min = 1},
    {"lr", 0.01, "learning rate"}})

  it("--help names each value, its default once, and how --limit limits the evaluation", function()
    local text = cli.usage(spec, "r.lua")
    assert.falsy(text:find("(default: )", 1, true))
    assert.truthy(text:find("\n  %-%-epochs N +passes over the training set %(default 5%)\n"), text)
    assert.truthy(text:find("\n  %-%-resume +continue from %-%-checkpoint\n"), text)
    assert.truthy(text:find("train on the first N training images and evaluate on the first N", 1, true), text)
    for line in text:gmatch("[^\n]+") do
      assert.is_true(select(2, line:gsub("default", "")) <= 1, line)
      assert.is_true(#line <= 100, line)
    end
  end)

  it("refuses values out of range or of the wrong kind, as usage errors", function()
    local function refused(args, wanted)
      local ok, err = pcall(cli.parse, args, spec, "r.lua")
      assert.is_false(ok)
      assert.is_true(cli.is_usage_error(err))
      assert.equal(wanted, tostring(err))
    end
    refused({"--epochs", "0"}, "r.lua: option --epochs must be at least 1, got 0")
    refused({"--epochs", "1.5"}, "r.lua: option --epochs expects a whole number, got '1.5'")
    refused({"--batch_size", "0"}, "r.lua: option --batch_size must be at least 1, got 0")
    refused({"--limit", "-5"}, "r.lua: option --limit must be at least 0, got -5")
    refused({"--metrics"}, "r.lua: option --metrics needs a value (FILE)")
    assert.equal(0.5, cli.parse({"--lr", "0.5"}, spec, "r.lua").lr)
    assert.equal(2, cli.parse({"--lr", "2"}, spec, "r.lua").lr)
  end)
end)
