-- The Module system: classes, registration, traversal and names, modes,
-- conversion, state dicts, printing and default initialisation. Nothing here
-- runs a forward except the last block, which waits for lt.nn.functional.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn = lt.nn

local function names_of(iter)
  local out = {}
  for name in iter do out[#out + 1] = name end
  return out
end

local function mlp()
  return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
end

-- A custom module with a parameter, a buffer, a child and a nested Sequential.
local Block = nn.Module:extend("Block")

function Block:init(n)
  self.n = n
  self.scale = nn.Parameter(lt.ones(n))
  self.fc = nn.Linear(n, n)
  self:register_buffer("count", lt.zeros(1))
  self.features = nn.Sequential(nn.Linear(n, 2 * n), nn.ReLU(), nn.Linear(2 * n, n))
end

function Block:forward(x)
  return self.features(self.fc(x)) * self.scale
end

describe("nn.Module classes", function()
  it("extend gives a class; calling it runs init; m(x) calls forward", function()
    local Double = nn.Module:extend("Double")
    local seen
    function Double:init(a, b) seen = { a, b } end
    function Double:forward(x, y) return x * 2, y end
    local m = Double(1, "two")
    assert.same({ 1, "two" }, seen)
    local a, b = m(21, "y")
    assert.equal(42, a)
    assert.equal("y", b)
    assert.is_true(m.training)
    assert.is_true(nn.is_module(m))
    assert.equal("nn.Double", tostring(Double))
  end)

  it("subclasses of subclasses inherit and can call their parent's init", function()
    local Wide = nn.Linear:extend("Wide")
    function Wide:init(n) nn.Linear.init(self, n, 2 * n) end
    local m = Wide(3)
    assert.same({ 6, 3 }, m.weight.shape)
    assert.equal("Wide(in_features=3, out_features=6, bias=true)", tostring(m))
  end)

  it("a module without forward says so", function()
    local m = nn.Module()
    h.fails(function() m(1) end, "Module: forward is not implemented")
  end)
end)

describe("registration", function()
  it("keeps the order of parameters, buffers and children", function()
    local b = Block(4)
    -- container children are named from 0, as PyTorch names them
    assert.same({ "scale", "fc.weight", "fc.bias", "features.0.weight", "features.0.bias", "features.2.weight",
      "features.2.bias" }, names_of(b:named_parameters()))
    assert.same({ "count" }, names_of(b:named_buffers()))
    assert.same({ "fc", "features" }, names_of(b:named_children()))
    assert.same({ "", "fc", "features", "features.0", "features.1", "features.2" }, names_of(b:named_modules()))
    assert.equal(2, #b:children())
    assert.equal(6, #b:modules())
    assert.equal(b.fc, b:children()[1])
  end)

  it("named_parameters iterates name, tensor pairs; parameters lists each tensor once", function()
    local m = mlp()
    local got = {}
    for name, p in m:named_parameters() do got[#got + 1] = name .. ":" .. table.concat(p.shape, "x") end
    assert.same({ "0.weight:256x784", "0.bias:256", "2.weight:128x256", "2.bias:128", "4.weight:10x128",
      "4.bias:10" }, got)
    -- a shared (tied) weight is listed once
    local tied = nn.Sequential(m[1], m[1])
    assert.equal(2, #tied:parameters())
    assert.same({ "0.weight", "0.bias" }, names_of(tied:named_parameters()))
  end)

  it("plain tensors are attributes, Parameters are parameters; reassignment keeps the slot", function()
    local m = nn.Module()
    m.plain = lt.ones(2)
    m.w = nn.Parameter(lt.ones(2))
    m.v = nn.Parameter(lt.ones(3))
    assert.same({ "w", "v" }, names_of(m:named_parameters()))
    local w2 = nn.Parameter(lt.zeros(5))
    m.w = w2
    assert.equal(w2, m.w)
    assert.same({ "w", "v" }, names_of(m:named_parameters()))
    m.w = nil
    assert.is_nil(m.w)
    assert.same({ "v" }, names_of(m:named_parameters()))
    h.fails(function() m.v = lt.ones(3) end, "cannot assign a plain tensor as parameter 'v'")
    h.fails(function() m.train = nn.Linear(2, 2) end, "Module: cannot register 'train': it is the name of a method")
  end)

  it("errors point at the script's line, not into the library", function()
    local err = h.fails(function() nn.Linear(2, 3, { biass = false }) end, "Linear: unknown option 'biass'")
    assert.truthy(err:find("nn_module_spec.lua:%d+: Linear"), err)
    err = h.fails(function() lt.optim.SGD({ lt.zeros(1):requires_grad_() }, { lr = -1 }) end, "SGD: invalid")
    assert.truthy(err:find("nn_module_spec.lua:%d+: SGD"), err)
  end)

  it("Parameter requires grad, returns the tensor and counts it as parameter memory", function()
    lt.gc()
    local before = lt.memory.stats().by_category.parameter.current
    local t = lt.zeros(1000)
    local p = nn.Parameter(t)
    assert.equal(t, p)
    assert.is_true(p.requires_grad)
    assert.is_true(nn.is_parameter(p))
    assert.equal("parameter", lt.memory.category(p))
    assert.equal(before + 4096, lt.memory.stats().by_category.parameter.current)
    assert.is_false(nn.Parameter(lt.zeros(2), false).requires_grad)
  end)

  it("module parameters are counted in by_category.parameter", function()
    lt.gc()
    local before = lt.memory.stats().by_category.parameter.current
    local m = nn.Linear(1000, 100) -- weight 400000 bytes (rounded to 512: 400384), bias 400 (512)
    assert.equal(before + 400384 + 512, lt.memory.stats().by_category.parameter.current)
    assert.equal("parameter", lt.memory.category(m.bias))
  end)

  it("register_buffer keeps buffers out of parameters; non-persistent ones out of state_dict", function()
    local m = nn.Module()
    m:register_buffer("stats", lt.zeros(3))
    m:register_buffer("scratch", lt.zeros(3), false)
    assert.equal(0, #m:parameters())
    assert.equal(2, #m:buffers())
    assert.same({ "stats" }, h.sorted_keys(m:state_dict()))
    h.fails(function() m.stats = 5 end, "cannot assign a number as buffer 'stats'")
  end)

  it("Sequential indexes, counts and appends from 1; names its children from 0", function()
    local s = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    assert.equal(2, #s)
    assert.equal("ReLU()", tostring(s[2]))
    assert.is_nil(s[0])
    -- a child's PyTorch name reaches it too, as getattr(seq, "0") does
    assert.equal(s[1], s["0"])
    s:append(nn.Linear(3, 1))
    assert.equal(3, #s)
    assert.same({ "0.weight", "0.bias", "2.weight", "2.bias" }, names_of(s:named_parameters()))
    assert.same({ "0", "1", "2" }, names_of(s:named_children()))
    s[2] = nn.Tanh()
    assert.same({ "0", "1", "2" }, names_of(s:named_children()))
    assert.equal("Tanh()", tostring(s["1"]))
    local count = 0
    for _ in ipairs(s) do count = count + 1 end
    assert.equal(3, count)
    assert.equal(2, #nn.Sequential({ nn.ReLU(), nn.Tanh() }))
    h.fails(function() nn.Sequential(nn.ReLU(), 5) end, "Sequential: argument 2 is not a module")
  end)

  it("a Torch7-style __init serves as init, with a note", function()
    local said = {}
    local stderr = io.stderr
    io.stderr = { write = function(_, s) said[#said + 1] = s end }
    local ok, err = pcall(function()
      local Net = nn.Module:extend("Net")
      function Net:__init(n) self.fc = nn.Linear(n, 2) end
      function Net:forward(x) return self.fc(x) end
      local m = Net(3)
      assert.equal(8, m:num_parameters())
      assert.same({ 4, 2 }, m(lt.randn(4, 3)).shape)
    end)
    io.stderr = stderr
    assert(ok, err)
    assert.equal(1, #said)
    assert.truthy(said[1]:find("Net:__init is Torch7's name for the constructor; lt calls Net:init", 1, true))
  end)

  it("Sequential:append after a child was removed keeps every child", function()
    local s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 4))
    s[2] = nil
    s:append(nn.Tanh())
    local names = {}
    for name in s:named_children() do names[#names + 1] = name end
    assert.same({ "0", "2", "3" }, names)
    assert.equal(3, #s)
    assert.equal("Linear(in_features=3, out_features=4, bias=true)", tostring(s[3]))
    assert.same({ 5, 4 }, s(lt.randn(5, 2)).shape)
  end)

  it("num_parameters: the MLP 784-256-128-10 has 235146", function()
    assert.equal(235146, mlp():num_parameters())
    assert.equal(0, nn.ReLU():num_parameters())
  end)
end)

describe("modes and gradients", function()
  it("train/eval set training recursively", function()
    local b = Block(2)
    b:eval()
    for _, m in ipairs(b:modules()) do assert.is_false(m.training) end
    b.features:train()
    assert.is_false(b.training)
    assert.is_true(b.features[2].training)
    assert.equal(b, b:train(true))
    for _, m in ipairs(b:modules()) do assert.is_true(m.training) end
  end)

  it("zero_grad sets every parameter's grad to nil (or zeros)", function()
    local m = mlp()
    for _, p in ipairs(m:parameters()) do p.grad = lt.ones(p.shape) end
    m:zero_grad({ set_to_none = false })
    assert.equal(0, m[1].bias.grad:sum():item())
    m:zero_grad()
    for _, p in ipairs(m:parameters()) do assert.is_nil(p.grad) end
  end)

  it("requires_grad_(false) freezes every parameter", function()
    local m = mlp():requires_grad_(false)
    for _, p in ipairs(m:parameters()) do assert.is_false(p.requires_grad) end
    assert.equal(0, m:num_parameters({ trainable_only = true }))
  end)
end)

describe("conversion", function()
  it("half/float/bfloat16/double convert parameters and floating buffers, keeping requires_grad", function()
    local m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm2d(4))
    m[1].weight.grad = lt.ones(4, 3)
    m:half()
    assert.equal("float16", m[1].weight.dtype)
    assert.is_true(m[1].weight.requires_grad)
    assert.is_true(nn.is_parameter(m[1].weight))
    assert.equal("parameter", lt.memory.category(m[1].weight))
    assert.equal("float16", m[1].weight.grad.dtype)
    assert.equal("float16", m[2].running_var.dtype)
    assert.equal("int64", m[2].num_batches_tracked.dtype)
    m:float()
    assert.equal("float32", m[1].weight.dtype)
    m:bfloat16()
    assert.equal("bfloat16", m[2].weight.dtype)
    m:double()
    assert.equal("float64", m[1].bias.dtype)
    m:to({ dtype = "float32", device = "cpu" })
    assert.equal("float32", m[2].bias.dtype)
    assert.same({ "0.weight", "0.bias", "1.weight", "1.bias" }, names_of(m:named_parameters()))
    h.fails(function() m:to("int64") end, "modules convert only to floating dtypes")
  end)

  it("a converted shared weight stays shared", function()
    local lin = nn.Linear(2, 2)
    local s = nn.Sequential(lin, lin)
    s:half()
    assert.equal(s[1].weight, s[2].weight)
  end)

  it("a converted parameter is the same Lua value, so an optimizer made before to() still steps it", function()
    local m = nn.Linear(3, 2)
    local w = m.weight
    local opt = lt.optim.SGD(m:parameters(), { lr = 0.5 })
    w.grad = lt.ones(2, 3)
    m:double()
    assert.equal(w, m.weight)
    assert.equal("float64", w.dtype)
    assert.is_true(w.requires_grad)
    assert.is_true(nn.is_parameter(w))
    assert.equal("parameter", lt.memory.category(w))
    assert.equal("float64", w.grad.dtype)
    local before = w:clone()
    opt:step()
    h.near(-0.5, (w - before):max():item(), 1e-12)
  end)

  it("to() with the same dtype keeps the very same tensors", function()
    local m = nn.Linear(2, 2)
    local w = m.weight
    m:float()
    m:to("cpu")
    assert.equal(w, m.weight)
  end)
end)

describe("state_dict and load_state_dict", function()
  it("names parameters and persistent buffers with dotted names", function()
    local m = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4, 2))
    assert.same({ "0.bias", "0.weight", "1.bias", "1.num_batches_tracked", "1.running_mean", "1.running_var",
      "1.weight", "4.bias", "4.weight" }, h.sorted_keys(m:state_dict()))
  end)

  it("state_dict tensors are detached and share storage", function()
    local m = nn.Linear(2, 2)
    local sd = m:state_dict()
    assert.is_false(sd.weight.requires_grad)
    sd.bias:fill_(7)
    assert.same({ 7, 7 }, m.bias:totable())
  end)

  it("round trip: a fresh module loads another's values", function()
    local a, b = mlp(), mlp()
    local result = b:load_state_dict(a:state_dict())
    assert.same({}, result.missing_keys)
    assert.same({}, result.unexpected_keys)
    for name, p in a:named_parameters() do
      local q = b:state_dict()[name]
      assert.equal(0, (p - q):abs():sum():item(), name)
    end
    assert.is_true(b[1].weight.requires_grad)
  end)

  it("strict errors name missing keys, unexpected keys and shape mismatches in one message", function()
    local Net = nn.Module:extend("Net")
    function Net:init() self.fc = nn.Linear(5, 10) end
    local net = Net()
    local before = net.fc.weight:clone()
    local sd = { ["fc.weight"] = lt.zeros(5, 10), ["fc.b"] = lt.zeros(10) }
    h.fails(function() net:load_state_dict(sd) end,
      "load_state_dict: missing keys: fc.bias; unexpected keys: fc.b; shape mismatch for fc.weight: expected [10, 5], got [5, 10]")
    -- nothing was copied
    assert.equal(0, (net.fc.weight - before):abs():sum():item())
  end)

  it("non-strict loads what matches and reports the rest; shape mismatches still fail", function()
    local net = nn.Sequential(nn.Linear(2, 3))
    local result = net:load_state_dict({ ["0.weight"] = lt.ones(3, 2), extra = lt.zeros(1) },
      { strict = false, quiet = true })
    assert.same({ "0.bias" }, result.missing_keys)
    assert.same({ "extra" }, result.unexpected_keys)
    assert.equal(6, net[1].weight:sum():item())
    h.fails(function() net:load_state_dict({ ["0.weight"] = lt.ones(2, 3) }, { strict = false }) end,
      "shape mismatch for 0.weight: expected [3, 2], got [2, 3]")
  end)

  it("loads buffers too and converts dtypes", function()
    local bn = nn.BatchNorm2d(3)
    local sd = bn:state_dict()
    local other = nn.BatchNorm2d(3):half()
    local values = {}
    for k, v in pairs(sd) do values[k] = v:clone() end
    values.running_mean = lt.tensor({ 1.0, 2.0, 3.0 })
    values.num_batches_tracked = lt.tensor(5)
    other:load_state_dict(values)
    assert.same({ 1, 2, 3 }, other.running_mean:float():totable())
    assert.equal(5, other.num_batches_tracked:item())
  end)
end)

describe("printing", function()
  it("prints the tree as PyTorch does", function()
    local s = nn.Sequential(nn.Linear(784, 256), nn.ReLU())
    assert.equal("Sequential(\n  (0): Linear(in_features=784, out_features=256, bias=true)\n  (1): ReLU()\n)", tostring(s))
    local b = Block(2)
    assert.equal(table.concat({
      "Block(",
      "  (fc): Linear(in_features=2, out_features=2, bias=true)",
      "  (features): Sequential(",
      "    (0): Linear(in_features=2, out_features=4, bias=true)",
      "    (1): ReLU()",
      "    (2): Linear(in_features=4, out_features=2, bias=true)",
      "  )",
      ")",
    }, "\n"), tostring(b))
  end)

  it("shows each layer's options", function()
    assert.equal("Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1))", tostring(nn.Conv2d(1, 32, 3)))
    assert.equal("Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 2), dilation=(2, 2), groups=2, bias=false)",
      tostring(nn.Conv2d(4, 8, { 3, 5 }, { stride = 2, padding = { 1, 2 }, dilation = 2, groups = 2, bias = false })))
    assert.equal("BatchNorm2d(16, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)",
      tostring(nn.BatchNorm2d(16)))
    assert.equal("LayerNorm((10,), eps=1e-05, elementwise_affine=true)", tostring(nn.LayerNorm(10)))
    assert.equal("ReLU(inplace=true)", tostring(nn.ReLU({ inplace = true })))
    assert.equal("GELU(approximate='tanh')", tostring(nn.GELU({ approximate = "tanh" })))
    assert.equal("MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=false)", tostring(nn.MaxPool2d(2)))
    assert.equal("AvgPool2d(kernel_size=3, stride=1, padding=1)", tostring(nn.AvgPool2d(3, { stride = 1, padding = 1 })))
    assert.equal("Dropout(p=0.25)", tostring(nn.Dropout(0.25)))
    assert.equal("Flatten(start_dim=2, end_dim=-1)", tostring(nn.Flatten()))
    assert.equal("Embedding(10, 3, padding_idx=2)", tostring(nn.Embedding(10, 3, { padding_idx = 2 })))
    assert.equal("Identity()", tostring(nn.Identity()))
    assert.equal("CrossEntropyLoss()", tostring(nn.CrossEntropyLoss()))
    assert.equal("MSELoss()", tostring(nn.MSELoss()))
    assert.equal("Tanh()", tostring(nn.Tanh()))
    assert.equal("Sigmoid()", tostring(nn.Sigmoid()))
  end)
end)

describe("default initialisation (PyTorch's)", function()
  local function bounds(t)
    local lo, hi = math.huge, -math.huge
    for _, v in ipairs(t:reshape(-1):totable()) do
      lo, hi = math.min(lo, v), math.max(hi, v)
    end
    return lo, hi
  end

  local function mean_std(t)
    local values = t:double():reshape(-1):totable()
    local sum, sq = 0, 0
    for _, v in ipairs(values) do sum = sum + v end
    local mean = sum / #values
    for _, v in ipairs(values) do sq = sq + (v - mean) ^ 2 end
    return mean, math.sqrt(sq / (#values - 1))
  end

  it("Linear: weight and bias uniform within +-1/sqrt(fan_in), filling the range", function()
    lt.manual_seed(0)
    local m = nn.Linear(400, 300)
    local bound = 1 / math.sqrt(400)
    local lo, hi = bounds(m.weight)
    assert.is_true(lo >= -bound and hi <= bound)
    assert.is_true(lo < -0.98 * bound and hi > 0.98 * bound)
    -- uniform(-b, b) has std b / sqrt(3)
    local mean, std = mean_std(m.weight)
    assert.is_true(math.abs(mean) < 0.01 * bound)
    assert.is_true(math.abs(std - bound / math.sqrt(3)) < 0.01 * bound)
    lo, hi = bounds(m.bias)
    assert.is_true(lo >= -bound and hi <= bound)
  end)

  it("Conv2d: fan_in is in_channels / groups * kh * kw", function()
    local m = nn.Conv2d(8, 16, 3, { groups = 2 })
    local bound = 1 / math.sqrt(4 * 9)
    local lo, hi = bounds(m.weight)
    assert.is_true(lo >= -bound and hi <= bound and hi > 0.9 * bound)
    lo, hi = bounds(m.bias)
    assert.is_true(lo >= -bound and hi <= bound)
  end)

  it("BatchNorm2d: weight 1, bias 0, running_mean 0, running_var 1, num_batches_tracked 0", function()
    local bn = nn.BatchNorm2d(3)
    assert.same({ 1, 1, 1 }, bn.weight:totable())
    assert.same({ 0, 0, 0 }, bn.bias:totable())
    assert.same({ 0, 0, 0 }, bn.running_mean:totable())
    assert.same({ 1, 1, 1 }, bn.running_var:totable())
    assert.equal(0, bn.num_batches_tracked:item())
    assert.equal(0.1, bn.momentum)
    assert.equal(1e-5, bn.eps)
    assert.equal(2, #bn:parameters())
    assert.equal(3, #bn:buffers())
    local plain = nn.BatchNorm2d(3, { affine = false, track_running_stats = false })
    assert.equal(0, #plain:parameters())
    assert.equal(0, #plain:buffers())
    assert.is_nil(nn.BatchNorm2d(3, { momentum = false }).momentum)
  end)

  it("LayerNorm: weight 1 and bias 0 of the normalized shape", function()
    local ln = nn.LayerNorm({ 2, 3 })
    assert.same({ 2, 3 }, ln.weight.shape)
    assert.equal(6, ln.weight:sum():item())
    assert.equal(0, ln.bias:sum():item())
    assert.equal(0, #nn.LayerNorm(4, { elementwise_affine = false }):parameters())
  end)

  it("Embedding: normal(0, 1) with the padding row zero", function()
    lt.manual_seed(1)
    local e = nn.Embedding(1000, 20, { padding_idx = -1 })
    assert.equal(1000, e.padding_idx)
    local mean, std = mean_std(e.weight)
    assert.is_true(math.abs(mean) < 0.02)
    assert.is_true(math.abs(std - 1) < 0.02)
    assert.same({ 0, 0, 0, 0, 0 }, e.weight[1000]:narrow(1, 1, 5):totable())
  end)

  it("nn.init: fans, gains, kaiming and xavier bounds", function()
    local t = lt.empty(16, 8, 3, 3)
    local fan_in, fan_out = nn.init.calculate_fan_in_and_fan_out(t)
    assert.equal(72, fan_in)
    assert.equal(144, fan_out)
    h.near(math.sqrt(2), nn.init.calculate_gain("relu"), 1e-12)
    h.near(5 / 3, nn.init.calculate_gain("tanh"), 1e-12)
    nn.init.kaiming_uniform_(t, { nonlinearity = "relu" })
    local lo, hi = bounds(t)
    local bound = math.sqrt(2) * math.sqrt(3 / 72)
    assert.is_true(lo >= -bound and hi <= bound and hi > 0.9 * bound)
    nn.init.kaiming_uniform_(t, { mode = "fan_out", nonlinearity = "relu" })
    lo, hi = bounds(t)
    bound = math.sqrt(2) * math.sqrt(3 / 144)
    assert.is_true(lo >= -bound and hi <= bound)
    local x = lt.empty(30, 20)
    nn.init.xavier_uniform_(x)
    lo, hi = bounds(x)
    bound = math.sqrt(6 / 50)
    assert.is_true(lo >= -bound and hi <= bound and hi > 0.9 * bound)
    assert.equal(600, nn.init.ones_(x):sum():item())
    assert.equal(0, nn.init.zeros_(x):sum():item())
    assert.equal(1200, nn.init.constant_(x, 2):sum():item())
    h.fails(function() nn.init.calculate_fan_in_and_fan_out(lt.empty(3)) end, "fewer than 2 dimensions")
    h.fails(function() nn.init.kaiming_uniform_(t, { mode = "fan_avg" }) end, "mode fan_avg not supported")
  end)
end)

describe("constructor errors", function()
  it("refuse unknown options and bad sizes, naming the module", function()
    h.fails(function() nn.Linear(2, 3, { biass = false }) end, "Linear: unknown option 'biass'")
    h.fails(function() nn.Linear(2.5, 3) end, "Linear: expected an integer for in_features, got 2.5")
    h.fails(function() nn.Conv2d(3, 8, 3, { groups = 2 }) end, "Conv2d: in_channels must be divisible by groups")
    h.fails(function() nn.Dropout(1.5) end, "Dropout: dropout probability has to be between 0 and 1, but got 1.5")
    h.fails(function() nn.Embedding(5, 2, { padding_idx = 6 }) end, "Embedding: padding_idx must be within 1..5")
    h.fails(function() nn.CrossEntropyLoss({ reduction = "avg" }) end, "CrossEntropyLoss: reduction must be")
    h.fails(function() nn.GELU({ approximate = "fast" }) end, "GELU: approximate must be 'none' or 'tanh'")
  end)
end)

-- Forward passes need lt.nn.functional (written separately): they run once
-- it loads.
local has_functional = pcall(require, "lt.nn.functional")

describe("forward through lt.nn.functional", function()
  if not has_functional then
    pending("lt.nn.functional is not available yet")
    return
  end

  it("Linear computes x W^T + b", function()
    local m = nn.Linear(3, 2)
    m:load_state_dict({ weight = lt.tensor({ { 1.0, 0.0, -1.0 }, { 0.5, 0.5, 0.5 } }), bias = lt.tensor({ 1.0, -1.0 }) })
    local y = m(lt.tensor({ { 1.0, 2.0, 3.0 } }))
    h.near({ { -1.0, 2.0 } }, y:totable())
  end)

  it("an MLP maps a batch to logits; Sequential chains; eval keeps shapes", function()
    local m = mlp()
    local x = lt.randn(4, 784)
    assert.same({ 4, 10 }, m(x).shape)
    m:eval()
    assert.same({ 4, 10 }, m(x).shape)
  end)

  it("a CNN block runs and BatchNorm2d counts batches in training only", function()
    local m = nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
    local x = lt.randn(2, 1, 8, 8)
    assert.same({ 2, 10 }, m(x).shape)
    assert.equal(1, m[2].num_batches_tracked:item())
    assert.is_true(m[2].running_var:sum():item() ~= 4)
    m:eval()
    m(x)
    assert.equal(1, m[2].num_batches_tracked:item())
  end)

  it("losses, activations, dropout and embedding run", function()
    local logits = lt.randn(4, 3)
    local target = lt.tensor({ 1, 2, 3, 1 })
    assert.equal(0, nn.CrossEntropyLoss()(logits, target):dim())
    h.near(0, nn.MSELoss()(logits, logits):item())
    assert.same({ 4, 3 }, nn.GELU()(logits).shape)
    assert.same({ 4, 3 }, nn.Tanh()(logits).shape)
    assert.same({ 4, 3 }, nn.Sigmoid()(logits).shape)
    local d = nn.Dropout(0.5)
    d:eval()
    h.near(logits:totable(), d(logits):totable())
    local e = nn.Embedding(5, 2)
    assert.same({ 3, 2 }, e(lt.tensor({ 1, 5, 2 })).shape)
    assert.same({ 2, 6 }, nn.LayerNorm(6)(lt.randn(2, 6)).shape)
    assert.same({ 1, 1, 2, 2 }, nn.AvgPool2d(2)(lt.randn(1, 1, 4, 4)).shape)
  end)

  it("a module's forward options are built once, and again when a field changes", function()
    local x = lt.randn(1, 1, 4, 4)
    local pool = lt.nn.MaxPool2d(2)
    assert.same({ 1, 1, 2, 2 }, pool(x).shape)
    local first = rawget(pool, "_forward_options")
    pool(x)
    assert.equal(first, rawget(pool, "_forward_options")) -- no new table per call
    pool.stride = 1
    assert.same({ 1, 1, 3, 3 }, pool(x).shape) -- the change is seen
    local conv = lt.nn.Conv2d(1, 1, 3)
    assert.same({ 1, 1, 2, 2 }, conv(x).shape)
    conv.padding = { 1, 1 }
    assert.same({ 1, 1, 4, 4 }, conv(x).shape)
    local relu = lt.nn.ReLU({ inplace = true })
    local y = lt.tensor({ -1, 2 })
    assert.equal(y, relu(y))
    assert.same({ 0, 2 }, y:totable())
  end)
end)
