-- A convolution's scratch (the column blocks of im2col and, for 16-bit
-- operands, the float32 blocks they are widened into) lives in the
-- `workspace` category, never exceeds the bytes of the convolution's output
-- (grad_output in backward) at any thread count, and is gone after the call;
-- float16 and bfloat16 convolutions, linears, batch norms and max pools make
-- no float32 copy of their operands. Exact bytes from the allocator.
local lt = require "lt"
local F = lt.nn.functional

local DEV = "cpu"

local function rounded(bytes) return math.max(512, (bytes + 511) // 512 * 512) end

local SIZES = { float16 = 2, bfloat16 = 2, float32 = 4 }

local function workspace() return lt.memory.stats(DEV).by_category.workspace end

-- Runs fn from a settled allocator; returns the peak above what was
-- allocated before, the workspace category's peak, and fn's result.
local function measure(fn)
  lt.gc()
  local base = lt.memory.allocated(DEV)
  lt.memory.reset_peak(DEV)
  local r = fn()
  return lt.memory.max_allocated(DEV) - base, workspace().peak, r
end

local function with_threads(n, fn)
  local saved = lt.get_num_threads()
  lt.set_num_threads(n)
  local ok, err = pcall(fn)
  lt.set_num_threads(saved)
  if not ok then error(err, 0) end
end

-- The issue's layer: 64 x 64, 32 channels in and out, 3 x 3, batch 1.
local function layer(dtype, batch)
  lt.manual_seed(1)
  local x = lt.randn(batch or 1, 32, 64, 64):to(dtype)
  local w = (lt.randn(32, 32, 3, 3) * 0.1):to(dtype)
  local b = lt.randn(32):to(dtype)
  return x, w, b
end

describe("conv2d scratch", function()
  for _, dtype in ipairs { "float16", "bfloat16", "float32" } do
    it(dtype .. " forward peaks at its output plus a workspace no larger than the output", function()
      local x, w, b = layer(dtype)
      local out_bytes = rounded(1 * 32 * 64 * 64 * SIZES[dtype])
      for _, threads in ipairs { 1, 2, 4 } do
        with_threads(threads, function()
          local peak, ws, y = measure(function()
            return lt.no_grad(F.conv2d, x, w, b, { padding = 1 })
          end)
          assert.equal(dtype, y.dtype)
          assert.equal(out_bytes, y:nbytes())
          assert.is_true(ws > 0, "the column blocks are workspace")
          assert.is_true(ws <= out_bytes, ("%d threads: workspace %d > output %d"):format(threads, ws, out_bytes))
          -- Nothing else: no float32 copy of x, w or the output.
          assert.equal(out_bytes + ws, peak)
          assert.equal(0, workspace().current)
        end)
      end
    end)

    it(dtype .. " backward keeps its workspace within grad_output's bytes at 1, 2 and 4 threads", function()
      local x, w, b = layer(dtype)
      x.requires_grad, w.requires_grad, b.requires_grad = true, true, true
      local go_bytes = rounded(32 * 64 * 64 * SIZES[dtype])
      for _, threads in ipairs { 1, 2, 4 } do
        with_threads(threads, function()
          local y = F.conv2d(x, w, b, { padding = 1 })
          local g = lt.ones_like(y)
          x.grad, w.grad, b.grad = nil, nil, nil
          local _, ws = measure(function() y:backward(g) end)
          assert.is_true(ws > 0)
          assert.is_true(ws <= go_bytes, ("%d threads: workspace %d > grad_output %d"):format(threads, ws, go_bytes))
          assert.equal(0, workspace().current)
          assert.equal(dtype, x.grad.dtype)
          assert.equal(dtype, w.grad.dtype)
        end)
      end
    end)
  end

  it("a batch large enough for whole images gives the same values as column blocks", function()
    -- Batch 1 runs in column (and for the 1-column case row) blocks; the
    -- same image inside a batch of 16 runs as one GEMM per image.
    local cases = {
      { x = { 32, 64, 64 }, w = { 32, 32, 3, 3 }, opts = { padding = 1 } },
      { x = { 8, 30, 30 }, w = { 12, 4, 3, 3 }, opts = { stride = 2, padding = 2, dilation = 2, groups = 2 } },
      { x = { 64, 8, 8 }, w = { 1, 64, 8, 8 }, opts = {} }, -- one output: row blocks
      { x = { 16, 20, 20 }, w = { 24, 16, 1, 1 }, opts = {} }, -- 1 x 1: no columns in float32
    }
    for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
      for k, c in ipairs(cases) do
        lt.manual_seed(k)
        local x1 = lt.randn(1, table.unpack(c.x)):to(dtype)
        local w = (lt.randn(table.unpack(c.w)) * 0.1):to(dtype)
        local xs = lt.cat({ x1, lt.randn(15, table.unpack(c.x)):to(dtype) }, 1)
        for _, threads in ipairs { 1, 4 } do
          with_threads(threads, function()
            local a, b = x1:clone(), xs:clone()
            a.requires_grad, b.requires_grad = true, true
            local wa, wb = w:clone(), w:clone()
            wa.requires_grad, wb.requires_grad = true, true
            local ya = F.conv2d(a, wa, nil, c.opts)
            local yb = F.conv2d(b, wb, nil, c.opts)
            local g = lt.randn(table.unpack(ya.shape)):to(dtype)
            ya:backward(g)
            yb:narrow(1, 1, 1):backward(g)
            local tol = dtype == "float32" and 1e-5 or 1e-2
            local function close(p, q, what)
              local p32, q32 = p:float(), q:float()
              local err = (p32 - q32):abs():max():item() / math.max(q32:abs():max():item(), 1e-6)
              assert.is_true(err <= tol, ("%s case %d %s, %d threads: relative error %g"):format(dtype, k, what, threads, err))
            end
            close(ya, yb:narrow(1, 1, 1), "output")
            close(a.grad, b.grad:narrow(1, 1, 1), "grad input")
            close(wa.grad, wb.grad, "grad weight")
          end)
        end
      end
    end
  end)

  it("16-bit results match float32 on the same values, and float32 matches float64", function()
    lt.manual_seed(7)
    local x = lt.randn(3, 6, 11, 11)
    local w = lt.randn(8, 3, 3, 3) * 0.2
    local b = lt.randn(8)
    local opts = { padding = 1, groups = 2, stride = { 1, 2 } }
    local function run(dtype)
      local xd, wd, bd = x:to(dtype):clone(), w:to(dtype):clone(), b:to(dtype):clone()
      xd.requires_grad, wd.requires_grad, bd.requires_grad = true, true, true
      local y = F.conv2d(xd, wd, bd, opts)
      y:backward(lt.ones_like(y))
      return { y:double(), xd.grad:double(), wd.grad:double(), bd.grad:double() }
    end
    local ref = run("float64")
    for dtype, tol in pairs { float32 = 1e-5, float16 = 5e-3, bfloat16 = 3e-2 } do
      local got = run(dtype)
      for i = 1, 4 do
        local err = (got[i] - ref[i]):abs():max():item() / ref[i]:abs():max():item()
        assert.is_true(err <= tol, ("%s result %d: relative error %g"):format(dtype, i, err))
      end
    end
  end)
end)

describe("16-bit linear, batch norm and max pool", function()
  it("linear keeps its scratch within its result and makes no float32 copy", function()
    lt.manual_seed(3)
    for _, dtype in ipairs { "float16", "bfloat16" } do
      local x = lt.randn(64, 512):to(dtype)
      local w = (lt.randn(512, 512) * 0.05):to(dtype)
      local b = lt.randn(512):to(dtype)
      local out_bytes = rounded(64 * 512 * 2)
      for _, threads in ipairs { 1, 2, 4 } do
        with_threads(threads, function()
          local peak, ws, y = measure(function() return lt.no_grad(F.linear, x, w, b) end)
          assert.is_true(ws <= out_bytes)
          assert.equal(out_bytes + ws, peak)
          local ref = F.linear(x:float(), w:float(), b:float())
          local err = (y:float() - ref):abs():max():item() / ref:abs():max():item()
          assert.is_true(err <= 1e-2, ("%s: relative error %g"):format(dtype, err))
        end)
      end
    end
  end)

  it("batch norm and max pool run in 16 bits: their peak is their 16-bit results", function()
    lt.manual_seed(4)
    local x = lt.randn(8, 4, 16, 16):bfloat16()
    local rm, rv = lt.zeros(4), lt.ones(4)
    local peak, _, y = measure(function()
      return lt.no_grad(F.batch_norm, x, rm, rv, lt.ones(4), lt.zeros(4), { training = true })
    end)
    assert.equal("bfloat16", y.dtype)
    -- The output, weight, bias and the two saved statistics; no float32 x.
    assert.equal(rounded(x:nbytes()) + 4 * 512, peak)
    local ref = F.batch_norm(x:float(), lt.zeros(4), lt.ones(4), lt.ones(4), lt.zeros(4), { training = true })
    assert.is_true((y:float() - ref):abs():max():item() <= 2e-2)
    local ppeak, _, p = measure(function() return lt.no_grad(F.max_pool2d, x, 2) end)
    assert.equal("bfloat16", p.dtype)
    assert.equal(0, (p:float() - F.max_pool2d(x:float(), 2)):abs():max():item())
    assert.equal(rounded(8 * 4 * 8 * 8 * 2) + rounded(8 * 4 * 8 * 8 * 8), ppeak) -- values and int64 indices
  end)
end)
