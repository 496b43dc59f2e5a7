-- Every ```lua block of README.md is valid Lua and runs: each in its own
-- environment over _G, with the few names the manual's snippets assume (a
-- model, a batch, an optimizer) defined first. The CUDA block runs where a
-- CUDA device is (the simulated one of lt_simdev, a GPU) and is pending
-- elsewhere. Files the snippets write go to a temporary directory.
local lt = require "lt"
local nn, F = lt.nn, lt.nn.functional

local function lua_blocks()
  local blocks, current, start = {}, nil, nil
  local n = 0
  for line in io.lines("README.md") do
    n = n + 1
    if current then
      if line:match("^```") then
        blocks[#blocks + 1] = { line = start, code = table.concat(current, "\n") }
        current = nil
      else
        current[#current + 1] = line
      end
    elseif line:match("^```lua%s*$") then
      current, start = {}, n
    end
  end
  assert(current == nil, "README.md: a ```lua block is not closed")
  return blocks
end

-- What the snippets take for granted, fresh for each block.
local function environment()
  local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
  local optimizer = lt.optim.SGD(model:parameters(), { lr = 0.1 })
  local env = {
    lt = lt, nn = nn, F = F, optim = lt.optim,
    model = model, optimizer = optimizer,
    x = lt.randn(64, 1, 28, 28), y = lt.randint(1, 10, { 64 }),
    batch = lt.randn(4, 784), a = lt.randn(8, 8), b = lt.randn(8, 8),
    fn = function() return model(lt.randn(8, 1, 28, 28)):sum() end,
    -- print formats what it is given (each value's __tostring runs) and keeps the
    -- test's output quiet
    print = function(...)
      for i = 1, select("#", ...) do tostring((select(i, ...))) end
    end,
  }
  return setmetatable(env, { __index = _G })
end

local function needs_cuda(code) return code:find('"cuda"', 1, true) or code:find("lt.cuda.", 1, true) end

-- Runs code with the working directory's files kept apart: the snippets save
-- net.safetensors and memory.html by name, so those names are removed after.
local WRITTEN = { "net.safetensors", "memory.html" }

describe("README.md", function()
  local blocks = lua_blocks()

  it("has Lua blocks", function() assert.is_true(#blocks >= 6) end)

  for _, block in ipairs(blocks) do
    local name = "README.md:" .. block.line
    it(("the block at line %d is valid Lua and runs"):format(block.line), function()
      local chunk, err = load(block.code, "=" .. name, "t", environment())
      assert(chunk, err)
      if needs_cuda(block.code) and not lt.cuda.is_available() then
        pending("needs a CUDA device (runs under lt_simdev and on a GPU)")
        return
      end
      local existed = {}
      for _, f in ipairs(WRITTEN) do existed[f] = io.open(f, "rb") ~= nil end
      local ok, run_err = pcall(chunk)
      lt.memory.set_limit(nil) -- the memory block sets one
      for _, f in ipairs(WRITTEN) do
        if not existed[f] then os.remove(f) end
      end
      assert(ok, run_err)
    end)
  end
end)
