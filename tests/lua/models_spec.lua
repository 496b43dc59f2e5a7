-- lt.models against torchvision (tests/fixtures/models, written by
-- tests/fixtures/gen_models_fixture.py): the same state_dict keys, shapes,
-- dtypes and order, so torchvision's checkpoints load strictly; the same
-- parameter counts; and the same output of one forward in eval mode, every
-- weight and buffer set on both sides from one formula (a real state dict
-- is too large for the repository; see the generator's header). Also
-- nn.AdaptiveAvgPool2d against PyTorch, and a training step through the
-- models.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn, F = lt.nn, lt.nn.functional
local models = lt.models

local FIXTURES = "tests/fixtures/models/"

local function fixture(name) return dofile(FIXTURES .. name .. ".lua") end

-- ---- the generator's formula ----

-- sin(0.37 * i + 1.3 * k), i = 0 .. n-1, in float64: the same operations in
-- the same order as the generator's, so the float32 values agree.
local function formula(k, n)
  local a = lt.arange(n, { dtype = "float64" }) * 0.37 + 1.3 * k
  return a:sin()
end

local function product(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- The value of the k-th (0-based) state_dict entry, as the generator sets it.
local function entry_value(k, key)
  local name, shape = key.name, key.shape
  local n = product(shape)
  if name:match("num_batches_tracked$") then return lt.full(shape, k, { dtype = "int64" }) end
  local b = formula(k, n)
  local v
  if name:match("running_var$") then
    v = b * 0.5 * b + 1
  elseif name:match("running_mean$") or name:match("bias$") then
    v = b * 0.1
  elseif #shape == 1 then
    v = b * 0.2 + 1
  else
    v = b * (1 / math.sqrt(n // shape[1]))
  end
  return v:float():view(shape)
end

-- A state dict of the fixture's keys filled by the formula.
local function formula_state_dict(keys)
  local sd = {}
  for i, key in ipairs(keys) do sd[key.name] = entry_value(i - 1, key) end
  return sd
end

local function make_input(shape)
  return (lt.arange(product(shape), { dtype = "float64" }) * 0.11 + 0.5):sin():float():view(shape)
end

-- PyTorch's state_dict order: each module in turn (pre-order), its own
-- parameters, then its own persistent buffers.
local function state_dict_order(m)
  local out = {}
  for prefix, mod in m:named_modules() do
    local function add(name) out[#out + 1] = prefix == "" and name or prefix .. "." .. name end
    for name in mod:named_parameters(false) do add(name) end
    for name in mod:named_buffers(false) do add(name) end
  end
  return out
end

-- The module's state_dict keys, shapes and dtypes are the fixture's, in
-- PyTorch's order, so that torchvision's file loads strictly.
local function assert_same_keys(m, keys)
  local names, sd = state_dict_order(m), m:state_dict()
  assert.equal(#keys, #names, "number of state_dict entries")
  for i, key in ipairs(keys) do
    assert.equal(key.name, names[i], "state_dict entry " .. i)
    local t = sd[key.name]
    assert.same(key.shape, t.shape, key.name .. ": shape")
    assert.equal(key.dtype, t.dtype, key.name .. ": dtype")
  end
end

-- Float32 through a deep network: the difference PyTorch and lt may have
-- (another summation order in each convolution) grows with depth, and is
-- measured against the output's scale.
local function assert_output_close(spec, y, what, rel)
  local scale = 0
  for _, e in ipairs(spec.data) do scale = math.max(scale, math.abs(e)) end
  h.fixture_close(spec, y, what, rel, rel * scale)
end

-- Builds the model, checks its keys, loads the formula strictly and runs
-- the fixture's forward in eval mode.
local function check_forward(name, make, rel)
  local f = fixture(name)
  local m = make()
  assert_same_keys(m, f.keys)
  assert.equal(f.num_parameters, m:num_parameters())
  local result = m:load_state_dict(formula_state_dict(f.keys))
  assert.same({}, result.missing_keys)
  assert.same({}, result.unexpected_keys)
  m:eval()
  local y = lt.no_grad(function() return m(make_input(f.input_shape)) end)
  assert_output_close(f.output, y, name .. " output", rel)
  return m, f
end

-- Runs fn(...) as an estimate: the model is built without allocating its
-- parameters (vgg11 has 132.9M of them); fn reads what it needs inside.
local function without_memory(fn)
  lt.memory.estimate(fn)
end

-- ---- nn.AdaptiveAvgPool2d ----

describe("F.adaptive_avg_pool2d and nn.AdaptiveAvgPool2d", function()
  local f = fixture("adaptive_avg_pool2d")

  for _, case in ipairs(f.cases) do
    local label = string.format("output %s from input %s", table.concat(case.output_size, "x"),
      table.concat(case.input_shape, "x"))
    it(label .. ": PyTorch's values and input gradient", function()
      local x = formula(case.k, product(case.input_shape)):float():view(case.input_shape):requires_grad_()
      local y = F.adaptive_avg_pool2d(x, case.output_size)
      h.fixture_close(case.output, y, "output", 1e-6, 1e-7)
      local w = formula(case.k + 100, y:numel()):float():view(y.shape)
      ;(y * w):sum():backward()
      h.fixture_close(case.input_grad, x.grad, "input grad", 1e-6, 1e-7)
      -- the module gives the op's result
      local pool = nn.AdaptiveAvgPool2d(case.output_size)
      assert.same(y:detach():totable(), lt.no_grad(function() return pool(x) end):totable())
    end)
  end

  it("an integer size, false keeping an input size, and PyTorch's repr", function()
    local x = lt.randn(2, 3, 5, 7)
    assert.same({ 2, 3, 4, 4 }, F.adaptive_avg_pool2d(x, 4).shape)
    assert.same({ 2, 3, 5, 2 }, F.adaptive_avg_pool2d(x, { false, 2 }).shape)
    assert.same({ 2, 3, 3, 7 }, nn.AdaptiveAvgPool2d({ 3, false })(x).shape)
    h.near(x:mean(4, true):totable(), F.adaptive_avg_pool2d(x, { false, 1 }):totable(), 1e-6)
    -- output as large as the input: a copy, not the input itself
    local same = F.adaptive_avg_pool2d(x, { 5, 7 })
    assert.is_false(rawequal(same, x))
    assert.same(x:totable(), same:totable())
    assert.equal("AdaptiveAvgPool2d(output_size=(1, 1))", tostring(nn.AdaptiveAvgPool2d({ 1, 1 })))
    assert.equal("AdaptiveAvgPool2d(output_size=7)", tostring(nn.AdaptiveAvgPool2d(7)))
    assert.equal("AdaptiveAvgPool2d(output_size=(None, 2))", tostring(nn.AdaptiveAvgPool2d({ false, 2 })))
  end)

  it("refuses bad sizes and inputs with clear errors", function()
    h.fails_cleanly(function() F.adaptive_avg_pool2d(lt.randn(2, 3), 1) end, "adaptive_avg_pool2d",
      "3D (C, H, W) or 4D", "got 2D")
    h.fails_cleanly(function() F.adaptive_avg_pool2d(lt.randn(1, 2, 3, 3), 0) end, "at least 1")
    h.fails_cleanly(function() F.adaptive_avg_pool2d(lt.randn(1, 2, 3, 3), { 1, 2, 3 }) end, "table of 2")
    h.fails_cleanly(function() F.adaptive_avg_pool2d(lt.ones(1, 2, 3, 3, { dtype = "int64" }), 1) end,
      "floating point")
    h.fails(function() nn.AdaptiveAvgPool2d(0) end, "AdaptiveAvgPool2d", "at least 1")
    h.fails(function() nn.AdaptiveAvgPool2d({ 1 }) end, "AdaptiveAvgPool2d", "table of 2")
  end)
end)

-- ---- ResNet ----

describe("lt.models ResNets are torchvision's", function()
  it("resnet18: keys, 11,689,512 parameters, and torchvision's output", function()
    local m = check_forward("resnet18", models.resnet18, 2e-5)
    assert.equal(11689512, m:num_parameters())
    -- Lua indexing stays 1-based: layer2[1] is "layer2.0"
    assert.same(m:state_dict()["layer2.0.downsample.1.running_mean"]:totable(),
      m.layer2[1].downsample[2].running_mean:totable())
    assert.is_nil(m.layer1[1].downsample)
  end)

  it("resnet34: keys, parameters, output", function()
    local m = check_forward("resnet34", models.resnet34, 2e-5)
    assert.equal(21797672, m:num_parameters())
  end)

  it("resnet50 (Bottleneck): keys, parameters, output", function()
    local m = check_forward("resnet50", models.resnet50, 2e-5)
    assert.equal(25557032, m:num_parameters())
  end)

  it("the deeper and wider ones have torchvision's parameter and key counts", function()
    local counts = fixture("counts")
    without_memory(function()
      for _, name in ipairs { "resnet101", "resnet152", "resnext50_32x4d", "wide_resnet50_2" } do
        local m = models[name]()
        assert.equal(counts[name].num_parameters, m:num_parameters(), name)
        assert.equal(counts[name].num_keys, #state_dict_order(m), name)
      end
    end)
  end)

  it("options: num_classes, zero_init_residual, torchvision's initialisation", function()
    local m = models.resnet18 { num_classes = 10, zero_init_residual = true }
    assert.same({ 10, 512 }, m.fc.weight.shape)
    for _, layer in ipairs { m.layer1, m.layer2, m.layer3, m.layer4 } do
      for _, block in ipairs(layer) do
        assert.equal(0, block.bn2.weight:abs():sum():item())
        assert.equal(1, block.bn1.weight:mean():item())
      end
    end
    -- kaiming_normal_(fan_out, relu): std sqrt(2 / fan_out); layer4's first
    -- conv has 512 * 9 = 4608 fan_out and 1.2M weights, so its std is close
    local w = m.layer4[1].conv2.weight
    assert.near(math.sqrt(2 / (512 * 9)), w:std():item(), 0.01 * math.sqrt(2 / (512 * 9)))
    -- a Bottleneck's last BatchNorm is the one zeroed (a one-block-per-stage
    -- ResNet: cheaper to build than resnet50)
    local tiny = models.ResNet(models.Bottleneck, { 1, 1, 1, 1 }, { zero_init_residual = true })
    assert.equal(0, tiny.layer1[1].bn3.weight:abs():sum():item())
    assert.equal(1, tiny.layer1[1].bn2.weight:mean():item())
    h.fails(function() models.resnet18 { num_class = 10 } end, "unknown option 'num_class'", "num_classes")
    h.fails(function() models.resnext50_32x4d { groups = 8 } end, "resnext50_32x4d", "groups", "fixed")
    h.fails(function() models.ResNet(models.BasicBlock, { 2, 2, 2, 2 }, { groups = 2 }) end,
      "BasicBlock only supports groups=1")
  end)

  it("a training step: every parameter gets a gradient, BatchNorm's statistics move", function()
    local m = models.resnet18 { num_classes = 10 }
    local x = make_input({ 4, 3, 32, 32 })
    local target = lt.tensor({ 1, 5, 10, 3 })
    local clock = os.clock()
    local loss = F.cross_entropy(m(x), target)
    loss:backward()
    local seconds = os.clock() - clock
    assert.is_true(loss:item() > 0 and loss:item() < 100)
    local n = 0
    for name, p in m:named_parameters() do
      n = n + 1
      assert(p.grad ~= nil, name .. " has no gradient")
      assert.same(p.shape, p.grad.shape, name)
      assert(p.grad:abs():sum():item() > 0, name .. ": zero gradient")
    end
    assert.equal(62, n)
    assert.equal(1, m.bn1.num_batches_tracked:item())
    assert.is_true(m.layer1[1].bn1.running_mean:abs():sum():item() > 0)
    -- a loose bound: a few seconds would mean something went quadratic
    assert(seconds < 10, string.format("resnet18 forward and backward on 4x3x32x32 took %.1f s", seconds))
  end)
end)

-- ---- VGG ----

describe("lt.models VGGs are torchvision's", function()
  it("vgg11 and vgg11_bn: keys and parameter counts (built without allocating 507 MB)", function()
    for _, name in ipairs { "vgg11", "vgg11_bn" } do
      local f = fixture(name)
      without_memory(function()
        local m = models[name]()
        assert_same_keys(m, f.keys)
        assert.equal(f.num_parameters, m:num_parameters(), name)
      end)
    end
    assert.equal(132863336, fixture("vgg11").num_parameters)
  end)

  it("vgg13 .. vgg19_bn: parameter and key counts", function()
    local counts = fixture("counts")
    without_memory(function()
      for _, name in ipairs { "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn" } do
        local m = models[name]()
        assert.equal(counts[name].num_parameters, m:num_parameters(), name)
        assert.equal(counts[name].num_keys, #state_dict_order(m), name)
      end
    end)
  end)

  local function small_vgg(config)
    return models.vgg(config.cfg, { batch_norm = true, pool = config.pool, hidden = config.hidden,
      num_classes = config.num_classes })
  end

  it("a small VGG-style: keys, parameters, output (overlapping adaptive windows)", function()
    local f = fixture("vgg_small")
    check_forward("vgg_small", function() return small_vgg(f.config) end, 1e-5)
  end)

  it("a small VGG-style: PyTorch's safetensors file loads strictly and gives the same output", function()
    local f = fixture("vgg_small")
    local m = small_vgg(f.config)
    local result = m:load_state_dict((lt.load(FIXTURES .. "vgg_small.safetensors")))
    assert.same({}, result.missing_keys)
    assert.same({}, result.unexpected_keys)
    assert.equal("features.1.num_batches_tracked", f.keys[7].name)
    assert.equal(6, m.features[2].num_batches_tracked:item()) -- the formula's k for that key
    m:eval()
    local y = lt.no_grad(function() return m(make_input(f.input_shape)) end)
    assert_output_close(f.output, y, "vgg_small output", 1e-5)
  end)

  it("a small VGG-style trains: every parameter gets a gradient", function()
    local f = fixture("vgg_small")
    local m = small_vgg(f.config)
    local loss = F.cross_entropy(m(make_input({ 4, 3, 32, 32 })), lt.tensor({ 1, 2, 3, 10 }))
    loss:backward()
    for name, p in m:named_parameters() do assert(p.grad ~= nil, name .. " has no gradient") end
  end)

  it("refuses an unknown config and a bad option", function()
    h.fails(function() models.vgg("Z") end, "unknown config 'Z'")
    h.fails(function() models.vgg({ 8, "M" }, { bn = true }) end, "unknown option 'bn'")
    h.fails(function() models.vgg({ 8, "N" }) end, "config entry 2")
    h.fails(function() models.vgg11_bn { batch_norm = false } end, "batch_norm is always true")
  end)
end)

-- ---- MLP ----

describe("lt.models.mlp", function()
  it("relu, no dropout: PyTorch's Sequential names and output", function()
    local m = check_forward("mlp", function() return models.mlp({ 20, 64, 32, 10 }) end, 1e-5)
    assert.equal(5, #m)
  end)

  it("gelu and dropout: PyTorch's Sequential names and output (eval mode)", function()
    local m = check_forward("mlp_gelu", function()
      return models.mlp({ 20, 48, 48, 5 }, { activation = "gelu", dropout = 0.1 })
    end, 1e-5)
    assert.equal(7, #m)
    -- an activation may be given as a function making a module
    local same = models.mlp({ 20, 48, 48, 5 }, { activation = nn.GELU, dropout = 0.1 })
    assert.same(state_dict_order(m), state_dict_order(same))
  end)

  it("refuses bad sizes and options", function()
    h.fails(function() models.mlp({ 4 }) end, "at least 2 sizes")
    h.fails(function() models.mlp({ 4, 0 }) end, "size 2")
    h.fails(function() models.mlp({ 4, 2 }, { activation = "swish" }) end, "unknown activation 'swish'")
    h.fails(function() models.mlp({ 4, 2 }, { dropout = 2 }) end, "dropout")
    h.fails(function() models.mlp({ 4, 2 }, { activations = "relu" }) end, "unknown option 'activations'")
  end)
end)

describe("lt.models", function()
  it("loads on first use and is require('lt.models')", function()
    assert.equal(require("lt.models"), lt.models)
    assert.is_function(lt.models.resnet18)
  end)
end)
