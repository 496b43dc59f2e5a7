-- Random arguments (fixed seeds) to every tensor method, every lt.* and F.*
-- function and every nn module: each call returns or raises lt's own error,
-- never a Lua runtime error from inside lt ("attempt to ..."), never a crash
-- (CI runs this under ASan + UBSan too), and the session leaks nothing.
local lt = require "lt"

local function make_pool()
  local pool = {
    function() return lt.ones(2, 3) end, function() return lt.randn(2, 3, 4) end,
    function() return lt.randn(4, 3, 5, 5) end, function() return lt.zeros(3) end,
    function() return lt.tensor({1, 2, 3}, {dtype = "int64"}) end,
    function() return lt.tensor({0, 1}, {dtype = "int64"}) end,
    function() return lt.tensor({true, false}) end, function() return lt.ones(2, 3):half() end,
    function() return lt.ones(2, 3):bfloat16() end, function() return lt.ones(4, 4):t() end,
    function() return lt.ones(0, 3) end, function() return lt.tensor(3.5) end,
    function() return lt.ones(2, 3, {requires_grad = true}) end,
    function() return lt.ones(2, 3, {dtype = "float64"}) end,
    function() return lt.ones(6):narrow(1, 2, 3) end, function() return lt.ones(3, 1):expand(3, 4) end,
  }
  -- With CUDA (a GPU, or tests/simdev's simulated slot): tensors on each
  -- device too, so that every op meets mixed devices.
  if lt.cuda.is_available() then
    for d = 0, math.min(lt.cuda.device_count(), 2) - 1 do
      local dev = "cuda:" .. d
      pool[#pool + 1] = function() return lt.randn(2, 3):to(dev) end
      pool[#pool + 1] = function() return lt.randn(4, 3, 5, 5):to(dev) end
      pool[#pool + 1] = function() return lt.tensor({1, 2, 3}, {dtype = "int64"}):to(dev) end
      pool[#pool + 1] = function() return lt.ones(2, 3, {requires_grad = true}):to(dev) end
      pool[#pool + 1] = function() return lt.ones(2, 3):half():to(dev) end
    end
  end
  return pool
end

-- Bytes allocated on every device (the CPU's and each CUDA device's), less
-- the cuBLAS workspaces, which the first GEMM on a stream takes for the
-- process (as PyTorch's): a call may be the first.
local function allocated_everywhere()
  local total = lt.memory.allocated("cpu")
  if lt.cuda.is_available() then
    for d = 0, lt.cuda.device_count() - 1 do
      local dev = "cuda:" .. d
      total = total + lt.memory.allocated(dev) - lt.memory.stats(dev).by_category.workspace.current
    end
  end
  return total
end

local SCALARS = {0, 1, -1, 2, 3, 1.5, -7, 1e300, -1e300, 0 / 0, math.huge, -math.huge,
  math.maxinteger, math.mininteger, "x", "float32", "mean", "same", "cpu", "cuda", true, false,
  {}, {1, 2}, {-1}, {2, 3}, {0}, {padding = 1}, {stride = 0}, {dim = 5}, {reduction = "bogus"},
  {inplace = true}, {dtype = "int64"}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, function() end}

local function random_arg(pool)
  local r = math.random()
  if r < 0.4 then return pool[math.random(#pool)]() end
  if r < 0.95 then return SCALARS[math.random(#SCALARS)] end
  return nil
end

-- Calls fn with 0 to 4 random arguments; returns the error, if any.
local function call_randomly(fn, pool, self)
  local n = math.random(0, 4)
  local args = {}
  for i = 1, n do args[i] = random_arg(pool) end
  local ok, err
  if self ~= nil then
    ok, err = pcall(fn, self, table.unpack(args, 1, n))
  else
    ok, err = pcall(fn, table.unpack(args, 1, n))
  end
  if not ok then return tostring(err) end
end

local function assert_lt_error(what, err)
  if err and err:find("attempt to ", 1, true) then
    error(string.format("%s raised a Lua runtime error instead of its own: %s", what, err), 2)
  end
end

-- Runs one_call 1500 times for each of three seeds; allocated bytes must be
-- back where they were once garbage is collected.
local function without_leaks(one_call)
  lt.gc()
  local before = allocated_everywhere()
  for seed = 1, 3 do
    math.randomseed(seed)
    for _ = 1, 1500 do one_call() end
  end
  lt.gc()
  assert.equal(before, allocated_everywhere())
end

-- Writes files or changes global state the other calls would see.
local SKIP = {save = true, load = true, read_idx = true, set_rng_state = true, manual_seed = true,
  set_num_threads = true, set_grad_enabled = true, checkpoint = true, no_grad = true,
  enable_grad = true, autocast = true, _autograd_function = true,
  _write_file = true, -- writes its first argument's name: random ones litter the directory
  help = true, plot = true} -- print pages of docs / write a page

describe("random arguments", function()
  it("to every tensor method", function()
    local pool = make_pool()
    local names = {}
    local index = getmetatable(lt.ones(1)).__index
    for i = 1, 2 do
      local _, methods = debug.getupvalue(index, i)
      for k, v in pairs(methods) do
        if type(k) == "string" and type(v) == "function" then names[#names + 1] = k end
      end
    end
    table.sort(names)
    assert.is_true(#names > 100)
    without_leaks(function()
      local name = names[math.random(#names)]
      local self = pool[math.random(#pool)]()
      assert_lt_error("t:" .. name, call_randomly(self[name], pool, self))
    end)
  end)

  it("to lt.*, F.* and the nn modules", function()
    local pool = make_pool()
    local fns = {}
    for k, v in pairs(lt) do
      if type(v) == "function" and not SKIP[k] then fns[#fns + 1] = {"lt." .. k, v} end
    end
    for k, v in pairs(lt.nn.functional) do
      if type(v) == "function" then fns[#fns + 1] = {"F." .. k, v} end
    end
    for k, v in pairs(lt.nn.utils) do
      if type(v) == "function" then fns[#fns + 1] = {"nn.utils." .. k, v} end
    end
    for k, v in pairs(lt.nn) do
      if type(k) == "string" and k:match("^%u") and k ~= "Module" and k ~= "Parameter" then
        fns[#fns + 1] = {"nn." .. k, function(...)
          local m = v(...)
          return m(random_arg(pool), random_arg(pool))
        end}
      end
    end
    table.sort(fns, function(a, b) return a[1] < b[1] end)
    without_leaks(function()
      local f = fns[math.random(#fns)]
      assert_lt_error(f[1], call_randomly(f[2], pool))
    end)
    assert.is_true(lt.is_grad_enabled())
    local t = lt.ones(2, 2) + 1
    assert.equal(8, t:sum():item())
  end)

  it("to lt.load: corrupted safetensors files", function()
    local path, bad = os.tmpname(), os.tmpname()
    lt.save(path, {w = lt.randn(3, 4), b = lt.arange(5), h = lt.ones(2, 2):half(), e = lt.ones(0, 3)})
    local f = assert(io.open(path, "rb"))
    local base = f:read("a")
    f:close()
    local header_end = 8 + string.unpack("<I8", base)
    local loaded, refused = 0, 0
    without_leaks(function()
      local bytes = {base:byte(1, -1)}
      local kind = math.random(3)
      if kind == 1 then -- a few random bytes anywhere
        for _ = 1, math.random(8) do bytes[math.random(#bytes)] = math.random(0, 255) end
      elseif kind == 2 then -- cut short
        for i = #bytes, math.random(#bytes), -1 do bytes[i] = nil end
      else -- JSON-ish bytes inside the header
        for _ = 1, math.random(4) do
          local k = math.random(12)
          bytes[math.random(9, header_end)] = ("0123456789,:"):byte(k)
        end
      end
      local out = assert(io.open(bad, "wb"))
      for i = 1, #bytes, 4096 do out:write(string.char(table.unpack(bytes, i, math.min(i + 4095, #bytes)))) end
      out:close()
      local ok, r = pcall(lt.load, bad)
      if ok then
        loaded = loaded + 1
        for _, t in pairs(r) do assert.is_string(tostring(t)) end
      else
        refused = refused + 1
        assert(tostring(r):find("safetensors: " .. bad, 1, true), "the error names the file: " .. tostring(r))
      end
    end)
    os.remove(path)
    os.remove(bad)
    assert.is_true(refused > 0)
  end)
end)
