-- Autocast's policy, read back from the engine's one table
-- (engine/ops/autocast_policy.h and the elementwise rows' FLOAT32 column):
-- every rule has a case here, and each op's result dtype in a region follows
-- its rule, on the CPU and (on the simulated device, under simdev/) on CUDA.
local F = lt.nn.functional

-- One call per op on a float32 input y (4 x 6, positive) on y's device.
local function cases(y)
  local dev = y.device
  local target = lt.tensor({ 1, 2, 3, 4 }, { dtype = "int64", device = dev })
  local q = y:view(1, 4, 6)
  return {
    matmul = function() return y:matmul(y:t()) end,
    linear = function() return F.linear(y, y) end,
    conv2d = function() return F.conv2d(y:view(1, 1, 4, 6), lt.ones(1, 1, 3, 3, { device = dev })) end,
    scaled_dot_product_attention = function() return F.scaled_dot_product_attention(q, q, q) end,
    cross_entropy = function() return F.cross_entropy(y, target) end,
    nll_loss = function() return F.nll_loss(y, target) end,
    mse_loss = function() return F.mse_loss(y, y * 2) end,
    prod = function() return y:prod() end,
    sum = function() return y:sum() end,
    softmax = function() return F.softmax(y, 2) end,
    log_softmax = function() return F.log_softmax(y, 2) end,
    layer_norm = function() return F.layer_norm(y, { 6 }) end,
    exp = function() return y:exp() end,
    log = function() return y:log() end,
    rsqrt = function() return y:rsqrt() end,
    reciprocal = function() return y:reciprocal() end,
    pow = function() return y:pow(2) end,
  }
end

local function check_device(device, device_type)
  local rules = require("lt.core")._autocast_ops()
  assert.is_true(#rules > 0)
  for _, low in ipairs { "bfloat16", "float16" } do
    -- a 16-bit input for the float32 rules, float32 for the products
    local y32 = lt.rand(4, 6, { device = device }) + 0.5
    local y16 = y32:to(low)
    lt.autocast({ dtype = low, device_type = device_type }, function()
      local with32, with16 = cases(y32), cases(y16)
      for _, rule in ipairs(rules) do
        assert.is_not_nil(with32[rule.op], "autocast rule for " .. rule.op .. " has no case in this spec")
        local applies = not rule.cuda_only or device_type == "cuda"
        if rule.dtype == "lower" then
          local want = applies and low or "float32"
          assert.equal(want, with32[rule.op]().dtype, rule.op .. " on a float32 input, " .. device_type)
        else
          local want = applies and "float32" or low
          assert.equal(want, with16[rule.op]().dtype, rule.op .. " on a " .. low .. " input, " .. device_type)
        end
      end
    end)
  end
end

describe("autocast's policy table", function()
  it("has a rule per op, each followed in a CPU region", function()
    check_device("cpu", "cpu")
  end)

  it("each rule followed in a CUDA region", function()
    if not lt.cuda.is_available() then
      pending("no CUDA device (the simdev/ run of this spec checks it on the simulated device)")
      return
    end
    check_device("cuda", "cuda")
  end)
end)
