-- lt.data.DistributedSampler and DataLoader{sampler=} with explicit
-- num_replicas and rank (no process group needed): PyTorch's rule for the
-- padding and the interleaving, the single-process loader's order shared out,
-- every sample once per epoch across the ranks, epochs that differ, and the
-- errors.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local data = lt.data

-- PyTorch's DistributedSampler.__iter__, written as it is there (0-based
-- positions over a Lua list), applied to a given epoch order.
local function pytorch_rule(order, replicas, rank, drop_last)
  local n = #order
  local num_samples
  if drop_last and n % replicas ~= 0 then
    num_samples = math.ceil((n - replicas) / replicas)
  else
    num_samples = math.ceil(n / replicas)
  end
  local total = num_samples * replicas
  local indices = table.move(order, 1, n, 1, {})
  if not drop_last then
    local padding = total - n
    if padding <= n then
      for i = 1, padding do indices[#indices + 1] = indices[i] end
    else
      local reps = math.ceil(padding / n)
      local repeated = {}
      for _ = 1, reps do table.move(indices, 1, n, #repeated + 1, repeated) end
      for i = 1, padding do indices[n + i] = repeated[i] end
    end
  else
    for i = #indices, total + 1, -1 do indices[i] = nil end
  end
  local out = {}
  for pos = rank, total - 1, replicas do out[#out + 1] = indices[pos + 1] end
  return out
end

local function loader_order(n, seed, epoch)
  local loader = data.DataLoader({ lt.arange(1, n + 1) }, { batch_size = n, shuffle = true, seed = seed })
  loader:set_epoch(epoch)
  local x = loader:iter()()
  return x:totable()
end

describe("DistributedSampler", function()
  it("interleaves the padded order as PyTorch does (no shuffle)", function()
    local got = {}
    for r = 0, 2 do got[r + 1] = data.DistributedSampler(10, { num_replicas = 3, rank = r, shuffle = false }):indices() end
    assert.same({ { 1, 4, 7, 10 }, { 2, 5, 8, 1 }, { 3, 6, 9, 2 } }, got)
    for r = 0, 2 do
      local s = data.DistributedSampler(10, { num_replicas = 3, rank = r, shuffle = false, drop_last = true })
      assert.equal(3, #s)
      assert.same({ r + 1, r + 4, r + 7 }, s:indices())
    end
    -- more replicas than samples: the padding repeats the order as often as needed
    for r = 0, 4 do
      assert.same({ r % 2 + 1 }, data.DistributedSampler(2, { num_replicas = 5, rank = r, shuffle = false }):indices())
    end
  end)

  it("shares out the single-process loader's shuffled order of the same epoch and seed", function()
    for _, case in ipairs { { 10, 3, false }, { 10, 3, true }, { 12, 4, false }, { 7, 2, true }, { 3, 5, false } } do
      local n, replicas, drop_last = case[1], case[2], case[3]
      for epoch = 1, 3 do
        local order = loader_order(n, 42, epoch)
        for rank = 0, replicas - 1 do
          local s = data.DistributedSampler(n, { num_replicas = replicas, rank = rank, seed = 42, drop_last = drop_last })
          s:set_epoch(epoch)
          local got = s:indices()
          assert.same(pytorch_rule(order, replicas, rank, drop_last), got)
          assert.equal(#s, #got)
        end
      end
    end
  end)

  it("covers every sample exactly once per epoch across the ranks (when the size divides)", function()
    local n, replicas = 24, 3
    local previous
    for epoch = 1, 3 do
      local count, first = {}, {}
      for rank = 0, replicas - 1 do
        local s = data.DistributedSampler(n, { num_replicas = replicas, rank = rank, seed = 7 })
        for _, i in ipairs(s:indices(epoch)) do count[i] = (count[i] or 0) + 1 end
        if rank == 0 then first = s:indices(epoch) end
      end
      for i = 1, n do assert.equal(1, count[i]) end
      assert.are_not.same(previous, first) -- each epoch its own order
      previous = first
    end
  end)

  it("drives DataLoader{sampler=} by the loader's epochs", function()
    local x = lt.arange(1, 11)
    local seen = {}
    for rank = 0, 1 do
      local loader = data.DataLoader({ x }, { batch_size = 2,
        sampler = data.DistributedSampler(x, { num_replicas = 2, rank = rank, seed = 3 }) })
      assert.equal(3, #loader) -- 5 samples in batches of 2
      for batch in loader:epoch(2) do
        for _, v in ipairs(batch:totable()) do seen[#seen + 1] = v end
      end
    end
    table.sort(seen)
    assert.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, seen)
  end)

  it("takes any dataset with a length", function()
    local ds = setmetatable({}, { __len = function() return 5 end })
    assert.equal(3, #data.DistributedSampler(ds, { num_replicas = 2, rank = 0 }))
    assert.equal(2, #data.DistributedSampler({ images = lt.zeros(4, 2) }, { num_replicas = 2, rank = 1 }))
    local seen = {}
    for i in data.DistributedSampler(4, { num_replicas = 2, rank = 1, shuffle = false }):iter() do seen[#seen + 1] = i end
    assert.same({ 2, 4 }, seen)
  end)

  it("refuses bad options with clear errors", function()
    h.fails(function() data.DistributedSampler(10, { num_replicas = 2, rank = 2 }) end,
      "DistributedSampler: invalid rank 2, rank should be in the interval [0, 1]")
    h.fails(function() data.DistributedSampler(10, { num_replicas = 0, rank = 0 }) end,
      "DistributedSampler: num_replicas must be a positive integer, got 0")
    h.fails(function() data.DistributedSampler(10, { num_replicas = 2, rank = 0, sede = 1 }) end,
      "DistributedSampler: unknown option 'sede' (did you mean 'seed'?)")
    h.fails(function() data.DistributedSampler(10, { num_replicas = 2, rank = 0, seed = 1.5 }) end,
      "DistributedSampler: seed must be an integer, got 1.5")
    h.fails(function() data.DistributedSampler("x", { num_replicas = 2, rank = 0 }) end,
      "DistributedSampler: expected a dataset")
    h.fails(function() data.DistributedSampler(10, { num_replicas = 2, rank = 0 }):set_epoch(-1) end,
      "DistributedSampler: set_epoch expects a non-negative integer, got -1")
    local s = data.DistributedSampler(4, { num_replicas = 2, rank = 0 })
    h.fails(function() data.DataLoader({ lt.zeros(4) }, { sampler = s, shuffle = true }) end,
      "DataLoader: sampler option is mutually exclusive with shuffle")
    h.fails(function() data.DataLoader({ lt.zeros(4) }, { sampler = s, distributed = true }) end,
      "DataLoader: give either sampler or distributed = true, not both")
    h.fails(function() data.DataLoader({ lt.zeros(4) }, { sampler = {} }) end,
      "DataLoader: sampler must have indices(epoch) and a length")
    if not (package.loaded["lt.distributed"] and package.loaded["lt.distributed"].is_initialized()) then
      h.fails(function() data.DistributedSampler(4) end,
        "DistributedSampler: num_replicas is needed when no process group is initialized")
    end
  end)
end)
