-- lt.data.prefetch: batches moved to a device one ahead. On the CPU they pass
-- through untouched; the CUDA path (a copy stream) is checked in cuda_spec.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local function loader(named)
  local x = lt.arange(1, 21):reshape(10, 2)
  local y = lt.arange(1, 11)
  local dataset = named and {x = x, y = y} or {x, y}
  return lt.data.DataLoader(dataset, {batch_size = 4, shuffle = true, seed = 3})
end

describe("lt.data.prefetch", function()
  it("on the CPU yields the loader's batches unchanged", function()
    local direct, fetched = {}, {}
    for x, y in loader():epoch(2) do direct[#direct + 1] = {x, y} end
    for x, y in lt.data.prefetch(loader():epoch(2), "cpu") do fetched[#fetched + 1] = {x, y} end
    assert.equal(3, #fetched)
    for i, pair in ipairs(direct) do
      assert.equal(0, (pair[1] - fetched[i][1]):abs():max():item())
      assert.equal(0, (pair[2] - fetched[i][2]):abs():max():item())
      assert.equal("cpu", fetched[i][1].device)
    end
  end)

  it("defaults to the CPU and passes named batches through", function()
    local n = 0
    for batch in lt.data.prefetch(loader(true):iter()) do
      n = n + 1
      assert.truthy(lt.is_tensor(batch.x) and lt.is_tensor(batch.y))
    end
    assert.equal(3, n)
  end)

  it("refuses what is not an iterator or a device", function()
    h.fails(function() lt.data.prefetch(loader(), "cpu") end,
      "data.prefetch: expected a batch iterator (loader:iter()), got table")
    h.fails(function() lt.data.prefetch(loader():iter(), "tpu") end,
      "data.prefetch: expected a device 'cpu', 'cuda' or 'cuda:N', got 'tpu'")
    h.fails(function() lt.data.prefetch(loader():iter(), 3) end,
      "data.prefetch: expected a device 'cpu', 'cuda' or 'cuda:N', got number")
  end)

  it("on cuda without a device says CUDA is not available", function()
    if lt.cuda.is_available() then return end
    h.fails(function() lt.data.prefetch(loader():iter(), "cuda") end, "CUDA is not available")
  end)
end)
