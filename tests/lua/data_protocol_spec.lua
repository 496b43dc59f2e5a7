-- The Dataset protocol (#dataset and dataset:get(i)) through lt.data.DataLoader:
-- batches, drop_last, the default collate of nested samples, a custom
-- collate, shuffled orders fixed by the seed, the prefetch hints that let a
-- dataset load ahead, and the errors of datasets and samples that do not fit.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

-- A dataset of n samples made by make(i), and a log of the calls it got.
local function dataset(n, make, with_prefetch)
  local D = {}
  D.__index = D
  D.__len = function(self) return self.n end
  function D:get(i)
    self.log[#self.log + 1] = "get " .. i
    return make(i)
  end
  if with_prefetch then
    function D:prefetch(indices, workers)
      self.log[#self.log + 1] = "prefetch " .. table.concat(indices, ",") .. " w" .. workers
    end
  end
  return setmetatable({ n = n, log = {} }, D)
end

local function values(t) return t:totable() end

describe("the Dataset protocol", function()
  it("batches samples in order, with and without drop_last", function()
    local ds = dataset(10, function(i) return lt.full({ 2 }, i, { dtype = "float32" }) end)
    local keep = lt.data.DataLoader(ds, { batch_size = 4 })
    local drop = lt.data.DataLoader(ds, { batch_size = 4, drop_last = true })
    assert.equal(3, #keep)
    assert.equal(2, #drop)
    local seen = {}
    for x in keep:iter() do
      assert.equal("float32", x.dtype)
      seen[#seen + 1] = x:select(2, 1):totable()
    end
    assert.same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10 } }, seen)
    local sizes = {}
    for x in drop:iter() do sizes[#sizes + 1] = x.shape[1] end
    assert.same({ 4, 4 }, sizes)
    assert.equal(0, #lt.data.DataLoader(dataset(3, function(i) return i end), { batch_size = 4, drop_last = true }))
    assert.equal(1, #lt.data.DataLoader { dataset = dataset(3, function(i) return i end), batch_size = 4 })
  end)

  it("collates nested samples: tensors stacked, numbers as int64 or float32, strings as lists", function()
    local ds = dataset(5, function(i)
      return {
        image = lt.full({ 3, 2 }, i),
        label = i,
        weight = i / 2,
        flag = i % 2 == 0,
        meta = { id = "s" .. i, pair = { lt.tensor({ i, -i }), i * 10 } },
      }
    end)
    local batches = {}
    for b in lt.data.DataLoader(ds, { batch_size = 3 }):iter() do batches[#batches + 1] = b end
    assert.equal(2, #batches)
    local b = batches[1]
    assert.same({ 3, 3, 2 }, b.image.shape)
    assert.equal("int64", b.label.dtype)
    assert.same({ 1, 2, 3 }, values(b.label))
    assert.equal("float32", b.weight.dtype)
    assert.same({ 0.5, 1.0, 1.5 }, values(b.weight))
    assert.equal("bool", b.flag.dtype)
    assert.same({ false, true, false }, values(b.flag))
    assert.same({ "s1", "s2", "s3" }, b.meta.id)
    assert.same({ { 1, -1 }, { 2, -2 }, { 3, -3 } }, values(b.meta.pair[1]))
    assert.same({ 10, 20, 30 }, values(b.meta.pair[2]))
    assert.same({ 2, 3, 2 }, batches[2].image.shape)
  end)

  it("returns a list sample's parts as several values, as {images, labels} does", function()
    local ds = dataset(6, function(i) return { lt.full({ 2 }, i), i } end)
    local n = 0
    for x, y in lt.data.DataLoader(ds, { batch_size = 4 }):iter() do
      n = n + 1
      assert.same(values(y:float()), values(x:select(2, 1)))
    end
    assert.equal(2, n)
  end)

  it("takes a custom collate, given the samples and their dataset indices", function()
    local ds = dataset(5, function(i) return "item" .. i end)
    local calls = {}
    local loader = lt.data.DataLoader(ds, {
      batch_size = 2,
      collate = function(samples, indices)
        calls[#calls + 1] = table.concat(indices, ",")
        return table.concat(samples, "+")
      end,
    })
    local got = {}
    for s in loader:iter() do got[#got + 1] = s end
    assert.same({ "item1+item2", "item3+item4", "item5" }, got)
    assert.same({ "1,2", "3,4", "5" }, calls)
    -- default_collate is public, as PyTorch's
    local batch = lt.data.default_collate({ { a = 1 }, { a = 2 } })
    assert.same({ 1, 2 }, values(batch.a))
  end)

  it("shuffles reproducibly by seed, each sample once, as the in-memory loader orders", function()
    local function epoch(loader)
      local seen = {}
      for x in loader:iter() do
        for _, v in ipairs(x:totable()) do seen[#seen + 1] = v end
      end
      return seen
    end
    local ds = dataset(50, function(i) return i end)
    local a = lt.data.DataLoader(ds, { batch_size = 7, shuffle = true, seed = 11 })
    local b = lt.data.DataLoader(ds, { batch_size = 7, shuffle = true, seed = 11 })
    local a1, a2 = epoch(a), epoch(a)
    assert.same(a1, epoch(b))
    assert.same(a2, epoch(b))
    assert.are_not.same(a1, a2)
    local sorted = { table.unpack(a1) }
    table.sort(sorted)
    for i = 1, 50 do assert.equal(i, sorted[i]) end
    local memory = lt.data.DataLoader({ lt.arange(1, 51) }, { batch_size = 7, shuffle = true, seed = 11 })
    assert.same(a1, epoch(memory))
    -- without a seed: the global generator, so lt.manual_seed replays it
    local c = lt.data.DataLoader(ds, { batch_size = 5, shuffle = true })
    lt.manual_seed(3)
    local c1 = epoch(c)
    lt.manual_seed(3)
    assert.same(c1, epoch(c))
  end)

  it("announces the batches ahead to a dataset's prefetch, only with num_workers", function()
    local make = function(i) return i end
    local ds = dataset(7, make, true)
    local loader = lt.data.DataLoader(ds, { batch_size = 2, num_workers = 3, prefetch_factor = 1 })
    local it = loader:iter()
    it()
    -- batch 1 and the one after it announced before batch 1 is gathered
    assert.same({ "prefetch 1,2 w3", "prefetch 3,4 w3", "get 1", "get 2" }, ds.log)
    it()
    assert.same({ "prefetch 5,6 w3", "get 3", "get 4" }, { table.unpack(ds.log, 5) })
    it()
    it()
    assert.is_nil(it())
    assert.same({ "prefetch 7 w3", "get 5", "get 6", "get 7" }, { table.unpack(ds.log, 8) })
    local quiet = dataset(4, make, true)
    for _ in lt.data.DataLoader(quiet, { batch_size = 2 }):iter() do end
    assert.same({ "get 1", "get 2", "get 3", "get 4" }, quiet.log)
  end)

  it("rejects a dataset without length, and options that need a protocol dataset", function()
    local no_len = { get = function(_, i) return i end }
    h.fails_cleanly(function() return lt.data.DataLoader(no_len, { batch_size = 2 }) end,
      "DataLoader: the dataset has a get method but no length", "__len")
    local bad_len = setmetatable({ get = function(_, i) return i end }, { __len = function() return 2.5 end })
    h.fails_cleanly(function() return lt.data.DataLoader(bad_len) end, "must be a non-negative integer")
    h.fails_cleanly(function() return lt.data.DataLoader({ lt.ones(3) }, { collate = print }) end,
      "collate applies to a dataset with get(i)")
    local ds = dataset(3, function(i) return i end)
    h.fails_cleanly(function() return lt.data.DataLoader(ds, { collate = 5 }) end, "collate must be a function")
    h.fails_cleanly(function() return lt.data.DataLoader(ds, { num_workers = -1 }) end,
      "num_workers must be an integer >= 0")
    h.fails_cleanly(function() return lt.data.DataLoader(ds, { prefetch_factor = 0 }) end,
      "prefetch_factor must be an integer >= 1")
  end)

  it("names the dataset index of a sample that does not fit the others", function()
    local shapes = dataset(8, function(i) return lt.zeros(i == 7 and 3 or 2) end)
    h.fails_cleanly(function()
      for _ in lt.data.DataLoader(shapes, { batch_size = 4 }):iter() do end
    end, "DataLoader: cannot collate the batch: sample 3 (dataset index 7) has shape [3] where sample 1 " ..
      "(dataset index 5) has [2]", "pass collate=")
    local nested = dataset(4, function(i) return { x = { lt.zeros(2), i == 2 and lt.zeros(2, 1) or lt.zeros(2) } } end)
    h.fails_cleanly(function()
      for _ in lt.data.DataLoader(nested, { batch_size = 4 }):iter() do end
    end, "sample 2 (dataset index 2) has shape [2, 1] at .x[2] where sample 1 (dataset index 1) has [2]")
    local kinds = dataset(2, function(i) return i == 1 and 1 or "two" end)
    h.fails_cleanly(function()
      for _ in lt.data.DataLoader(kinds, { batch_size = 2 }):iter() do end
    end, "sample 2 (dataset index 2) is a string where sample 1 (dataset index 1) is a number")
    local fields = dataset(2, function(i) return i == 1 and { a = 1 } or { a = 1, b = 2 } end)
    h.fails_cleanly(function()
      for _ in lt.data.DataLoader(fields, { batch_size = 2 }):iter() do end
    end, "sample 2 (dataset index 2) has a field 'b' that sample 1 (dataset index 1) lacks")
    local dtypes = dataset(2, function(i) return i == 1 and lt.zeros(2) or lt.zeros(2, { dtype = "int64" }) end)
    h.fails_cleanly(function()
      for _ in lt.data.DataLoader(dtypes, { batch_size = 2 }):iter() do end
    end, "sample 2 (dataset index 2) is int64 on cpu where sample 1 (dataset index 1) is float32 on cpu")
    local fns = dataset(2, function() return print end)
    h.fails_cleanly(function()
      for _ in lt.data.DataLoader(fns, { batch_size = 2 }):iter() do end
    end, "is a function, which the default collate does not batch")
    local holes = dataset(3, function(i) if i ~= 2 then return i end end)
    h.fails_cleanly(function()
      for _ in lt.data.DataLoader(holes, { batch_size = 3 }):iter() do end
    end, "DataLoader: dataset:get(2) returned nil")
  end)
end)
