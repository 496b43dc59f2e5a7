-- nn modules against PyTorch's own numbers (tests/fixtures/modules, written
-- by tests/fixtures/gen_module_fixture.py): every module's output and the
-- gradients of sum(output * g) with respect to its inputs and parameters,
-- BatchNorm's running statistics after each pass, and, the llm.c way, three
-- training steps of the Fashion MLP (SGD) and CNN (Adam) from PyTorch's
-- initial weights.
local lt = require "lt"
local nn, optim = lt.nn, lt.optim

local FIXTURES = "tests/fixtures/modules/"

-- One float32 forward or backward against PyTorch's float32: both round at
-- every step, in different orders, so they differ by a few ulps of the
-- largest partial sums: 1e-5 relative, plus 1e-6 absolute for values that
-- cancel to near zero (gradients of normalisation layers, sums of signs).
local REL, ABS = 1e-5, 1e-6

-- Three optimizer steps: the differences above, carried through the
-- forward, backward and update of each step and compounded over three.
local TRAIN_REL = 1e-4

local function to_tensor(spec)
  -- the dtype is always given: integral values would otherwise make int64
  return lt.tensor(spec.data, { dtype = spec.dtype or "float32" }):view(spec.shape)
end

local function same_shape(expected, actual)
  if #expected ~= #actual then return false end
  for i = 1, #expected do
    if expected[i] ~= actual[i] then return false end
  end
  return true
end

local function shape_text(shape)
  return "[" .. table.concat(shape, ", ") .. "]"
end

-- Every element within rel * |expected| + abs; int64 values exactly.
local function assert_close(spec, actual, what, rel, abs)
  assert(actual ~= nil, what .. ": missing")
  assert(same_shape(spec.shape, actual.shape),
    string.format("%s: expected shape %s, got %s", what, shape_text(spec.shape), shape_text(actual.shape)))
  local got = actual:reshape(-1):totable()
  local worst, worst_i = 0, nil
  for i, e in ipairs(spec.data) do
    local err = math.abs(e - got[i])
    local allowed = spec.dtype == "int64" and 0 or (rel or REL) * math.abs(e) + (abs or ABS)
    if not (err <= allowed) and (worst_i == nil or err / allowed > worst) then
      worst, worst_i = err / allowed, i
    end
  end
  if worst_i then
    error(string.format("%s[%d] (flat): expected %.9g, got %.9g (%.3g times the tolerance)", what, worst_i,
      spec.data[worst_i], got[worst_i], worst), 2)
  end
end

-- ---- module cases ----

-- The fixture's constructor call {class, args...}: nested calls are child
-- modules, {shape=, data=} tables inside options are tensors (class weights).
local function construct(call)
  local args = {}
  for i = 2, #call do
    local a = call[i]
    if type(a) == "table" and type(a[1]) == "string" then
      a = construct(a)
    elseif type(a) == "table" then
      local opts = {}
      for k, v in pairs(a) do
        opts[k] = (type(v) == "table" and v.data) and to_tensor(v) or v
      end
      a = opts
    end
    args[#args + 1] = a
  end
  return nn[call[1]](table.unpack(args))
end

local function load_state(module, state)
  local sd = {}
  for name, spec in pairs(state) do sd[name] = to_tensor(spec) end
  module:load_state_dict(sd)
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function check_pass(module, pass, label)
  module:train(pass.training)
  module:zero_grad()
  local inputs = {}
  for i, spec in ipairs(pass.inputs) do
    inputs[i] = to_tensor(spec)
    if pass.grad_inputs[i] then inputs[i]:requires_grad_() end
  end
  local out = module(table.unpack(inputs))
  assert_close(pass.output, out, label .. " output")
  local g = to_tensor(pass.grad_output)
  ;(out * g):sum():backward()
  for i, spec in ipairs(pass.grad_inputs) do
    if spec then assert_close(spec, inputs[i].grad, string.format("%s grad of input %d", label, i)) end
  end
  local seen = 0
  for name, p in module:named_parameters() do
    assert_close(pass.grads[name], p.grad, label .. " grad of " .. name)
    seen = seen + 1
  end
  assert.equal(count(pass.grads), seen, label .. ": parameter count")
  seen = 0
  for name, b in module:named_buffers() do
    assert_close(pass.buffers[name], b, label .. " buffer " .. name)
    seen = seen + 1
  end
  assert.equal(count(pass.buffers), seen, label .. ": buffer count")
end

describe("modules match PyTorch 1.13: output and gradients (float32)", function()
  for _, name in ipairs(dofile(FIXTURES .. "index.lua")) do
    it(name, function()
      local fixture = dofile(FIXTURES .. name .. ".lua")
      local module = construct(fixture.module)
      load_state(module, fixture.state)
      for i, pass in ipairs(fixture.passes) do
        check_pass(module, pass, string.format("%s pass %d (%s)", name, i, pass.training and "train" or "eval"))
      end
    end)
  end
end)

-- ---- training ----

local function fashion_mlp()
  return nn.Sequential(
    nn.Flatten(),
    nn.Linear(784, 256), nn.ReLU(),
    nn.Linear(256, 128), nn.ReLU(),
    nn.Linear(128, 10))
end

local function fashion_cnn()
  return nn.Sequential(
    nn.Conv2d(1, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, { padding = 1 }), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(),
    nn.Linear(3136, 128), nn.ReLU(),
    nn.Linear(128, 10))
end

-- Summed in float64, as the generator sums.
local function sums(t)
  local d = t:double()
  return d:sum():item(), d:abs():sum():item()
end

local function train_three_steps(name, model, make_optimizer)
  local fixture = dofile(FIXTURES .. name .. ".lua")
  -- The weights are stored as float16 values (see the generator); PyTorch
  -- trained from exactly these, in float32.
  local stored = lt.load(FIXTURES .. name .. ".safetensors")
  local initial = {}
  for key, t in pairs(stored) do
    if key ~= "input" then initial[key] = t.dtype == "float16" and t:float() or t end
  end
  model:load_state_dict(initial)
  -- Frozen as in the generator: the CNN's conv biases, whose gradient
  -- BatchNorm makes zero but for rounding noise that Adam would amplify.
  local frozen, trainable = {}, {}
  for _, key in ipairs(fixture.frozen) do frozen[key] = true end
  for key, p in model:named_parameters() do
    if frozen[key] then p:requires_grad_(false) else trainable[#trainable + 1] = p end
  end
  local x = stored.input
  local y = lt.tensor(fixture.labels, { dtype = "int64" })
  local opt = make_optimizer(trainable)
  local criterion = nn.CrossEntropyLoss()
  for step, expected in ipairs(fixture.steps) do
    opt:zero_grad()
    local loss = criterion(model(x), y)
    loss:backward()
    opt:step()
    local what = string.format("%s step %d", name, step)
    local l = loss:item()
    assert(math.abs(l - expected.loss) <= TRAIN_REL * math.abs(expected.loss),
      string.format("%s loss: expected %.9g, got %.9g", what, expected.loss, l))
    local state = model:state_dict()
    assert.equal(count(expected.state), count(state), what .. ": state_dict entries")
    for key, e in pairs(expected.state) do
      local sum, abs_sum = sums(state[key])
      -- A sum of values of both signs can cancel to near zero: its error is
      -- relative to the absolute sum, the size of what was added up.
      assert(math.abs(sum - e.sum) <= TRAIN_REL * e.abs_sum,
        string.format("%s %s sum: expected %.9g, got %.9g", what, key, e.sum, sum))
      assert(math.abs(abs_sum - e.abs_sum) <= TRAIN_REL * e.abs_sum,
        string.format("%s %s abs sum: expected %.9g, got %.9g", what, key, e.abs_sum, abs_sum))
    end
  end
  local state = model:state_dict()
  for key, spec in pairs(fixture.final) do
    -- the absolute floor scales with the layer's typical weight (about 0.1)
    assert_close(spec, state[key], name .. " final " .. key, TRAIN_REL, TRAIN_REL * 0.1)
  end
end

describe("training matches PyTorch 1.13 over three steps (float32)", function()
  it("Fashion MLP with SGD (lr 0.05, momentum 0.9)", function()
    train_three_steps("fashion_mlp", fashion_mlp(), function(params)
      return optim.SGD(params, { lr = 0.05, momentum = 0.9 })
    end)
  end)

  it("Fashion CNN with Adam (lr 1e-3), BatchNorm in training", function()
    train_three_steps("fashion_cnn", fashion_cnn(), function(params)
      return optim.Adam(params, { lr = 1e-3 })
    end)
  end)
end)
