-- Garbage, measured: how far a script written the ordinary way (no lt.del,
-- no <close>, no lt.gc()) peaks above the same script run "eager", with a
-- full collection before every Lua instruction, which frees what reference
-- counting (PyTorch) would free. Three runs of each figure:
--   off     Lua's collector with lt's byte charging only (peak collections off)
--   written lt as it ships: peak collections on (bindings/memory.c)
--   eager   a collection before every instruction
-- over the two benchmark steps (scripts/bench/step.lua's MLP and CNN), a
-- transformer block's training step and every row of the memory-tricks
-- table (lua/lt/recipes/memory_tricks.lua), and then what peak collections cost:
-- time per step with them on and off, alternating, median of repeats.
--   lt scripts/bench/eager.lua [--only ID] [--no-tricks] [--no-cost] [--repeats N]
local lt = lt or require "lt"
local cli, tricks = require "lt.recipes.cli", require "lt.recipes.memory_tricks"

local opts = cli.parse(arg, {
  {"only", "", "one memory-tricks technique (an id), or none of them with --no-tricks"},
  {"no_tricks", false, "skip the memory-tricks rows"},
  {"no_cost", false, "skip the timing of peak collections"},
  {"repeats", 7, "timing repeats (the median is reported)"},
}, "scripts/bench/eager.lua")

lt.set_num_threads(1)

local steps = dofile("scripts/bench/steps.lua")

-- ---- the three ways of running ----

local function eager_hook() collectgarbage() end

-- fn(...) run the given way; returns its results.
local function run(mode, fn, ...)
  lt.memory._peak_collect(mode ~= "off")
  if mode == "eager" then debug.sethook(eager_hook, "", 1) end
  local results = table.pack(pcall(fn, ...))
  debug.sethook()
  lt.memory._peak_collect(true)
  if not results[1] then error(results[2], 0) end
  return table.unpack(results, 2, results.n)
end

-- The peak of the second and third steps, everything included (model,
-- data, gradients, optimizer state), as torch.cuda.max_memory_allocated()
-- gives it in a fresh process.
local function step_peak(make, batch)
  return function()
    lt.gc()
    local before = lt.memory.allocated("cpu")
    local step = make(batch)
    step()
    lt.gc()
    lt.memory.reset_peak("cpu")
    step()
    step()
    return lt.memory.max_allocated("cpu") - before
  end
end

local MODES = {"off", "written", "eager"}

local function mib(b) return ("%.2f"):format(b / 2 ^ 20) end
local function over(a, e) return e > 0 and ("%+.1f%%"):format(100 * (a - e) / e) or "-" end

local function row(label, peaks)
  print(("%-46s %10s %10s %10s %9s %9s"):format(label, mib(peaks.off), mib(peaks.written), mib(peaks.eager),
    over(peaks.off, peaks.eager), over(peaks.written, peaks.eager)))
end

print(("%-46s %10s %10s %10s %9s %9s"):format("peak MiB", "off", "written", "eager", "off/eager", "written/eager"))
for _, s in ipairs(steps) do
  for _, batch in ipairs({128, 1}) do
    local peaks = {}
    for _, mode in ipairs(MODES) do
      lt.manual_seed(0)
      peaks[mode] = run(mode, step_peak(s.make, batch))
    end
    row(("%s, batch %d"):format(s.name, batch), peaks)
  end
end

if not opts.no_tricks then
  local list = tricks.techniques
  if opts.only ~= "" then
    local only = tricks.techniques[opts.only]
    if not only then error("scripts/bench/eager.lua: unknown technique '" .. opts.only .. "'", 0) end
    list = {only}
  end
  for _, t in ipairs(list) do
    for _, model_name in ipairs(t.models) do
      local without, with = {}, {}
      for _, mode in ipairs(MODES) do
        without[mode], with[mode] = run(mode, t.measure, model_name)
      end
      local label = ("%s, %s"):format(t.name, tricks.MODEL_NAMES[model_name])
      row(label .. ": without", without)
      row(label .. ": with", with)
    end
  end
end

-- ---- what peak collections cost ----

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

-- Milliseconds per step over n steps (after 3 warm-up steps).
local function time_steps(step, n)
  for _ = 1, 3 do step() end
  local t0 = lt.clock()
  for _ = 1, n do step() end
  return (lt.clock() - t0) * 1e3 / n
end

if not opts.no_cost then
  print()
  print(("%-40s %10s %10s %8s %12s"):format("time per step (1 thread)", "off ms", "written ms", "cost", "collections"))
  for _, s in ipairs(steps) do
    for _, batch in ipairs({128, 1}) do
      lt.manual_seed(0)
      local step = s.make(batch)
      local n = math.max(5, math.floor(200 / (batch == 1 and 1 or 8)))
      if s.name:match("CNN") then n = batch == 1 and 100 or 5 end
      local times = {off = {}, written = {}}
      local c0 = lt.memory.stats("cpu").num_peak_collections
      for _ = 1, opts.repeats do
        for _, mode in ipairs({"off", "written"}) do -- alternating
          times[mode][#times[mode] + 1] = run(mode, time_steps, step, n)
        end
      end
      local collections = (lt.memory.stats("cpu").num_peak_collections - c0) / (opts.repeats * (n + 3))
      local off, on = median(times.off), median(times.written)
      print(("%-40s %10.3f %10.3f %+7.1f%% %9.2f/step"):format(("%s, batch %d"):format(s.name, batch), off, on,
        100 * (on - off) / off, collections))
    end
  end
end
