-- The kernels a CPU without FMA runs (cpu_vmath.h: GELU's Phi and softmax's exp with their
-- FMAs unfused), chosen here with LT_CPU_NO_FMA=1 in a child process: they run (their bits
-- differ from the fused kernels' somewhere) and agree with them within float32 rounding.
-- The PyTorch fixtures of functional, gpt and soft_ce also run unfused (tests/CMakeLists.txt).
local lt = require "lt"

-- Each op's float32 results on fixed inputs, as hex floats, one per line.
local PROGRAM = [[
lt.manual_seed(7)
local F = lt.nn.functional
local x = lt.randn(4096) * 3
local logits, labels = lt.randn(64, 76) * 2, lt.randint(1, 76, {64})
local leaf = x:clone():requires_grad_(true)
F.gelu(leaf):sum():backward()
local results = {
  F.gelu(x), leaf.grad, F.softmax(x:view(64, 64), 2), F.log_softmax(x:view(64, 64), 2),
  F.cross_entropy(logits, labels, {reduction = "none"}),
}
for _, t in ipairs(results) do
  for _, v in ipairs(t:flatten():totable()) do io.write(string.format("%a\n", v)) end
end
]]

local function run(env)
  local interpreter = arg and arg[-1]
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(PROGRAM)
  f:close()
  local pipe = assert(io.popen(env .. " " .. interpreter .. " " .. path .. " 2>&1"))
  local values = {}
  for line in pipe:lines() do values[#values + 1] = line end
  pipe:close()
  os.remove(path)
  return values
end

-- Whether this CPU has FMA (else both runs are unfused and nothing can differ).
local function cpu_has_fma()
  local f = io.open("/proc/cpuinfo")
  if not f then return true end -- not Linux: lt's own check decides, assume FMA (arm64)
  local info = f:read("a")
  f:close()
  return info:find("%sfma%s") ~= nil or not info:find("flags")
end

describe("the kernels without FMA", function()
  it("run under LT_CPU_NO_FMA=1 and agree with the fused ones within rounding", function()
    if not (arg and arg[-1]) then return pending("no interpreter path in arg[-1]") end
    if not cpu_has_fma() then return pending("this CPU has no FMA: lt runs the unfused kernels anyway") end
    local fused, unfused = run("LT_CPU_NO_FMA=0"), run("LT_CPU_NO_FMA=1")
    assert.equal(#fused, #unfused)
    assert.is_true(#fused > 4096 * 3, "the child printed its results: " .. tostring(fused[1]))
    local differ, worst = 0, 0
    for i = 1, #fused do
      local a, b = tonumber(fused[i]), tonumber(unfused[i])
      if fused[i] ~= unfused[i] then differ = differ + 1 end
      worst = math.max(worst, math.abs(a - b) / math.max(1, math.abs(a)))
    end
    assert.is_true(differ > 0, "no result differs: the unfused kernels did not run")
    assert.is_true(worst < 2e-6, ("the unfused results differ by up to %g"):format(worst))
  end)
end)
