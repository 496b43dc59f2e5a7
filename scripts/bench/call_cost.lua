-- What a call costs on a tiny tensor, where the Lua layers show: y:relu(),
-- F.relu(y) and nn.ReLU()(y) on 16 float32 elements, and the same for the
-- modules that take options (GELU, MaxPool2d, Conv2d). Microseconds per call,
-- median of 7 runs of N calls each (alternating the forms within a run).
--   lt scripts/bench/call_cost.lua [N]
local nn, F = lt.nn, lt.nn.functional
local n = tonumber(arg and arg[1]) or 100000

local y = lt.randn(16)
local img = lt.randn(1, 1, 4, 4)
local relu, gelu, pool = nn.ReLU(), nn.GELU(), nn.MaxPool2d(2)
local conv = nn.Conv2d(1, 1, 1)
local w, b = conv.weight, conv.bias
local forms = {
  { "y:relu()", function() return y:relu() end },
  { "F.relu(y)", function() return F.relu(y) end },
  { "nn.ReLU()(y)", function() return relu(y) end },
  { "F.gelu(y)", function() return F.gelu(y) end },
  { "nn.GELU()(y)", function() return gelu(y) end },
  { "F.max_pool2d(x, 2)", function() return F.max_pool2d(img, 2) end },
  { "nn.MaxPool2d(2)(x)", function() return pool(img) end },
  { "F.conv2d(x, w, b)", function() return F.conv2d(img, w, b) end },
  { "nn.Conv2d(1, 1, 1)(x)", function() return conv(img) end },
}

local times = {}
for _ = 1, 7 do
  for i, form in ipairs(forms) do
    local fn = form[2]
    lt.gc()
    local t0 = os.clock()
    for _ = 1, n do fn() end
    times[i] = times[i] or {}
    table.insert(times[i], (os.clock() - t0) / n * 1e6)
  end
end
for i, form in ipairs(forms) do
  table.sort(times[i])
  print(string.format("%-24s %7.3f us", form[1], times[i][4]))
end
