local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local MiB = 1024 * 1024

-- Collect garbage first so that allocator deltas are exact.
local function settled()
  lt.gc()
  return lt.memory.allocated()
end

describe("the namespaces", function()
  it("require \"lt.memory\" and \"lt.cuda\" give lt.memory and lt.cuda", function()
    assert.equal(lt.memory, require("lt.memory"))
    assert.equal(lt.cuda, require("lt.cuda"))
    assert.equal(lt.nn.functional, require("lt.nn.functional"))
  end)
end)

describe("lt.memory byte counts", function()
  it("without a device argument, lt.memory follows lt.default_device (lt --device)", function()
    local keep = lt.ones(1000)
    local cpu_bytes = lt.memory.allocated("cpu")
    assert.is_true(cpu_bytes > 0)
    assert.equal(cpu_bytes, lt.memory.allocated())
    lt.default_device = "cuda" -- as `lt --device cuda` sets it; CUDA holds nothing here
    local ok, err = pcall(function()
      assert.equal(lt.memory.allocated("cuda"), lt.memory.allocated())
      assert.is_truthy(lt.memory.summary():find("device cuda", 1, true))
    end)
    lt.default_device = nil
    assert(ok, err)
    assert.equal(cpu_bytes, lt.memory.allocated())
    lt.del(keep)
  end)

  it("lt.empty(1000) takes 4096 bytes (4000 rounded up to 512) and del gives them back", function()
    local before = settled()
    local t = lt.empty(1000)
    assert.equal(before + 4096, lt.memory.allocated())
    assert.equal(4096, lt.del(t))
    assert.equal(before, lt.memory.allocated())
  end)

  it("del of a view returns 0 while the base lives", function()
    local before = settled()
    local base = lt.empty(1000)
    local view = base:view(10, 100)
    assert.equal(0, lt.del(view))
    assert.equal(before + 4096, lt.memory.allocated())
    assert.equal(4096, lt.del(base))
    assert.equal(before, lt.memory.allocated())
  end)

  it("del takes several tensors and sums what they give back", function()
    local before = settled()
    local a, b = lt.empty(1000), lt.empty(100) -- 4096 + 512
    local v = a:view(1000)
    assert.equal(4608, lt.del(a, v, nil, b))
    assert.equal(before, lt.memory.allocated())
    h.fails_cleanly(function() return lt.del(lt.empty(1), 5) end, "del: expected tensors, got number (argument 2)")
  end)

  it("lt.gc collects dropped tensors and returns the bytes", function()
    settled()
    local t = lt.empty(1000)
    assert.is_true(t:numel() == 1000)
    t = nil
    assert.equal(4096, lt.gc())
    assert.equal(0, lt.gc())
  end)

  it("empty_cache releases free segments: reserved drops, allocated does not", function()
    local before = settled()
    lt.memory.empty_cache()
    local t = lt.empty(30 * MiB // 4) -- 30 MiB: a large-pool segment of its own
    assert.equal(before + 30 * MiB, lt.memory.allocated())
    local reserved = lt.memory.reserved()
    assert.is_true(reserved >= 30 * MiB)
    lt.del(t)
    assert.equal(reserved, lt.memory.reserved()) -- still cached
    local released = lt.memory.empty_cache()
    assert.equal(30 * MiB, released)
    assert.equal(reserved - 30 * MiB, lt.memory.reserved())
    assert.equal(before, lt.memory.allocated())
  end)

  it("max_allocated and reset_peak", function()
    local before = settled()
    lt.memory.reset_peak()
    assert.equal(before, lt.memory.max_allocated())
    local t = lt.empty(MiB) -- 4 MiB
    lt.del(t)
    assert.equal(before + 4 * MiB, lt.memory.max_allocated())
    assert.is_true(lt.memory.max_reserved() >= lt.memory.reserved())
    lt.memory.reset_peak("cpu")
    assert.equal(before, lt.memory.max_allocated())
  end)

  it("stats has PyTorch's fields for all, small and large pools, and categories", function()
    local before = settled()
    local s0 = lt.memory.stats()
    local t = lt.empty(1000)
    local s = lt.memory.stats("cpu")
    assert.equal(before + 4096, s.allocated_bytes.all.current)
    assert.equal(s0.allocated_bytes.all.allocated + 4096, s.allocated_bytes.all.allocated)
    assert.equal(s0.allocated_bytes.small_pool.current + 4096, s.allocated_bytes.small_pool.current)
    assert.equal(s0.allocated_bytes.large_pool.current, s.allocated_bytes.large_pool.current)
    assert.equal(s0.requested_bytes.all.current + 4000, s.requested_bytes.all.current)
    assert.equal(s0.allocation.all.current + 1, s.allocation.all.current)
    assert.equal(s0.by_category.other.current + 4096, s.by_category.other.current)
    for _, key in ipairs { "allocation", "segment", "active", "inactive_split", "allocated_bytes",
      "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes" } do
      for _, pool in ipairs { "all", "small_pool", "large_pool" } do
        for _, field in ipairs { "current", "peak", "allocated", "freed" } do
          assert.equal("integer", math.type(s[key][pool][field]), key .. "." .. pool .. "." .. field)
        end
      end
    end
    for _, cat in ipairs { "parameter", "gradient", "optimizer", "activation", "other" } do
      assert.equal("integer", math.type(s.by_category[cat].current))
      assert.equal("integer", math.type(s.by_category[cat].peak))
    end
    for _, key in ipairs { "num_alloc_retries", "num_ooms", "num_collections", "num_segment_fallbacks", "limit" } do
      assert.equal("integer", math.type(s[key]), key)
    end
    lt.del(t)
  end)

  it("summary is a readable table", function()
    local text = lt.memory.summary()
    assert.is_truthy(text:find("Allocated memory", 1, true))
    assert.is_truthy(text:find("Reserved memory", 1, true))
    assert.is_truthy(text:find("from small pool", 1, true))
    assert.is_truthy(text:find("parameter", 1, true))
    assert.is_true(select(2, text:gsub("\n", "")) > 20)
  end)

  it("take a device name and reject unknown ones", function()
    assert.equal(lt.memory.allocated(), lt.memory.allocated("cpu"))
    h.fails_cleanly(function() return lt.memory.allocated("tpu") end, "allocated: unknown device 'tpu'")
    h.fails_cleanly(function() return lt.memory.stats(5) end, "stats: expected a device name, got number")
  end)
end)

describe("limits and out of memory", function()
  after_each(function() lt.memory.set_limit(nil) end)

  it("set_limit takes bytes, a fraction of the device, or nil", function()
    assert.equal(64 * MiB, lt.memory.set_limit(64 * MiB))
    assert.equal(64 * MiB, lt.memory.get_limit())
    assert.equal(64 * MiB, lt.memory.stats().limit)
    assert.equal(64 * MiB, lt.memory.set_limit(64 * 2 ^ 20)) -- a float byte count
    local half = lt.memory.set_limit(0.5)
    assert.is_true(half > 0)
    assert.equal(half, lt.memory.get_limit())
    assert.equal(0, lt.memory.set_limit(nil))
    assert.equal(0, lt.memory.get_limit())
    h.fails_cleanly(function() return lt.memory.set_limit(-1) end, "set_limit: the limit must not be negative, got -1")
    h.fails_cleanly(function() return lt.memory.set_limit("x") end, "set_limit: expected a number of bytes")
  end)

  it("an allocation over the limit is a catchable error with the figures, and nothing leaks", function()
    settled()
    lt.memory.empty_cache()
    lt.memory.set_limit(64 * MiB)
    local keep = lt.empty(12 * MiB) -- 48 MiB
    local keep_line = debug.getinfo(1, "l").currentline - 1
    local before = lt.memory.allocated()
    local ooms = lt.memory.stats().num_ooms
    local ok, err = pcall(function() return lt.empty(32 * MiB) end) -- 128 MiB
    assert.is_false(ok)
    for _, part in ipairs { "out of memory on cpu: tried to allocate 128.0 MiB", "48.0 MiB allocated",
      "limit 64.0 MiB", "largest live tensors", "48.0 MiB (other) created at ", "memory_spec.lua:" .. keep_line } do
      assert.is_truthy(err:find(part, 1, true), string.format("%q lacks %q", err, part))
    end
    assert.equal(ooms + 1, lt.memory.stats().num_ooms)
    assert.equal(before, lt.memory.allocated())
    -- the session goes on: smaller allocations work, and freeing works
    local small = lt.ones(1000)
    local total = small:sum()
    assert.equal(1000.0, total:item())
    assert.equal(4096 + 512, lt.del(small, total))
    assert.equal(before, lt.memory.allocated())
    lt.del(keep)
  end)

  it("the out-of-memory hook collects unreachable tensors before failing", function()
    settled()
    lt.memory.empty_cache()
    lt.memory.set_limit(64 * MiB)
    collectgarbage("stop") -- only the allocator's hook can collect now
    local ok, err = pcall(function()
      for _ = 1, 20 do local t = lt.empty(10 * MiB) end -- 40 MiB each, dropped
    end)
    collectgarbage("restart")
    assert.is_true(ok, err)
    assert.is_true(lt.memory.stats().num_collections > 0)
  end)

  it("dropped tensors are reclaimed by collector charging, without collect calls", function()
    settled()
    lt.memory.set_limit(64 * MiB)
    local s0 = lt.memory.stats()
    for _ = 1, 300 do
      local t = lt.empty(2 * MiB) -- 8 MiB, dropped at once
    end
    local s = lt.memory.stats()
    assert.equal(s0.num_ooms, s.num_ooms)
    assert.equal(s0.num_collections, s.num_collections) -- the OOM hook never had to run
    assert.is_true(s.allocated_bytes.all.peak <= 64 * MiB)
  end)

  it("a request whose usual segment passes the limit gets a segment of its own size", function()
    settled()
    lt.memory.empty_cache()
    assert.equal(0, lt.memory.stats().reserved_bytes.large_pool.current)
    local base = lt.memory.reserved() -- small segments holding live tensors
    lt.memory.set_limit(base + 60 * MiB)
    -- 34 MiB allocated, 42 MiB reserved in the large pool: the 8 MiB free are
    -- two 3 MiB holes and a 2 MiB tail inside one 20 MiB segment
    local whole = lt.empty(22 * MiB // 4)
    local q = {}
    for i = 1, 6 do q[i] = lt.empty(3 * MiB // 4) end
    lt.del(q[2], q[4])
    local s0 = lt.memory.stats()
    assert.equal(34 * MiB, s0.allocated_bytes.large_pool.current)
    assert.equal(42 * MiB, s0.reserved_bytes.large_pool.current)
    assert.equal(8 * MiB, s0.inactive_split_bytes.large_pool.current)

    local grad = lt.empty(MiB) -- 4 MiB: PyTorch asks for 20 MiB here and fails
    local s = lt.memory.stats()
    assert.equal(s0.num_segment_fallbacks + 1, s.num_segment_fallbacks)
    assert.equal(s0.num_ooms, s.num_ooms)
    assert.equal(38 * MiB, s.allocated_bytes.large_pool.current)
    assert.equal(46 * MiB, s.reserved_bytes.large_pool.current)
    assert.equal(8 * MiB, s.inactive_split_bytes.large_pool.current)
    assert.is_truthy(lt.memory.summary():find("segment fallbacks: " .. s.num_segment_fallbacks, 1, true))
    assert.equal(4 * MiB, lt.del(grad))
    assert.equal(4 * MiB, lt.memory.empty_cache()) -- else it would serve the next one

    -- 2 MiB left below the limit: the free bytes are there, but scattered
    local limit = lt.memory.set_limit(base + 44 * MiB)
    local ok, err = pcall(lt.empty, MiB)
    assert.is_false(ok)
    s = lt.memory.stats()
    assert.equal(2 * MiB, limit - s.reserved_bytes.all.current)
    assert.equal(42 * MiB, s.reserved_bytes.large_pool.current)
    for _, part in ipairs { "tried to allocate 4.0 MiB", "but no free block of 4.0 MiB: fragmented (only "
      .. "2.0 MiB unreserved below the limit, a 4.0 MiB segment needed)", "largest live tensors" } do
      assert.is_truthy(err:find(part, 1, true), string.format("%q lacks %q", err, part))
    end

    -- the holes filled, only 2 MiB of the limit unallocated: the limit is reached
    local fill = { lt.empty(3 * MiB // 4), lt.empty(3 * MiB // 4), lt.empty(2 * MiB // 4) }
    limit = lt.memory.set_limit(lt.memory.allocated() + 2 * MiB)
    ok, err = pcall(lt.empty, MiB)
    assert.is_false(ok)
    assert.is_truthy(err:find("; allocated is only 2.0 MiB below the limit, a 4.0 MiB segment needed", 1, true), err)
    assert.is_nil(err:find("fragmented", 1, true))
    -- what needs at most the 2 MiB left still works: 1.5 MiB in a 2 MiB segment
    local last = lt.empty(3 * MiB // 8)
    assert.equal(limit, lt.memory.allocated())
    assert.equal(s0.num_segment_fallbacks + 2, lt.memory.stats().num_segment_fallbacks)
    lt.del(whole, last, table.unpack(q))
    lt.del(table.unpack(fill))
    lt.memory.empty_cache()
  end)

  it("a loop of 100000 tiny tensors is quick", function()
    local start = os.clock()
    for i = 1, 100000 do
      local t = lt.empty(3)
    end
    assert.is_true(os.clock() - start < 5)
    settled()
  end)
end)

describe("lt.cuda without and with a GPU", function()
  it("answers is_available and device_count", function()
    assert.equal("boolean", type(lt.cuda.is_available()))
    assert.equal("integer", math.type(lt.cuda.device_count()))
    assert.equal(lt.cuda.is_available(), lt.cuda.device_count() > 0)
    assert.equal("integer", math.type(lt.cuda.empty_cache()))
    if not lt.cuda.is_available() then
      h.fails_cleanly(function() return lt.cuda.synchronize() end, "cuda.synchronize: CUDA is not available")
      h.fails_cleanly(function() return lt.cuda.set_device(0) end, "cuda.set_device: CUDA is not available")
    else
      lt.cuda.synchronize()
      lt.cuda.set_device(0)
    end
  end)
end)

describe("threads and seeds", function()
  it("set_num_threads takes a positive count", function()
    local n = lt.get_num_threads()
    lt.set_num_threads(2)
    assert.equal(2, lt.get_num_threads())
    lt.set_num_threads(n)
    assert.equal(n, lt.get_num_threads())
    h.fails_cleanly(function() return lt.set_num_threads(0) end, "set_num_threads: expected a number of threads from 1")
    h.fails_cleanly(function() return lt.set_num_threads("x") end, "set_num_threads: expected an integer")
    h.fails_cleanly(function() return lt.manual_seed("x") end, "manual_seed: expected an integer for the seed, got string")
  end)
end)
