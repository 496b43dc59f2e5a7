-- The CUDA backend: the parts that work without a GPU (pinned memory and
-- non_blocking refusals, the TF32 switches, the driver's memory figures) run
-- everywhere; the CUDA-against-CPU cases run when a device is present and
-- show as pending ("skipped: no CUDA device") otherwise.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

describe("CUDA without a device", function()
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
    assert.same({matmul = true, cudnn = false}, lt.cuda.allow_tf32({matmul = true}))
    assert.same({matmul = true, cudnn = true}, lt.cuda.allow_tf32({cudnn = true}))
    lt.cuda.allow_tf32(before)
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

  it("pinned round trips and non_blocking copies give the same values", function()
    local t = lt.randn(1000):pin_memory()
    assert.is_true(t:is_pinned())
    local d = t:to("cuda", {non_blocking = true})
    local back = d:to("cpu")
    assert.equal(0, (back - t):abs():max():item())
    local s = lt.memory.stats("cuda")
    assert.is_true(s.device_total_bytes > 0)
  end)

  it("an out-of-memory on the device is a catchable error and lt goes on", function()
    lt.memory.set_limit(64 * 2^20, "cuda")
    h.fails_cleanly(function() return lt.empty({256, 2^20}, {device = "cuda"}) end, "out of memory")
    lt.memory.set_limit(nil, "cuda")
    assert.equal(4, lt.ones(4, {device = "cuda"}):sum():item())
  end)
end)
