-- lt.data.cifar10 and lt.data.mnist on files the spec writes: CIFAR-10's
-- binary batches (1 label byte + 3072 pixel bytes per record, [C, H, W]) and
-- MNIST's IDX files, and the errors of truncated or malformed ones, which
-- name the file and what is wrong.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

-- The pixel byte of record r (0-based within its file, file b) at channel c,
-- row y, column x (0-based).
local function pixel(b, r, c, y, x) return (b * 31 + r * 7 + c * 50 + y * 3 + x) % 256 end

-- A CIFAR-10 batch of n records: record r has label (b + r) % 10.
local function cifar_batch(b, n)
  local records = {}
  for r = 0, n - 1 do
    local bytes = { string.char((b + r) % 10) }
    for c = 0, 2 do
      for y = 0, 31 do
        local row = {}
        for x = 0, 31 do row[x + 1] = pixel(b, r, c, y, x) end
        bytes[#bytes + 1] = string.char(table.unpack(row))
      end
    end
    records[#records + 1] = table.concat(bytes)
  end
  return table.concat(records)
end

describe("lt.data.cifar10", function()
  local cifar = dir .. "/cifar-10-batches-bin"
  setup(function()
    os.execute("mkdir -p '" .. cifar .. "'")
    for b = 1, 5 do write(cifar .. "/data_batch_" .. b .. ".bin", cifar_batch(b, b)) end -- 1 + 2 + ... + 5 records
    write(cifar .. "/test_batch.bin", cifar_batch(0, 4))
  end)

  it("reads the five training batches in order: uint8 [N, 3, 32, 32] and labels 1..10", function()
    local images, labels, classes = lt.data.cifar10(cifar, "train")
    assert.same({ 15, 3, 32, 32 }, images.shape)
    assert.equal("uint8", images.dtype)
    assert.equal("int64", labels.dtype)
    local expected, n = {}, 0
    for b = 1, 5 do
      for r = 0, b - 1 do
        n = n + 1
        expected[n] = (b + r) % 10 + 1
      end
    end
    assert.same(expected, labels:totable())
    -- record 2 of batch 3 is sample 1 + 2 + 2 = 5: its bytes, channel by channel
    local sample = images[5]
    for _, p in ipairs { { 0, 0, 0 }, { 1, 0, 0 }, { 2, 31, 31 }, { 0, 5, 17 }, { 1, 30, 2 } } do
      local c, y, x = p[1], p[2], p[3]
      assert.equal(pixel(3, 1, c, y, x), sample[c + 1][y + 1][x + 1]:item())
    end
    assert.equal("airplane", classes[1])
    assert.equal("truck", classes[10])
  end)

  it("reads the test batch", function()
    local images, labels = lt.data.cifar10(cifar, "test")
    assert.same({ 4, 3, 32, 32 }, images.shape)
    assert.same({ 1, 2, 3, 4 }, labels:totable())
    assert.equal(pixel(0, 3, 2, 10, 20), images[4][3][11][21]:item())
  end)

  it("names the file and its byte count when a batch is truncated or not CIFAR-10", function()
    local bad = dir .. "/bad"
    os.execute("mkdir -p '" .. bad .. "'")
    local path = write(bad .. "/test_batch.bin", cifar_batch(0, 2):sub(1, 3073 + 1000))
    h.fails_cleanly(function() return lt.data.cifar10(bad, "test") end,
      "cifar10: " .. path .. " holds 4073 bytes, not a whole number of 3073-byte records " ..
      "(1 label byte + 3072 pixel bytes): it is truncated or not a CIFAR-10 binary batch")
    write(path, "")
    h.fails_cleanly(function() return lt.data.cifar10(bad, "test") end, "cifar10: " .. path .. " holds 0 bytes")
    local wrong = cifar_batch(0, 3)
    write(path, wrong:sub(1, 3073) .. string.char(12) .. wrong:sub(3075))
    h.fails_cleanly(function() return lt.data.cifar10(bad, "test") end,
      "cifar10: " .. path .. ": record 2 (byte offset 3073) has label 12, expected 0 to 9")
    h.fails_cleanly(function() return lt.data.cifar10(bad, "train") end,
      "cifar10: cannot open " .. bad .. "/data_batch_1.bin: No such file or directory")
    h.fails_cleanly(function() return lt.data.cifar10(cifar, "valid") end, "cifar10: unknown split 'valid'")
    h.fails_cleanly(function() return lt.data.cifar10(nil, "test") end, "cifar10: expected the directory")
  end)
end)

-- IDX bytes: magic 0x000008NN, big-endian sizes, then the data.
local function idx(sizes, data)
  local parts = { string.pack(">I4", 0x800 + #sizes) }
  for _, s in ipairs(sizes) do parts[#parts + 1] = string.pack(">I4", s) end
  parts[#parts + 1] = data
  return table.concat(parts)
end

local function image_bytes(n, side)
  local out = {}
  for i = 1, n do out[i] = string.rep(string.char(i * 10 % 256), side * side) end
  return table.concat(out)
end

describe("lt.data.mnist", function()
  local mnist = dir .. "/mnist"
  setup(function()
    os.execute("mkdir -p '" .. mnist .. "'")
    write(mnist .. "/train-images-idx3-ubyte", idx({ 3, 28, 28 }, image_bytes(3, 28)))
    write(mnist .. "/train-labels-idx1-ubyte", idx({ 3 }, "\5\0\9"))
    write(mnist .. "/t10k-images-idx3-ubyte", idx({ 2, 28, 28 }, image_bytes(2, 28)))
    write(mnist .. "/t10k-labels-idx1-ubyte", idx({ 2 }, "\1\2"))
  end)

  it("reads the IDX files: uint8 [N, 1, 28, 28] and labels 1..10", function()
    local images, labels = lt.data.mnist(mnist, "train")
    assert.same({ 3, 1, 28, 28 }, images.shape)
    assert.equal("uint8", images.dtype)
    assert.same({ 6, 1, 10 }, labels:totable())
    assert.equal(30, images[3][1][28][28]:item())
    local test_images, test_labels = lt.data.mnist(mnist, "test")
    assert.same({ 2, 1, 28, 28 }, test_images.shape)
    assert.same({ 2, 3 }, test_labels:totable())
  end)

  it("reads gzipped files", function()
    local gz = dir .. "/mnist_gz"
    os.execute("mkdir -p '" .. gz .. "'")
    local ok = os.execute(string.format("command -v gzip >/dev/null && gzip -c '%s/t10k-images-idx3-ubyte' > " ..
      "'%s/t10k-images-idx3-ubyte.gz' && gzip -c '%s/t10k-labels-idx1-ubyte' > '%s/t10k-labels-idx1-ubyte.gz'",
      mnist, gz, mnist, gz))
    if not ok then
      pending("gzip is not installed")
      return
    end
    local images, labels = lt.data.mnist(gz, "test")
    assert.same({ 2, 1, 28, 28 }, images.shape)
    assert.same({ 2, 3 }, labels:totable())
  end)

  it("names the file that is missing, truncated or of the wrong shape", function()
    local bad = dir .. "/mnist_bad"
    os.execute("mkdir -p '" .. bad .. "'")
    h.fails_cleanly(function() return lt.data.mnist(bad, "train") end,
      "mnist: " .. bad .. "/train-images-idx3-ubyte not found (nor " .. bad .. "/train-images-idx3-ubyte.gz)")
    local images = write(bad .. "/train-images-idx3-ubyte", idx({ 3, 28, 28 }, image_bytes(3, 28):sub(1, 2000)))
    local labels = write(bad .. "/train-labels-idx1-ubyte", idx({ 3 }, "\1\2\3"))
    h.fails_cleanly(function() return lt.data.mnist(bad, "train") end, images, "truncated")
    write(images, idx({ 3, 10, 10 }, image_bytes(3, 10)))
    h.fails_cleanly(function() return lt.data.mnist(bad, "train") end,
      "mnist: " .. images .. " holds images of shape [3, 10, 10], expected [N, 28, 28]")
    write(images, idx({ 3, 28, 28 }, image_bytes(3, 28)))
    write(labels, idx({ 2 }, "\1\2"))
    h.fails_cleanly(function() return lt.data.mnist(bad, "train") end,
      "mnist: " .. labels .. " holds 2 labels for 3 images")
    write(labels, idx({ 3 }, "\1\2\10"))
    h.fails_cleanly(function() return lt.data.mnist(bad, "train") end,
      "mnist: " .. labels .. " holds a label above 9")
    h.fails_cleanly(function() return lt.data.mnist(bad, "validation") end, "mnist: unknown split 'validation'")
  end)
end)
