-- The CUDA backend: the parts that work without a GPU (pinned memory and
-- non_blocking refusals, the TF32 switches, the driver's memory figures) run
-- everywhere; the CUDA-against-CPU cases run when a device is present and
-- show as pending ("skipped: no CUDA device") otherwise.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local F = lt.nn.functional

describe("CUDA without a device", function()
  -- First in the file: no GEMM has run on a device yet.
  it("cuBLAS is opened only when a GEMM first runs on a CUDA device", function()
    local function mapped(name)
      local f = assert(io.open("/proc/self/maps"))
      local maps = f:read("a")
      f:close()
      return maps:find(name, 1, true) ~= nil
    end
    -- Loading cuBLASLt alone makes ~150 MiB resident: a CPU run must not pay it.
    lt.ones(4, 4):matmul(lt.ones(4, 4))
    -- The simulated device (tests/simdev) runs the CPU's kernels: no cuBLAS.
    local on_device = lt.cuda.is_available() and not os.getenv("LT_SIM_CUDA_DEVICES")
    assert.is_false(mapped("libcublas"))
    if on_device then
      local x = lt.ones(4, 4):to("cuda")
      assert.equal(4, x:matmul(x)[1][1]:item())
      assert.is_true(mapped("libcublasLt"))
    end
  end)

  it("pin_memory and DataLoader{pin_memory=true} fail cleanly", function()
    if lt.cuda.is_available() then return end
    assert.is_false(lt.ones(3):is_pinned())
    h.fails_cleanly(function() return lt.ones(3):pin_memory() end, "pin_memory: pinned memory needs a CUDA device")
    local loader = lt.data.DataLoader({lt.ones(4, 2)}, {batch_size = 2, pin_memory = true})
    h.fails_cleanly(function() return loader:iter()() end, "pin_memory")
    h.fails_cleanly(function() return lt.data.DataLoader({lt.ones(4)}, {pin_memory = 1}) end,
      "pin_memory must be a boolean")
    h.fails_cleanly(function() return lt.cuda.mem_get_info() end, "cuda.mem_get_info: CUDA is not available")
  end)

  it("non_blocking is accepted and means nothing on the CPU", function()
    local t = lt.arange(1, 5)
    assert.equal(t, t:to("cpu", {non_blocking = true}))
    assert.equal(t, t:to({device = "cpu", non_blocking = true}))
    h.fails_cleanly(function() return t:to("cpu", {non_blocking = "yes"}) end, "non_blocking")
    h.fails_cleanly(function() return t:to("cpu", {bogus = true}) end, "unknown option 'bogus'")
  end)

  it("the TF32 switches are off by default and can be set", function()
    local before = lt.cuda.allow_tf32()
    assert.same({matmul = false, cudnn = false}, before)
    -- Put back even when a check fails: TF32 left on would fail the float32
    -- GEMM and conv cases of the CUDA tests below.
    local ok, err = pcall(function()
      assert.same({matmul = true, cudnn = false}, lt.cuda.allow_tf32({matmul = true}))
      assert.same({matmul = true, cudnn = true}, lt.cuda.allow_tf32({cudnn = true}))
    end)
    lt.cuda.allow_tf32(before)
    assert(ok, err)
    assert.same(before, lt.cuda.allow_tf32())
    h.fails_cleanly(function() return lt.cuda.allow_tf32({fast = true}) end, "unknown option 'fast'")
    h.fails_cleanly(function() return lt.cuda.allow_tf32({matmul = 1}) end, "matmul must be a boolean")
  end)

  it("stats carry the device's free and total bytes beside lt's", function()
    local s = lt.memory.stats()
    assert.is_true(s.device_total_bytes > 0)
    assert.is_true(s.device_free_bytes >= 0 and s.device_free_bytes <= s.device_total_bytes)
  end)
end)

-- Streams and events: the argument checks run everywhere (they come before
-- CUDA is asked for); each function's no-CUDA error runs without a device.
describe("CUDA streams and events without a device", function()
  local functions = {"Stream", "current_stream", "default_stream", "set_stream", "stream", "Event"}

  it("every stream and event function exists", function()
    for _, name in ipairs(functions) do
      assert.equal("function", type(lt.cuda[name]), "lt.cuda." .. name)
    end
    assert.equal("function", type(lt.ones(1).record_stream))
  end)

  it("each fails cleanly without CUDA, naming itself", function()
    if lt.cuda.is_available() then return end
    local cases = {
      {"cuda.Stream", function() return lt.cuda.Stream() end},
      {"cuda.Stream", function() return lt.cuda.Stream("cuda:0") end},
      {"cuda.Stream", function() return lt.cuda.Stream("cuda") end},
      {"cuda.Stream", function() return lt.cuda.Stream(0) end},
      {"cuda.current_stream", function() return lt.cuda.current_stream() end},
      {"cuda.current_stream", function() return lt.cuda.current_stream(0) end},
      {"cuda.default_stream", function() return lt.cuda.default_stream("cuda:0") end},
      {"cuda.Event", function() return lt.cuda.Event() end},
      {"cuda.Event", function() return lt.cuda.Event{enable_timing = true} end},
      {"cuda.Event", function() return lt.cuda.Event{device = 0} end},
    }
    for _, case in ipairs(cases) do
      h.fails_cleanly(case[2], case[1] .. ": CUDA is not available")
    end
  end)

  it("bad arguments are errors naming the function and the value", function()
    h.fails_cleanly(function() return lt.cuda.Stream("cpu") end,
      "cuda.Stream: expected a CUDA device, got 'cpu'")
    h.fails_cleanly(function() return lt.cuda.Stream("gpu") end, "cuda.Stream: unknown device 'gpu'")
    h.fails_cleanly(function() return lt.cuda.Stream(-1) end, "cuda.Stream: invalid device number -1")
    h.fails_cleanly(function() return lt.cuda.Stream(1.5) end,
      "cuda.Stream: expected an integer for the device number, got 1.5")
    h.fails_cleanly(function() return lt.cuda.Stream({}) end,
      "cuda.Stream: expected a device (\"cuda:N\" or a number), got table")
    if lt.cuda.device_count() < 16 then
      h.fails_cleanly(function() return lt.cuda.Stream(15) end, "cuda.Stream: CUDA is not available")
    end
    h.fails_cleanly(function() return lt.cuda.current_stream("cpu") end,
      "cuda.current_stream: expected a CUDA device, got 'cpu'")
    h.fails_cleanly(function() return lt.cuda.default_stream(true) end,
      "cuda.default_stream: expected a device (\"cuda:N\" or a number), got boolean")
    h.fails_cleanly(function() return lt.cuda.set_stream() end,
      "cuda.set_stream: expected a CUDA stream (lt.cuda.Stream), got no value")
    h.fails_cleanly(function() return lt.cuda.set_stream(lt.ones(1)) end,
      "cuda.set_stream: expected a CUDA stream (lt.cuda.Stream), got lt.Tensor")
    h.fails_cleanly(function() return lt.cuda.stream("cuda:0", print) end,
      "cuda.stream: expected a CUDA stream (lt.cuda.Stream), got string")
    h.fails_cleanly(function() return lt.cuda.stream(nil, print) end,
      "cuda.stream: expected a CUDA stream (lt.cuda.Stream), got nil")
    h.fails_cleanly(function() return lt.cuda.Event(true) end,
      "cuda.Event: expected an options table {enable_timing=, device=}, got boolean")
    h.fails_cleanly(function() return lt.cuda.Event{bogus = true} end,
      "cuda.Event: unknown option 'bogus'")
    h.fails_cleanly(function() return lt.cuda.Event{true} end,
      "cuda.Event: unexpected number key in the options table")
    h.fails_cleanly(function() return lt.cuda.Event{enable_timing = 1} end,
      "cuda.Event: option 'enable_timing' must be a boolean, got number")
    h.fails_cleanly(function() return lt.cuda.Event{device = "cpu"} end,
      "cuda.Event: expected a CUDA device, got 'cpu'")
  end)

  it("record_stream refuses CPU tensors and anything but a tensor", function()
    local t = lt.ones(2, 3)
    h.fails_cleanly(function() return t:record_stream() end,
      "record_stream: expected a CUDA tensor, got a tensor on cpu")
    h.fails_cleanly(function() return t:record_stream("cuda:0") end,
      "record_stream: expected a CUDA tensor, got a tensor on cpu")
    h.fails_cleanly(function() return t.record_stream(5) end, "record_stream: expected a tensor, got number")
    local freed = lt.ones(2)
    freed:free()
    h.fails_cleanly(function() return freed:record_stream() end, "attempt to use a freed tensor")
  end)
end)

describe("CUDA against the CPU", function()
  if not lt.cuda.is_available() then
    pending("skipped: no CUDA device")
    return
  end
  it("every op, forward and backward, agrees with the CPU (quick set)", function()
    local cases = dofile("tests/gpu/cases.lua")
    local rows, failures = cases.run({quick = true})
    local bad = {}
    for _, r in ipairs(rows) do if not r.pass then bad[#bad + 1] = cases.format(r) end end
    assert.equal(0, failures, table.concat(bad, "\n"))
  end)

  it("covers every kernel-table entry, op of the op table and reduction", function()
    local cases = dofile("tests/gpu/cases.lua")
    local rows = cases.run({quick = true})
    assert.same({}, cases.coverage(rows))
  end)

  it("pinned round trips and non_blocking copies give the same values", function()
    local t = lt.randn(1000):pin_memory()
    assert.is_true(t:is_pinned())
    local d = t:to("cuda", {non_blocking = true})
    local back = d:to("cpu")
    assert.equal(0, (back - t):abs():max():item())
    local s = lt.memory.stats("cuda")
    assert.is_true(s.device_total_bytes > 0)
  end)

  it("labels moved with :to or gathered on the device are checked without a host copy", function()
    -- A range check that reads labels back allocates a CPU tensor for them:
    -- counting CPU allocations shows whether the host had to wait.
    local function cpu_allocations(fn)
      local before = lt.memory.stats("cpu").allocation.all.allocated
      fn()
      return lt.memory.stats("cpu").allocation.all.allocated - before
    end
    local x = lt.randn({64, 10}, {device = "cuda"}):requires_grad_(true)
    local y = lt.randint(1, 10, {64}):to("cuda")
    local loss
    assert.equal(0, cpu_allocations(function()
      loss = F.cross_entropy(x, y)
      loss:backward()
    end))
    -- A dataset on the device: the batch's labels keep the dataset's range.
    local labels = lt.randint(1, 10, {1000}):to("cuda")
    local order = lt.randperm(1000):narrow(1, 1, 64):to("cuda")
    assert.equal(0, cpu_allocations(function()
      F.cross_entropy(x, labels:index_select(1, order), {reduction = "sum"})
    end))
    -- After an in-place write the range is unknown, and the check reads
    -- the labels back (which also shows that the count sees it).
    y:add_(0)
    assert.is_true(cpu_allocations(function() F.cross_entropy(x, y) end) > 0)
    -- A label made bad on the device is still caught.
    y[1] = 11
    h.fails_cleanly(function() return F.cross_entropy(x, y) end, "target 11 is out of bounds")
    local expected = F.cross_entropy(x:detach():cpu(), y:cpu():clamp(1, 10))
    assert.near(expected:item(), F.cross_entropy(x:detach(), y:clamp(1, 10)):item(), 1e-5)
  end)

  it("an out-of-memory on the device is a catchable error and lt goes on", function()
    lt.memory.set_limit(64 * 2^20, "cuda")
    -- The limit goes even when the check fails: the tests below allocate.
    local ok, err = pcall(h.fails_cleanly,
      function() return lt.empty({256, 2^20}, {device = "cuda"}) end, "out of memory")
    lt.memory.set_limit(nil, "cuda")
    assert(ok, err)
    assert.equal(4, lt.ones(4, {device = "cuda"}):sum():item())
  end)

  it("a device out of memory gives cached segments back to the driver and retries", function()
    lt.gc()
    lt.cuda.empty_cache()
    local free = lt.cuda.mem_get_info()
    local a = lt.empty({math.floor(free * 0.6 / 4)}, {device = "cuda"})
    a = nil -- luacheck: no unused
    lt.gc() -- cached by lt: still taken from the driver
    local before = lt.memory.stats("cuda")
    -- Does not fit beside the cached segment: cudaMalloc fails, the cache
    -- goes back to the driver, and the retry succeeds.
    local b = lt.empty({math.floor(free * 0.7 / 4)}, {device = "cuda"})
    local after = lt.memory.stats("cuda")
    assert.equal(before.num_alloc_retries + 1, after.num_alloc_retries)
    assert.equal(before.num_ooms, after.num_ooms)
    b = nil -- luacheck: no unused
    lt.gc()
    lt.cuda.empty_cache()
  end)
end)

describe("CUDA streams and events", function()
  if not lt.cuda.is_available() then
    pending("skipped: no CUDA device")
    return
  end
  local dev = "cuda:" .. lt.cuda.current_device()

  it("a new stream is not the default stream, and says what it is", function()
    local s, d = lt.cuda.Stream(), lt.cuda.default_stream()
    assert.is_true(s ~= d)
    assert.is_true(d == lt.cuda.default_stream(dev))
    assert.is_true(lt.cuda.current_stream() == d)
    assert.equal(dev, s.device)
    assert.equal(0, d.id)
    assert.is_true(math.type(s.id) == "integer" and s.id ~= 0)
    assert.truthy(tostring(d):find("default stream", 1, true))
    assert.truthy(tostring(s):find("<lt.cuda.Stream " .. dev .. " id=0x", 1, true))
    h.fails(function() s.id = 1 end, "cannot set field 'id' of a CUDA stream")
  end)

  it("set_stream and current_stream round trip", function()
    local prev = lt.cuda.current_stream()
    local s = lt.cuda.Stream()
    lt.cuda.set_stream(s)
    local now = lt.cuda.current_stream()
    lt.cuda.set_stream(prev)
    assert.is_true(now == s)
    assert.is_true(lt.cuda.current_stream() == prev)
  end)

  it("lt.cuda.stream runs fn on the stream and restores the previous one", function()
    local prev = lt.cuda.current_stream()
    local s = lt.cuda.Stream()
    local a, b = lt.cuda.stream(s, function(x, y)
      assert.is_true(lt.cuda.current_stream() == s)
      return x + 1, y
    end, 1, "two")
    assert.equal(2, a)
    assert.equal("two", b)
    assert.is_true(lt.cuda.current_stream() == prev)

    local thrown = {}
    local ok, err = pcall(lt.cuda.stream, s, function() error(thrown) end)
    assert.is_false(ok)
    assert.equal(thrown, err) -- the same value, raised again unchanged
    assert.is_true(lt.cuda.current_stream() == prev)

    do
      local guard <close> = lt.cuda.stream(s)
      assert.is_true(lt.cuda.current_stream() == s)
    end
    assert.is_true(lt.cuda.current_stream() == prev)
    h.fails(function() return lt.cuda.stream(s, 42) end, "cuda.stream: expected a function")
  end)

  it("work on a side stream ordered by wait_stream gives the right result", function()
    local cur, s = lt.cuda.current_stream(), lt.cuda.Stream()
    local x = lt.randn({1024, 1024}, {device = dev})
    s:wait_stream(cur)           -- s sees x written
    local y = lt.cuda.stream(s, function() return x * 2 end)
    cur:wait_stream(s)           -- cur sees y written
    x:record_stream(s)           -- s read x: keep its bytes until that is done
    assert.equal(0, (y:cpu() - x:cpu() * 2):abs():max():item())
  end)

  it("record_stream keeps a freed block out of reuse until the stream's work is done", function()
    -- Blocks freed by this collection may have been used on another stream
    -- (x above, recorded on its side stream): they wait, active, for the next
    -- allocation. empty_cache waits for their events and returns them, so
    -- that the baseline holds no pending block for u's allocation to release.
    lt.gc()
    lt.cuda.synchronize()
    lt.memory.empty_cache(dev)
    local function active() return lt.memory.stats(dev).active_bytes.all.current end
    local function allocated() return lt.memory.stats(dev).allocated_bytes.all.current end
    local active0, allocated0 = active(), allocated()
    local s = lt.cuda.Stream()
    local t = lt.cuda.stream(s, function() return lt.empty({2^20}, {device = dev}) end)
    local active1 = active()
    assert.is_true(active1 > active0)
    t:record_stream(lt.cuda.default_stream())
    lt.del(t)
    -- Freed, but an event on the default stream guards the block: it is no
    -- longer allocated, still active.
    assert.equal(allocated0, allocated())
    assert.equal(active1, active())
    -- Once that stream is done, the next allocation sees the event complete
    -- and the block goes back to the cache.
    lt.cuda.default_stream():synchronize()
    local u = lt.empty({1}, {device = dev})
    lt.del(u)
    assert.equal(active0, active())
  end)

  it("record_stream checks the stream", function()
    local t = lt.ones(4, {device = dev})
    h.fails_cleanly(function() return t:record_stream(1) end,
      "record_stream: expected a CUDA stream (lt.cuda.Stream), got number")
    if lt.cuda.device_count() > 1 then
      local other = lt.cuda.Stream(dev == "cuda:0" and 1 or 0)
      h.fails_cleanly(function() return t:record_stream(other) end,
        "record_stream: the stream is on " .. other.device .. " but the tensor is on " .. dev)
    end
  end)

  it("events time a matmul and report completion", function()
    local a = lt.randn({512, 512}, {device = dev})
    local start, stop = lt.cuda.Event{enable_timing = true}, lt.cuda.Event{enable_timing = true}
    assert.equal(dev, start.device)
    assert.is_true(start.enable_timing)
    start:record()
    local c = a:matmul(a)
    stop:record()
    stop:synchronize()
    assert.is_true(stop:query())
    local ms = start:elapsed_time(stop)
    assert.equal("number", type(ms))
    assert.is_true(ms >= 0)
    assert.equal(512, c:size(1))

    local cur = lt.cuda.current_stream()
    local e = cur:record_event()
    assert.equal("lt.cuda.Event", getmetatable(e).__name)
    cur:synchronize()
    assert.is_true(cur:query())
    assert.is_true(e:query())
    local side = lt.cuda.Stream()
    side:wait_event(e)
    e:wait(side)
    assert.equal(e, side:record_event(e))
    side:synchronize()
    assert.is_true(side:query())
    h.fails(function() return e:elapsed_time(stop) end, "Event:elapsed_time")
    h.fails(function() return e:record(5) end, "Event:record: expected a CUDA stream")

    local closed
    do
      local ev <close> = lt.cuda.Event()
      closed = ev
    end
    h.fails(function() return closed:record() end, "Event:record: attempt to use a freed CUDA event")
    assert.truthy(tostring(closed):find("(freed)", 1, true))
  end)

  it("data.prefetch copies batches on a side stream, in order and intact", function()
    local x = lt.randn(50, 3)
    local y = lt.arange(1, 51)
    local function batches()
      return lt.data.DataLoader({x, y}, {batch_size = 8, shuffle = true, seed = 5, pin_memory = true}):epoch(1)
    end
    local expected = {}
    for bx, by in batches() do expected[#expected + 1] = {bx, by} end
    local n, before = 0, lt.cuda.current_stream()
    for bx, by in lt.data.prefetch(batches(), dev) do
      n = n + 1
      assert.equal(dev, bx.device)
      assert.is_true(lt.cuda.current_stream() == before) -- the copy stream never leaks out
      local doubled = bx * 2 -- computes on the current stream after its wait
      assert.equal(0, (doubled:cpu() - expected[n][1] * 2):abs():max():item())
      assert.equal(0, (by:cpu() - expected[n][2]):abs():max():item())
    end
    assert.equal(#expected, n)
  end)
end)
