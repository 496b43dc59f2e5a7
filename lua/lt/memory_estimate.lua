-- lt.memory.estimate(fn, ...): the peak memory of fn(...), predicted without
-- allocating it.
--
-- fn runs as it is, op by op, but every tensor it makes is a shape, a dtype
-- and a device without data: each op checks its arguments, computes its
-- result's metadata and allocates it through the allocator's own rules
-- (rounding, pools, segments, the collector's peak collections; on the CPU
-- the scratch of convolutions and 16-bit linear too), and runs no kernel.
-- The allocator is a shadow of the real one (engine/alloc/estimate.c): it
-- starts from what is allocated now and hands out address space only. So a
-- training step estimated at batch 512 allocates nothing of the batch, and
-- a model's parameters already allocated count as they will in the real run.
--
-- Afterwards everything is as before: tensors keep their values (no kernel
-- ran, in place or not), every .grad the step changed is put back (the
-- engine's journal), and so are the optimizers', schedulers' and grad
-- scalers' Lua state (their methods note it here through keep) and the
-- random generator. Tensors made inside have no values: :item() gives 0
-- for them (real tensors give theirs), :totable(), saving and loading fail,
-- printing shows the shape; one kept past the estimate fails at its next
-- use. Plain Lua effects of fn (its own counters) stay, as they would.
--
-- Returns a table: peak (predicted max_allocated, bytes), by_category
-- (what the peak was made of), reserved (predicted max_reserved), baseline
-- (allocated when it started), limit (lt.memory.set_limit's, or nil), fits
-- (false when the real run would raise out of memory: under the limit,
-- rounding, caching and fragmentation included) and oom (then the message it
-- would raise; the estimate goes on past it without the limit, so peak is
-- still the whole step's), device (its name), and devices (the same for
-- each device, by name: "cpu", "cuda:0", ...). The top-level figures are
-- those of the device fn allocated most bytes on (the CPU when none).
local core = require "lt.core"
local raise = require "lt.user_error"

local M = {}

-- The tables noted during the running estimate, in order, with their
-- snapshots: a list of {table, copy}.
local kept = nil
local kept_set = nil

local function snapshot(t)
  local copy = {}
  for k, v in pairs(t) do copy[k] = v end
  return copy
end

-- Notes t (and, with depth 2, each plain table inside it) to be put back as
-- it is now when the estimate ends. Cheap and idempotent; nothing outside an
-- estimate. Library code calls it before it changes state an estimate must
-- not leave behind.
function M.keep(t, depth)
  if kept == nil or kept_set[t] then return end
  kept_set[t] = true
  kept[#kept + 1] = { t, snapshot(t) }
  if depth and depth > 1 then
    for _, v in pairs(t) do
      if type(v) == "table" and getmetatable(v) == nil then M.keep(v, depth - 1) end
    end
  end
end

function M.running() return kept ~= nil end

local function put_back(list)
  for i = #list, 1, -1 do
    local t, copy = list[i][1], list[i][2]
    for k in pairs(t) do t[k] = nil end
    for k, v in pairs(copy) do t[k] = v end
  end
end

local function device_names()
  local names = { "cpu" }
  for i = 0, core.cuda.device_count() - 1 do names[#names + 1] = "cuda:" .. i end
  return names
end

-- The shadow's figures for a device; baseline is what it held at the start,
-- limit_bytes the real limit (the shadow drops its own past a failure).
local function figures(name, baseline, limit_bytes)
  local s = core.memory.stats(name)
  local peak = s.allocated_bytes.all.peak
  local limit = limit_bytes ~= 0 and limit_bytes or nil
  local oom = core.memory._estimate_oom(name)
  return {
    device = name,
    peak = peak,
    by_category = s.peak_by_category,
    reserved = s.reserved_bytes.all.peak,
    baseline = baseline,
    limit = limit,
    fits = oom == nil,
    oom = oom,
  }
end


function M.estimate(fn, ...)
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call) then
    raise(string.format("lt.memory.estimate: expected a function, got %s", type(fn)))
  end
  if kept ~= nil or core.memory._estimating() then
    raise("lt.memory.estimate: an estimate is already running (estimates do not nest)")
  end
  local names = device_names()
  local limits = {}
  for _, name in ipairs(names) do limits[name] = core.memory.get_limit(name) end
  local rng = core.get_rng_state()
  core.memory._estimate_begin()
  kept, kept_set = {}, {}
  -- Reading a device's figures makes its shadow: every device starts now.
  local baselines, made = {}, {}
  for _, name in ipairs(names) do
    local s = core.memory.stats(name)
    baselines[name], made[name] = s.allocated_bytes.all.current, s.allocated_bytes.all.allocated
  end
  local ok, err = pcall(fn, ...)
  local result
  if ok then
    local best
    result = { devices = {} }
    local most = -1
    for _, name in ipairs(names) do
      local f = figures(name, baselines[name], limits[name])
      result.devices[name] = f
      local bytes = core.memory.stats(name).allocated_bytes.all.allocated - made[name]
      if bytes > most then best, most = f, bytes end
    end
    for k, v in pairs(best) do result[k] = v end
  end
  -- What fn dropped goes back to the shadow, so that it can be released.
  collectgarbage("collect")
  local list = kept
  kept, kept_set = nil, nil
  core.memory._estimate_end()
  put_back(list)
  core.set_rng_state(rng)
  if not ok then error(err, 0) end
  return result
end

return M
