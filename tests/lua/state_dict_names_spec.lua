-- State dict names are PyTorch's exactly, so that checkpoints interchange
-- with PyTorch and Hugging Face without renaming: container children are
-- numbered from 0 in names ("layers.0.fc.weight") while Lua indexing stays
-- 1-based (seq[1] holds the parameters "0.*"). Checked against files that
-- PyTorch wrote (tests/fixtures/state_dict, by
-- tests/fixtures/gen_state_dict_fixture.py, which also checks by hand that
-- PyTorch loads lt's files strictly: see its header).
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn = lt.nn

local FIXTURES = "tests/fixtures/state_dict/"

-- ---- the models, built as the generator builds them in PyTorch ----

local Block = nn.Module:extend("Block")

function Block:init(width)
  self.fc = nn.Linear(width, width)
  self.norm = nn.LayerNorm(width)
end

function Block:forward(x)
  return x + self.norm(self.fc(x):tanh())
end

local Encoder = nn.Module:extend("Encoder")

function Encoder:init()
  local width, depth = 6, 3
  self.proj = nn.Linear(4, width)
  local blocks = {}
  for i = 1, depth do blocks[i] = Block(width) end
  self.layers = nn.ModuleList(blocks)
  self.head = nn.Linear(width, 2)
end

function Encoder:forward(x)
  x = self.proj(x)
  for _, layer in ipairs(self.layers) do x = layer(x) end
  return self.head(x)
end

local MODELS = {
  mlp = function() return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)) end,
  encoder = function() return Encoder() end,
  cnn = function()
    return nn.Sequential(
      nn.Sequential(nn.Conv2d(2, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU()),
      nn.Flatten(),
      nn.Linear(4 * 4 * 4, 3))
  end,
}
local NAMES = { "mlp", "encoder", "cnn" }

-- A scratch directory for lt's files, removed at the end.
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

-- ---- helpers ----

local function fixture(name) return dofile(FIXTURES .. name .. ".lua") end

local function torch_state_dict(name) return (lt.load(FIXTURES .. name .. ".safetensors")) end

local function names_of(iter)
  local out = {}
  for name in iter do out[#out + 1] = name end
  return out
end

local function same_tensor(a, b, what)
  assert(a ~= nil and b ~= nil, what .. ": missing")
  assert.same(a.shape, b.shape, what .. ": shape")
  assert.equal(a.dtype, b.dtype, what .. ": dtype")
  assert.same(a:reshape(-1):totable(), b:reshape(-1):totable(), what .. ": values")
end

-- Float32 against PyTorch's float32: a few ulps of the largest partial sums.
local function assert_close(spec, actual, what)
  assert.same(spec.shape, actual.shape, what .. ": shape")
  local got = actual:reshape(-1):totable()
  for i, e in ipairs(spec.data) do
    assert(math.abs(e - got[i]) <= 1e-5 * math.abs(e) + 1e-6,
      string.format("%s[%d] (flat): expected %.9g, got %.9g", what, i, e, got[i]))
  end
end

-- Runs fn with io.stderr captured; returns what was written.
local function stderr_of(fn)
  local said = {}
  local stderr = io.stderr
  io.stderr = { write = function(_, ...) said[#said + 1] = table.concat({ ... }) end }
  local ok, err = pcall(fn)
  io.stderr = stderr
  assert(ok, err)
  return table.concat(said)
end

-- A copy of every state_dict entry, to prove later that nothing changed.
local function snapshot(m)
  local out = {}
  for name, t in pairs(m:state_dict()) do out[name] = t:clone() end
  return out
end

local function unchanged(m, before)
  for name, t in pairs(m:state_dict()) do same_tensor(before[name], t, name) end
end

-- ---- PyTorch's files into lt ----

describe("PyTorch's state dicts load into lt as they are", function()
  for _, name in ipairs(NAMES) do
    it(name .. ": strict load, then lt's output is PyTorch's", function()
      local f = fixture(name)
      local m = MODELS[name]()
      local result = m:load_state_dict(torch_state_dict(name))
      assert.same({}, result.missing_keys)
      assert.same({}, result.unexpected_keys)
      m:eval()
      assert_close(f.output, m(h.fixture_tensor(f.input)), name .. " output")
    end)
  end

  it("Lua indexing stays 1-based: seq[1] holds the parameters named 0.*", function()
    local mlp = MODELS.mlp()
    local sd = torch_state_dict("mlp")
    mlp:load_state_dict(sd)
    same_tensor(sd["0.weight"], mlp[1].weight, "mlp[1].weight")
    same_tensor(sd["2.bias"], mlp[3].bias, "mlp[3].bias")

    local enc = MODELS.encoder()
    sd = torch_state_dict("encoder")
    enc:load_state_dict(sd)
    assert.equal(3, #enc.layers)
    same_tensor(sd["layers.0.fc.weight"], enc.layers[1].fc.weight, "enc.layers[1].fc.weight")
    same_tensor(sd["layers.2.norm.bias"], enc.layers[3].norm.bias, "enc.layers[3].norm.bias")

    local cnn = MODELS.cnn()
    sd = torch_state_dict("cnn")
    cnn:load_state_dict(sd)
    same_tensor(sd["0.1.running_mean"], cnn[1][2].running_mean, "cnn[1][2].running_mean")
    same_tensor(sd["0.1.num_batches_tracked"], cnn[1][2].num_batches_tracked, "cnn[1][2].num_batches_tracked")
    assert.equal(7, cnn[1][2].num_batches_tracked:item())
  end)
end)

-- ---- lt's names are PyTorch's ----

describe("lt's state_dict has PyTorch's keys, shapes and dtypes", function()
  for _, name in ipairs(NAMES) do
    it(name, function()
      local f = fixture(name)
      local m = MODELS[name]()
      local sd = m:state_dict()
      local expected = {}
      for _, key in ipairs(f.keys) do
        expected[#expected + 1] = key.name
        local t = sd[key.name]
        assert(t ~= nil, name .. ": lt's state_dict lacks " .. key.name)
        assert.same(key.shape, t.shape, key.name .. ": shape")
        assert.equal(key.dtype, t.dtype, key.name .. ": dtype")
      end
      table.sort(expected)
      assert.same(expected, h.sorted_keys(sd))
      -- in PyTorch's order too
      assert.same(f.parameters, names_of(m:named_parameters()))
      assert.same(f.buffers, names_of(m:named_buffers()))
    end)
  end

  it("named_modules and named_children name container children from 0", function()
    local enc = MODELS.encoder()
    assert.same({ "proj", "layers", "head" }, names_of(enc:named_children()))
    assert.same({ "", "proj", "layers", "layers.0", "layers.0.fc", "layers.0.norm", "layers.1", "layers.1.fc",
      "layers.1.norm", "layers.2", "layers.2.fc", "layers.2.norm", "head" }, names_of(enc:named_modules()))
    local seq = MODELS.cnn()
    assert.same({ "0", "1", "2" }, names_of(seq:named_children()))
    -- appended children continue the numbering
    local list = nn.ModuleList({ nn.Linear(2, 2) })
    list:append(nn.Linear(2, 2))
    assert.same({ "0.weight", "0.bias", "1.weight", "1.bias" }, names_of(list:named_parameters()))
    assert.equal(list["1"], list[2])
  end)
end)

-- ---- lt's files ----

describe("lt.save of a state_dict", function()
  -- Set LT_STATE_DICT_SAVE_DIR to keep lt's files for the generator's
  -- `check`, which loads them into PyTorch strictly.
  local keep = os.getenv("LT_STATE_DICT_SAVE_DIR")
  if keep then assert(os.execute("mkdir -p '" .. keep .. "'")) end

  for i, name in ipairs(NAMES) do
    it(name .. ": round-trips, and a fresh model loads it strictly with the same output", function()
      local f = fixture(name)
      local x = h.fixture_tensor(f.input)
      lt.manual_seed(100 + i)
      local m = MODELS[name]()
      -- a training step's forward moves BatchNorm's running statistics
      -- (and num_batches_tracked) off their defaults
      m:train()
      lt.no_grad(function() return m(x) end)
      m:eval()
      local y = lt.no_grad(function() return m(x) end)
      local path = dir .. "/" .. name .. ".safetensors"
      lt.save(path, m:state_dict())

      local loaded = lt.load(path)
      local sd = m:state_dict()
      assert.same(h.sorted_keys(sd), h.sorted_keys(loaded))
      for key, t in pairs(sd) do same_tensor(t, loaded[key], key) end

      local fresh = MODELS[name]()
      fresh:load_state_dict(loaded)
      fresh:eval()
      same_tensor(y, lt.no_grad(function() return fresh(x) end), name .. " output")

      if keep then
        lt.save(keep .. "/" .. name .. ".safetensors", sd)
        lt.save(keep .. "/" .. name .. ".output.safetensors", { input = x, output = y })
      end
    end)
  end
end)

-- ---- strict and non-strict loading ----

describe("load_state_dict reports keys that do not match", function()
  it("strict=false returns the missing and unexpected keys and says so on stderr in one line", function()
    local m = MODELS.encoder()
    local sd = torch_state_dict("encoder")
    sd["layers.1.norm.weight"] = nil
    sd["layers.3.fc.weight"] = lt.zeros(6, 6)
    local result
    local said = stderr_of(function() result = m:load_state_dict(sd, { strict = false }) end)
    assert.same({ "layers.1.norm.weight" }, result.missing_keys)
    assert.same({ "layers.3.fc.weight" }, result.unexpected_keys)
    assert.equal("lt: load_state_dict(strict=false): keys 1 missing (layers.1.norm.weight); "
      .. "1 unexpected (layers.3.fc.weight)\n", said)
    -- what matched was loaded
    same_tensor(sd["layers.2.fc.weight"], m.layers[3].fc.weight, "layers.2.fc.weight")
  end)

  it("quiet=true says nothing; a load that matches says nothing either", function()
    local m = MODELS.mlp()
    local result
    local said = stderr_of(function() result = m:load_state_dict({ extra = lt.ones(1) }, { strict = false, quiet = true }) end)
    assert.equal("", said)
    assert.same({ "0.weight", "0.bias", "2.weight", "2.bias" }, result.missing_keys)
    assert.same({ "extra" }, result.unexpected_keys)
    said = stderr_of(function() m:load_state_dict(torch_state_dict("mlp"), { strict = false }) end)
    assert.equal("", said)
    h.fails(function() m:load_state_dict({}, { strict = false, silent = true }) end,
      "load_state_dict: unknown option 'silent'")
  end)

  it("a long key list is cut in the message, never in the result", function()
    local m = MODELS.encoder()
    local result
    local said = stderr_of(function() result = m:load_state_dict({}, { strict = false }) end)
    assert.equal(16, #result.missing_keys)
    assert.truthy(said:find("16 missing (proj.weight, proj.bias, ", 1, true), said)
    assert.truthy(said:find(", ... (8 more)", 1, true), said)
  end)

  it("strict loading fails naming every problem and loads nothing", function()
    local m = MODELS.encoder()
    local before = snapshot(m)
    local sd = torch_state_dict("encoder")
    sd["head.bias"] = nil
    sd["layers.0.fc.weight"] = lt.zeros(6, 5)
    sd["layers.3.norm.bias"] = lt.zeros(6)
    h.fails(function() m:load_state_dict(sd) end,
      "load_state_dict: missing keys: head.bias; unexpected keys: layers.3.norm.bias; "
        .. "shape mismatch for layers.0.fc.weight: expected [6, 6], got [6, 5]")
    unchanged(m, before)
    -- a shape mismatch fails without strict too, and loads nothing either
    h.fails(function() m:load_state_dict(sd, { strict = false, quiet = true }) end,
      "shape mismatch for layers.0.fc.weight")
    unchanged(m, before)
  end)

  it("a file numbered from 1 (written by an older lt) is refused with a hint, and loads nothing", function()
    local m = MODELS.cnn()
    local before = snapshot(m)
    local old = {}
    for key, t in pairs(torch_state_dict("cnn")) do
      old[key:gsub("%d+", function(n) return tostring(tonumber(n) + 1) end)] = t
    end
    h.fails(function() m:load_state_dict(old) end, "missing keys: 0.0.weight", "unexpected keys: 1.1.bias",
      "the keys are one position off", "renumber its keys n -> n-1")
    unchanged(m, before)
  end)
end)
