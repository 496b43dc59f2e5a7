local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

-- A scratch directory for the files of this spec, removed at the end.
local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

local function path(name) return dir .. "/" .. name end

local function read_all(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write_all(p, s)
  local f = assert(io.open(p, "wb"))
  f:write(s)
  f:close()
end

local function exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

-- Values equal bit for bit as far as Lua can see: NaN equals NaN and the
-- sign of zero counts.
local function same_values(a, b)
  if type(a) == "table" then
    assert.equal(#a, #b)
    for i = 1, #a do same_values(a[i], b[i]) end
  elseif a ~= a then
    assert.is_true(b ~= b, "expected NaN, got " .. tostring(b))
  else
    assert.equal(math.type(a), math.type(b))
    assert.equal(a, b)
    if a == 0 and math.type(a) == "float" then assert.equal(1 / a, 1 / b) end
  end
end

local function float32(x) return (string.unpack("<f", string.pack("<f", x))) end

-- One tensor of each dtype, with the values that catch sloppy conversions.
local function all_dtypes()
  local inf, nan = math.huge, 0 / 0
  return {
    f32 = lt.tensor({ { 1.5, -0.0, 1e-45 }, { 3.4e38, inf, nan } }),
    f64 = lt.tensor({ math.pi, -1e300, 5e-324 }, { dtype = "float64" }),
    f16 = lt.tensor({ 1.0, -0.0, 2 ^ -24, 65504, -inf, nan }, { dtype = "float16" }),
    bf16 = lt.tensor({ 1.0, -3.0, 2 ^ 100, nan }, { dtype = "bfloat16" }),
    i64 = lt.tensor({ math.mininteger, math.maxinteger, 0 }),
    i32 = lt.tensor({ -2147483648, 2147483647 }, { dtype = "int32" }),
    u8 = lt.tensor({ { 0, 255 }, { 128, 7 } }, { dtype = "uint8" }),
    bool = lt.tensor({ true, false, true }),
    scalar = lt.tensor(2.5),
    empty = lt.zeros(0, 3),
  }
end

describe("lt.save / lt.load", function()

  it("round trips tensors and metadata (numbers come back as strings)", function()
    local w = lt.randn(4, 3)
    lt.save(path("a.safetensors"), { weight = w, step = lt.tensor({ 7 }) },
      { metadata = { epoch = 3, lr = 0.5, note = "héllo \"world\"\n" } })
    local t, meta = lt.load(path("a.safetensors"))
    same_values(w:totable(), t.weight:totable())
    assert.same({ 4, 3 }, t.weight.shape)
    assert.equal("float32", t.weight.dtype)
    assert.same({ 7 }, t.step:totable())
    assert.same({ epoch = "3", lr = "0.5", note = "héllo \"world\"\n" }, meta)
  end)

  it("is bit-exact for every dtype, and a re-save writes the same bytes", function()
    local src = all_dtypes()
    lt.save(path("all.safetensors"), src)
    local t, meta = lt.load(path("all.safetensors"))
    assert.same({}, meta)
    for name, x in pairs(src) do
      assert.equal(x.dtype, t[name].dtype)
      assert.same(x.shape, t[name].shape)
      same_values(x:totable(), t[name]:totable())
    end
    lt.save(path("again.safetensors"), t)
    assert.equal(read_all(path("all.safetensors")), read_all(path("again.safetensors")))
  end)

  it("writes the header the reference implementation writes", function()
    lt.save(path("small.safetensors"), { b = lt.tensor({ 1, 2, 3 }, { dtype = "uint8" }), a = lt.tensor({ true }) },
      { metadata = { k = "v" } })
    local bytes = read_all(path("small.safetensors"))
    local n = string.unpack("<I8", bytes)
    assert.equal(0, n % 8)
    local header = bytes:sub(9, 8 + n)
    assert.equal('{"__metadata__":{"k":"v"},"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},' ..
      '"b":{"dtype":"U8","shape":[3],"data_offsets":[1,4]}}', (header:gsub(" +$", "")))
    assert.equal("\1\1\2\3", bytes:sub(9 + n))
  end)

  it("writes a view as its values in row-major order", function()
    local m = lt.arange(6):view(2, 3):float()
    lt.save(path("view.safetensors"), { t = m:t(), row = m:select(1, 2) })
    local t = lt.load(path("view.safetensors"))
    assert.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, t.t:totable())
    assert.same({ 3, 4, 5 }, t.row:totable())
  end)

  it("reads a file written by PyTorch's safetensors (tests/fixtures)", function()
    local t, meta = lt.load("tests/fixtures/torch_written.safetensors")
    assert.same({ format = "pt", epoch = "7", note = "h\u{e9}llo \u{2713} \"quoted\"\n" }, meta)
    same_values({ { 1.5, -2.25, 3.0 }, { float32(0.1), float32(1e-30), -0.0 } }, t.f32:totable())
    same_values({ math.huge, -math.huge, 0 / 0 }, t.f32_special:totable())
    same_values({ math.pi, -1e300, 5e-324 }, t.f64:totable())
    assert.equal("float64", t.f64.dtype)
    same_values({ 1.0, -0.5, 65504.0, 2 ^ -24, math.huge }, t.f16:totable())
    assert.equal("float16", t.f16.dtype)
    same_values({ 1.0, -3.0, 2 ^ 100, 0.0078125 }, t.bf16:totable())
    assert.equal("bfloat16", t.bf16.dtype)
    same_values({ math.mininteger, math.maxinteger, 0, 42 }, t.i64:totable())
    same_values({ -2147483648, 2147483647, 7 }, t.i32:totable())
    assert.equal("int32", t.i32.dtype)
    same_values({ { 0, 255 }, { 128, 1 } }, t.u8:totable())
    assert.same({ true, false, true }, t.flags:totable())
    assert.same({ 0, 3 }, t.empty.shape)
    assert.same({}, t.scalar.shape)
    assert.equal(2.5, t.scalar:item())
    assert.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, t.transposed:totable())
  end)

  it("replaces an existing file only on success and leaves no temporary file", function()
    local p = path("keep.safetensors")
    lt.save(p, { x = lt.tensor({ 1, 2 }) })
    local before = read_all(p)
    local freed = lt.ones(2)
    freed:free()
    h.fails_cleanly(function() lt.save(p, { x = freed }) end, "attempt to use a freed tensor")
    h.fails_cleanly(function() lt.save(p, { ["__metadata__"] = lt.ones(1) }) end, "'__metadata__' cannot name a tensor")
    h.fails_cleanly(function() lt.save(p, { x = 5 }) end, "save: 'x' is a number, not a tensor")
    h.fails_cleanly(function() lt.save(p, { lt.ones(1) }) end, "tensor names must be strings")
    h.fails_cleanly(function() lt.save(p, {}, { metadata = { k = {} } }) end, "metadata value of 'k' must be a string or a number")
    h.fails_cleanly(function() lt.save(p, {}, { meta = {} }) end, "unknown option 'meta'")
    assert.equal(before, read_all(p))
    lt.save(p, { x = lt.tensor({ 3, 4, 5 }) })
    assert.same({ 3, 4, 5 }, lt.load(p).x:totable())
    local listing = io.popen("ls -a '" .. dir .. "'"):read("a")
    assert.is_nil(listing:find(".tmp.", 1, true))
  end)

  it("fails cleanly when the directory does not exist", function()
    local p = path("no/such/dir/model.safetensors")
    h.fails_cleanly(function() lt.save(p, { x = lt.ones(3) }) end, "cannot create", "no/such/dir/model.safetensors")
    assert.is_false(exists(p))
  end)

  it("refuses truncated and malformed files with an error naming the file, and the session goes on", function()
    local p = path("good.safetensors")
    lt.save(p, { w = lt.randn(5, 5), b = lt.zeros(5) }, { metadata = { epoch = 1 } })
    local bytes = read_all(p)
    local cut = path("cut.safetensors")
    for _, len in ipairs { 0, 4, 8, 20, #bytes // 2, #bytes - 1 } do
      write_all(cut, bytes:sub(1, len))
      h.fails_cleanly(function() return lt.load(cut) end, "safetensors: ", cut)
    end
    write_all(cut, bytes:sub(1, #bytes - 4))
    h.fails_cleanly(function() return lt.load(cut) end, "file is truncated: the tensors need 120 bytes of data, only 116 present")
    write_all(cut, bytes .. "xx")
    h.fails_cleanly(function() return lt.load(cut) end, "2 bytes after the last tensor's data")
    local function with_header(json, data)
      write_all(cut, string.pack("<I8", #json) .. json .. (data or ""))
      return function() return lt.load(cut) end
    end
    h.fails_cleanly(with_header('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', ("\0"):rep(8)),
      "malformed header: expected ',' or '}' after a tensor entry")
    h.fails_cleanly(with_header('{"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}}', ("\0"):rep(8)),
      "tensor 'a' has dtype 'C64', which lt does not support")
    h.fails_cleanly(with_header('{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', ("\0"):rep(8)),
      "tensor 'a' of shape [3] and dtype F32 needs 12 bytes")
    h.fails_cleanly(with_header('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},' ..
      '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', "abc"), "the data of tensors 'a' and 'b' overlap")
    h.fails_cleanly(with_header('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},' ..
      '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', "ab"), "tensor name 'a' appears twice")
    -- shapes past int64: the element count, and (with a size 0, no data)
    -- the strides
    h.fails_cleanly(with_header('{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}'),
      "tensor 'a': shape [4294967296, 4294967296] has too many elements (numel: integer multiplication overflow)")
    h.fails_cleanly(with_header('{"a":{"dtype":"U8","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}}'),
      cut, "tensor 'a': shape [0, 4611686018427387904, 4611686018427387904] is too large for its strides (Stride calculation overflowed)")
    write_all(cut, string.pack("<I8", 1 << 40) .. "{}")
    h.fails_cleanly(function() return lt.load(cut) end, "header length 1099511627776 is larger than the rest of the file")
    write_all(cut, "this is not a tensor file at all")
    h.fails_cleanly(function() return lt.load(cut) end, "is larger than the rest of the file")
    h.fails_cleanly(function() return lt.load(path("absent.safetensors")) end, "cannot open", "absent.safetensors")
  end)
end)

describe("lt.read_idx", function()
  it("refuses sizes whose strides pass int64, even with no data", function()
    local p = path("huge-idx8-ubyte")
    -- magic 0x0808 (unsigned bytes, 8 dims), sizes 0 then seven of 2^32 - 1
    write_all(p, string.pack(">I4I4", 0x0808, 0) .. string.pack(">I4", 0xffffffff):rep(7))
    h.fails_cleanly(function() return lt.read_idx(p) end, "idx: " .. p .. ": shape [0, 4294967295, ",
      "is too large for its strides (Stride calculation overflowed)")
    write_all(p, string.pack(">I4I4I4", 0x0802, 0, 5))
    assert.same({ 0, 5 }, lt.read_idx(p).shape)
  end)
end)

describe("lt.get_rng_state / lt.set_rng_state", function()
  it("replays the generator, also through a file's metadata", function()
    lt.manual_seed(11)
    lt.rand(10)
    local state = lt.get_rng_state()
    assert.equal("string", type(state))
    local a = lt.randn(6):totable()
    lt.save(path("rng.safetensors"), {}, { metadata = { rng = state } })
    lt.manual_seed(99)
    local _, meta = lt.load(path("rng.safetensors"))
    lt.set_rng_state(meta.rng)
    assert.same(a, lt.randn(6):totable())
    h.fails_cleanly(function() lt.set_rng_state("philox:1") end, "set_rng_state: expected a state string")
    h.fails_cleanly(function() lt.set_rng_state(5) end, "set_rng_state: expected a state string")
  end)

  it("saving and resuming gives the same parameters as an uninterrupted run", function()
    -- A stand-in for training on plain tensors: shuffled batches, random
    -- noise and a momentum buffer, all of which a resume has to restore.
    local data = lt.randn(40, 3)
    local function run(epochs, from)
      local w, buf, first = lt.zeros(3), lt.zeros(3), 1
      local loader = lt.data.DataLoader { dataset = { data }, batch_size = 8, shuffle = true }
      if from then
        local t, meta = lt.load(from)
        w, buf, first = t.w, t.buf, tonumber(meta.epoch) + 1
        lt.set_rng_state(meta.rng)
        loader:set_epoch(first)
      end
      for epoch = first, epochs do
        for x in loader:iter() do
          local grad = (w - x:mean(1)) + lt.randn(3) * 0.01
          buf = buf * 0.9 + grad
          w = w - buf * 0.1
        end
        if epoch == 2 and not from then
          lt.save(path("ckpt.safetensors"), { w = w, buf = buf },
            { metadata = { epoch = epoch, rng = lt.get_rng_state() } })
        end
      end
      return w:totable()
    end
    lt.manual_seed(3)
    local uninterrupted = run(4)
    lt.manual_seed(12345) -- whatever happens in between
    lt.rand(17)
    local resumed = run(4, path("ckpt.safetensors"))
    same_values(uninterrupted, resumed)
  end)
end)

describe("lt.index_select and lt.randperm", function()
  it("gathers along a dimension with 1-based indices", function()
    local t = lt.tensor({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } })
    assert.same({ { 7, 8, 9 }, { 1, 2, 3 }, { 7, 8, 9 } }, t:index_select(1, lt.tensor({ 3, 1, 3 })):totable())
    assert.same({ { 3, 1 }, { 6, 4 }, { 9, 7 } }, lt.index_select(t, -1, lt.tensor({ 3, 1 })):totable())
    assert.same({ 0, 3 }, t:index_select(1, lt.tensor({}, { dtype = "int64" })).shape)
    h.fails_cleanly(function() return t:index_select(1, lt.tensor({ 1, 4 })) end,
      "index_select: index 4 (at position 2 of the index) is out of range for dimension 1 of size 3 (expected 1 to 3)")
    h.fails_cleanly(function() return t:index_select(1, lt.tensor({ 0 })) end, "index 0")
    h.fails_cleanly(function() return t:index_select(1, lt.tensor({ 1.0 })) end, "expected an int64 or int32 index tensor, got float32")
    h.fails_cleanly(function() return t:index_select(3, lt.tensor({ 1 })) end, "dimension 3 out of range")
  end)

  it("randperm gives 1..n in an order fixed by the seed", function()
    local p = lt.randperm(50, { seed = 4 }):totable()
    local sorted = { table.unpack(p) }
    table.sort(sorted)
    for i = 1, 50 do assert.equal(i, sorted[i]) end
    assert.same(p, lt.randperm(50, { seed = 4 }):totable())
    assert.are_not.same(p, lt.randperm(50, { seed = 5 }):totable())
    lt.manual_seed(8)
    local g = lt.randperm(20):totable()
    lt.manual_seed(8)
    assert.same(g, lt.randperm(20):totable())
    h.fails_cleanly(function() return lt.randperm(-1) end, "randperm: n must be non-negative")
  end)
end)

describe("lt.data.DataLoader", function()
  local function epoch_values(loader, k)
    local seen = {}
    for x in (k and loader:epoch(k) or loader:iter()) do
      for _, v in ipairs(x:totable()) do seen[#seen + 1] = v end
    end
    return seen
  end

  it("counts batches with and without drop_last", function()
    local data = lt.arange(1, 11)
    local keep = lt.data.DataLoader { dataset = { data }, batch_size = 3 }
    local drop = lt.data.DataLoader { dataset = { data }, batch_size = 3, drop_last = true }
    assert.equal(4, #keep)
    assert.equal(3, #drop)
    local sizes = {}
    for x in keep:iter() do sizes[#sizes + 1] = x.shape[1] end
    assert.same({ 3, 3, 3, 1 }, sizes)
    sizes = {}
    for x in drop:iter() do sizes[#sizes + 1] = x.shape[1] end
    assert.same({ 3, 3, 3 }, sizes)
    assert.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, epoch_values(keep)) -- in order without shuffle
    assert.equal(2, #lt.data.DataLoader(data, { batch_size = 5, drop_last = true }))
  end)

  it("shuffles reproducibly by seed, differently per epoch, each sample once", function()
    local data = lt.arange(1, 101)
    local a = lt.data.DataLoader { dataset = { data }, batch_size = 7, shuffle = true, seed = 42 }
    local b = lt.data.DataLoader { dataset = { data }, batch_size = 7, shuffle = true, seed = 42 }
    local a1, a2 = epoch_values(a), epoch_values(a)
    assert.same(a1, epoch_values(b))
    assert.same(a2, epoch_values(b))
    assert.are_not.same(a1, a2)
    for _, seen in ipairs { a1, a2 } do
      local sorted = { table.unpack(seen) }
      table.sort(sorted)
      for i = 1, 100 do assert.equal(i, sorted[i]) end
    end
    -- Epoch 2 of a fresh loader is epoch 2 of the first one.
    local c = lt.data.DataLoader { dataset = { data }, batch_size = 7, shuffle = true, seed = 42 }
    assert.same(a2, epoch_values(c, 2))
    local d = lt.data.DataLoader { dataset = { data }, batch_size = 7, shuffle = true, seed = 43 }
    assert.are_not.same(a1, epoch_values(d))
  end)

  it("keeps the tensors of a sample together, and names them when the dataset does", function()
    local x, y = lt.arange(1, 21) * 10, lt.arange(1, 21)
    for xb, yb in lt.data.DataLoader({ dataset = { x, y }, batch_size = 6, shuffle = true, seed = 1 }):iter() do
      assert.same((yb * 10):totable(), xb:totable())
    end
    local n = 0
    for batch in lt.data.DataLoader({ dataset = { input = x, target = y }, batch_size = 6 }):iter() do
      assert.same((batch.target * 10):totable(), batch.input:totable())
      n = n + batch.input.shape[1]
    end
    assert.equal(20, n)
  end)

  it("rejects bad datasets and options", function()
    h.fails_cleanly(function() return lt.data.DataLoader { dataset = { lt.ones(3), lt.ones(4) } } end,
      "dataset tensors differ in their first size")
    h.fails_cleanly(function() return lt.data.DataLoader { dataset = { lt.ones(3) }, batch_size = 0 } end,
      "batch_size must be a positive integer")
    h.fails_cleanly(function() return lt.data.DataLoader { dataset = { lt.ones(3) }, batchsize = 2 } end,
      "unknown option 'batchsize'")
    h.fails_cleanly(function() return lt.data.DataLoader { dataset = { lt.ones(3), 5 } } end, "not a tensor")
  end)
end)

describe("lt.data.fashion_mnist", function()
  local dataset_dir = "/usr/share/datasets/fashion-mnist"
  local installed = exists(dataset_dir .. "/t10k-labels-idx1-ubyte.gz")

  it("names the Debian package when the files are missing", function()
    h.fails_cleanly(function() return lt.data.fashion_mnist("train", { dir = path("nowhere") }) end,
      "fashion_mnist: " .. path("nowhere") .. "/train-images-idx3-ubyte.gz not found: install Debian's " ..
      "dataset-fashion-mnist package (apt-get install dataset-fashion-mnist) or pass {dir=...}")
    h.fails_cleanly(function() return lt.data.fashion_mnist("validation") end, "unknown split 'validation'")
  end)

  if not installed then
    pending("Debian's dataset-fashion-mnist is not installed: scripts/setup.sh installs it")
    return
  end

  it("loads the test split with PyTorch's labels plus one", function()
    local images, labels = lt.data.fashion_mnist("test")
    assert.same({ 10000, 1, 28, 28 }, images.shape)
    assert.equal("uint8", images.dtype)
    assert.same({ 10000 }, labels.shape)
    assert.equal("int64", labels.dtype)
    assert.equal(1, labels:min():item())
    assert.equal(10, labels:max():item())
    -- torchvision's FashionMNIST("test") targets[:10] are 9 2 1 1 6 1 4 6 5 7
    assert.same({ 10, 3, 2, 2, 7, 2, 5, 7, 6, 8 }, labels:narrow(1, 1, 10):totable())
    assert.equal(33456, images[1]:long():sum():item()) -- the first image's pixels
  end)

  it("loads the 60000 training images quickly", function()
    local start = os.clock()
    local images, labels = lt.data.fashion_mnist("train", { dir = dataset_dir })
    local seconds = os.clock() - start
    assert.same({ 60000, 1, 28, 28 }, images.shape)
    assert.same({ 60000 }, labels.shape)
    assert.is_true(seconds < 5, string.format("loading took %.2f s", seconds))
    for c = 1, 10 do assert.equal(6000, labels:eq(c):sum():item()) end
  end)
end)
