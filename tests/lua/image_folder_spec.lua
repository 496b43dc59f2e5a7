-- lt.data.ImageFolder and lt.data.transforms on PNG and JPEG files the spec
-- writes itself (lt.data._write_image, stb_image_write): classes from
-- sub-folders, decoding, the transforms against torchvision's definitions,
-- the same batches with and without decode threads, a structural check that
-- the threads decode the next batch before the Lua thread asks for it (no
-- timing), and errors that name the file.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local T = lt.data.transforms

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

local function mkdir(path) assert(os.execute("mkdir -p '" .. path .. "'")) end

local function write_bytes(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

local function read_bytes(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- A uint8 [h, w, c] image whose pixels depend on seed.
local function picture(seed, h_, w, c)
  local g = lt.arange(0, h_ * w * (c or 3)):view(h_, w, c or 3)
  return ((g * (seed * 7 + 3) + seed * 11) % 256):to("uint8")
end

local function max_abs_diff(a, b) return (a:float() - b:float()):abs():max():item() end

-- root/cat/sub/y.png, root/cat/x.png, root/dog/a.png, root/dog/b.JPG, and
-- files that are not images.
local root = dir .. "/pets"
local originals = {}
setup(function()
  mkdir(root .. "/cat/sub")
  mkdir(root .. "/dog")
  originals.y = picture(1, 12, 16)
  originals.x = picture(2, 12, 16)
  originals.a = picture(3, 12, 16)
  originals.b = picture(4, 12, 16)
  lt.data._write_image(root .. "/cat/sub/y.png", originals.y)
  lt.data._write_image(root .. "/cat/x.png", originals.x, "png")
  lt.data._write_image(root .. "/dog/a.png", originals.a)
  lt.data._write_image(root .. "/dog/b.JPG", originals.b, "jpg", 95)
  write_bytes(root .. "/cat/notes.txt", "not an image")
  write_bytes(root .. "/readme.txt", "outside the classes")
end)

describe("lt.data.ImageFolder", function()
  it("takes classes from the sorted sub-folders, labels 1..C, files sorted by path", function()
    local ds = lt.data.ImageFolder(root)
    assert.equal(4, #ds)
    assert.same({ "cat", "dog" }, ds.classes)
    assert.same({ cat = 1, dog = 2 }, ds.class_to_idx)
    assert.same({
      { root .. "/cat/sub/y.png", 1 }, { root .. "/cat/x.png", 1 }, { root .. "/dog/a.png", 2 }, { root .. "/dog/b.JPG", 2 },
    }, ds.samples)
    assert.same({ 1, 1, 2, 2 }, ds.targets)
  end)

  it("decodes PNG exactly and JPEG closely, as uint8 [H, W, C]", function()
    local ds = lt.data.ImageFolder(root)
    local sample = ds:get(2)
    assert.equal(2, #sample)
    local img, label = sample[1], sample[2]
    assert.equal(1, label)
    assert.equal("uint8", img.dtype)
    assert.same({ 12, 16, 3 }, img.shape)
    assert.same(originals.x:totable(), img:totable())
    assert.same(originals.y:totable(), ds:get(1)[1]:totable())
    local jpeg = ds:get(4)[1]
    assert.same({ 12, 16, 3 }, jpeg.shape)
    assert.is_true((jpeg:float() - originals.b:float()):abs():mean():item() < 12)
    local gray = lt.data.ImageFolder(root, { channels = 1 }):get(3)[1]
    assert.same({ 12, 16, 1 }, gray.shape)
    -- a gray PNG read as RGB repeats its one channel
    local mono_dir = dir .. "/mono/only"
    mkdir(mono_dir)
    local mono = picture(5, 6, 7, 1):view(6, 7)
    lt.data._write_image(mono_dir .. "/m.png", mono)
    local rgb = lt.data.ImageFolder(dir .. "/mono"):get(1)[1]
    for c = 1, 3 do assert.same(mono:totable(), rgb:select(3, c):totable()) end
  end)

  it("decodes a leading Resize on the decode threads, with the pixels Resize gives after a decode", function()
    local plain = lt.data.ImageFolder(root)
    local resized = lt.data.ImageFolder(root, { transform = T.Compose { T.Resize({ 9, 5 }), T.ToTensor() } })
    local loader = lt.data.DataLoader(resized, { batch_size = 4, num_workers = 2 })
    local x = loader:iter()()
    assert.same({ 4, 3, 9, 5 }, x.shape)
    for i = 1, 4 do
      local reference = T.ToTensor()(T.Resize({ 9, 5 })(plain:get(i)[1]))
      assert.same(reference:totable(), x[i]:totable())
    end
    assert.is_true(resized:stats().decoded + resized:stats().stolen == 4)
    resized:close()
  end)

  it("gives the same batches with any number of decode threads, random transforms included", function()
    local function epoch(workers)
      local ds = lt.data.ImageFolder(root, { transform = T.Compose {
        T.RandomCrop(10, { padding = 1 }), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(0.5, 0.25) } })
      local loader = lt.data.DataLoader(ds, { batch_size = 3, shuffle = true, seed = 5, num_workers = workers })
      lt.manual_seed(7)
      local out = {}
      for _ = 1, 2 do
        for x, y in loader:iter() do out[#out + 1] = { x:totable(), y:totable() } end
      end
      ds:close()
      return out
    end
    local serial = epoch(0)
    assert.equal(4, #serial)
    assert.same(serial, epoch(1))
    assert.same(serial, epoch(3))
  end)

  it("decodes batch k + 1 on its threads before the Lua thread asks for it (counters, no timing)", function()
    local many = dir .. "/many"
    for c = 1, 2 do
      mkdir(many .. "/c" .. c)
      for i = 1, 5 do lt.data._write_image(string.format("%s/c%d/%d.png", many, c, i), picture(c * 10 + i, 20, 20)) end
    end
    local ds = lt.data.ImageFolder(many, { transform = T.ToTensor() })
    local loader = lt.data.DataLoader(ds, { batch_size = 2, num_workers = 2, prefetch_factor = 1 })
    local next_batch = loader:iter()
    assert.same({ 2, 3, 20, 20 }, next_batch().shape)
    -- Batch 1 was taken; batch 2 was queued before it. Let the threads finish.
    ds:_wait_prefetched()
    local before = ds:stats()
    assert.equal(2, before.threads)
    assert.equal(4, before.submitted)
    assert.equal(2, before.pending) -- batch 2, decoded and waiting to be taken
    assert.is_true(before.decoded >= 2)
    next_batch()
    local after = ds:stats()
    -- Both images of batch 2 were ready when asked for: the threads had
    -- decoded them while the Lua thread held batch 1.
    assert.equal(before.ready + 2, after.ready)
    assert.equal(before.waited, after.waited)
    assert.equal(before.stolen, after.stolen)
    assert.equal(6, after.submitted)
    for _ in next_batch do end
    local final = ds:stats()
    assert.equal(10, final.submitted)
    assert.equal(10, final.ready + final.waited + final.stolen)
    assert.equal(0, final.missed)
    assert.equal(0, final.pending)
    ds:close()
  end)

  it("names the file of a corrupt or truncated image, with or without threads", function()
    local broken = dir .. "/broken"
    mkdir(broken .. "/k")
    lt.data._write_image(broken .. "/k/1.png", picture(1, 8, 8))
    write_bytes(broken .. "/k/2.png", "hello, not a picture")
    write_bytes(broken .. "/k/3.png", read_bytes(broken .. "/k/1.png"):sub(1, 60))
    write_bytes(broken .. "/k/4.jpg", read_bytes(broken .. "/k/1.png"))
    local ds = lt.data.ImageFolder(broken)
    h.fails_cleanly(function() return ds:get(2) end,
      "image: " .. broken .. "/k/2.png is not a PNG or JPEG file")
    h.fails_cleanly(function() return ds:get(3) end, "image: " .. broken .. "/k/3.png is corrupt")
    assert.same({ 8, 8, 3 }, ds:get(4)[1].shape) -- a PNG named .jpg decodes: the bytes decide
    h.fails_cleanly(function()
      for _ in lt.data.DataLoader(ds, { batch_size = 4, num_workers = 2 }):iter() do end
    end, "image: " .. broken .. "/k/2.png is not a PNG or JPEG file")
    assert.same({ 8, 8, 3 }, ds:get(1)[1].shape) -- the session and the dataset go on
    ds:close()
  end)

  it("refuses missing folders, folders without classes or images, bad indices and options", function()
    h.fails_cleanly(function() return lt.data.ImageFolder(dir .. "/nowhere") end,
      "cannot open directory " .. dir .. "/nowhere: No such file or directory")
    mkdir(dir .. "/flat")
    write_bytes(dir .. "/flat/a.png", "x")
    h.fails_cleanly(function() return lt.data.ImageFolder(dir .. "/flat") end,
      "ImageFolder: " .. dir .. "/flat has no sub-folders (one per class)")
    mkdir(dir .. "/gaps/full")
    mkdir(dir .. "/gaps/empty")
    lt.data._write_image(dir .. "/gaps/full/1.png", picture(1, 4, 4))
    h.fails_cleanly(function() return lt.data.ImageFolder(dir .. "/gaps") end,
      "ImageFolder: no PNG or JPEG file (.png, .jpg, .jpeg) in the class folder empty of " .. dir .. "/gaps")
    local ds = lt.data.ImageFolder(root)
    h.fails_cleanly(function() return ds:get(0) end, "ImageFolder: index 0 is out of range (1 to 4)")
    h.fails_cleanly(function() return ds:get(5) end, "ImageFolder: index 5 is out of range (1 to 4)")
    h.fails_cleanly(function() return lt.data.ImageFolder(root, { transforms = T.ToTensor() }) end,
      "ImageFolder: unknown option 'transforms'")
    h.fails_cleanly(function() return lt.data.ImageFolder(root, { channels = 2 }) end, "channels must be 1 (gray), 3 (RGB)")
    h.fails_cleanly(function() return lt.data.ImageFolder(root, { transform = 5 }) end, "transform must be callable")
    h.fails_cleanly(function() return ds:prefetch({ 1 }, 0) end, "num_workers must be an integer from 1 to 64")
  end)

  it("joins its threads on close and starts new ones on demand", function()
    local ds = lt.data.ImageFolder(root)
    ds:prefetch({ 1, 2 }, 2)
    assert.equal(2, ds:stats().threads)
    ds:close()
    assert.equal(0, ds:stats().threads)
    assert.same(originals.x:totable(), ds:get(2)[1]:totable()) -- decoded on the Lua thread
    ds:prefetch({ 3 }, 3)
    assert.equal(3, ds:stats().threads)
    assert.same(originals.a:totable(), ds:get(3)[1]:totable())
    ds:prefetch({ 4 }, 1) -- another size: a new pool
    assert.equal(1, ds:stats().threads)
    ds:close()
    ds:close()
  end)
end)

describe("lt.data.transforms", function()
  it("Resize is bilinear without antialiasing, as F.interpolate(align_corners=False)", function()
    local x = lt.tensor({ { { 0, 10 }, { 20, 30 } } }, { dtype = "float32" }) -- [1, 2, 2]
    local up = T.Resize({ 4, 4 })(x)
    assert.same({ 1, 4, 4 }, up.shape)
    assert.same({ { { 0, 2.5, 7.5, 10 }, { 5, 7.5, 12.5, 15 }, { 15, 17.5, 22.5, 25 }, { 20, 22.5, 27.5, 30 } } },
      up:totable())
    local u8 = T.Resize({ 4, 4 })(x:permute(2, 3, 1):to("uint8")) -- [2, 2, 1], rounded to nearest
    assert.same({ { 0, 3, 8, 10 }, { 5, 8, 13, 15 }, { 15, 18, 23, 25 }, { 20, 23, 28, 30 } }, u8:select(3, 1):totable())
    local ramp = lt.tensor({ { 0, 1, 2, 3 } }, { dtype = "float32" }) -- [H, W] = [1, 4]
    assert.same({ { 0.5, 2.5 } }, T.Resize({ 1, 2 })(ramp):totable())
    assert.same({ 10, 15, 3 }, T.Resize(10)(picture(1, 20, 30)).shape) -- shorter side 10, aspect kept
    assert.same({ 3, 15, 10 }, T.Resize(10)(lt.rand(3, 30, 20)).shape)
    assert.same({ 20, 30, 3 }, T.Resize({ 20, 30 })(picture(1, 20, 30)).shape)
    assert.equal("float64", T.Resize({ 2, 2 })(lt.rand(1, 4, 4, { dtype = "float64" })).dtype)
    assert.equal("Resize(10)", tostring(T.Resize(10)))
  end)

  it("RandomCrop takes a window of the padded image at offsets from lt's generator", function()
    local img = picture(3, 6, 7)
    local crop = T.RandomCrop({ 4, 5 })
    lt.manual_seed(11)
    local a = crop(img)
    lt.manual_seed(11)
    local i, j = lt.randint(0, 2, { 1 }):item(), lt.randint(0, 2, { 1 }):item()
    assert.same({ 4, 5, 3 }, a.shape)
    assert.same(img:narrow(1, i + 1, 4):narrow(2, j + 1, 5):totable(), a:totable())
    -- padding with fill, on a float [C, H, W] image
    local ones = lt.ones(1, 2, 2)
    local padded = T.RandomCrop(4, { padding = 1, fill = -1 })(ones)
    assert.same({ { { -1, -1, -1, -1 }, { -1, 1, 1, -1 }, { -1, 1, 1, -1 }, { -1, -1, -1, -1 } } }, padded:totable())
    assert.same({ 1, 5, 5 }, T.RandomCrop(5, { pad_if_needed = true })(ones).shape)
    h.fails_cleanly(function() return T.RandomCrop(8)(img) end,
      "RandomCrop: the crop size (8, 8) is larger than the image size (6, 7)")
    h.fails_cleanly(function() return T.RandomCrop(4, { padding = -1 }) end, "padding must be a non-negative integer")
  end)

  it("RandomHorizontalFlip mirrors with probability p", function()
    local img = picture(2, 3, 4)
    local flipped = T.RandomHorizontalFlip(1)(img)
    for x = 1, 4 do assert.same(img:select(2, 5 - x):totable(), flipped:select(2, x):totable()) end
    assert.same(img:totable(), T.RandomHorizontalFlip(0)(img):totable())
    local chw = lt.tensor({ { { 1, 2, 3 } } })
    assert.same({ { { 3, 2, 1 } } }, T.RandomHorizontalFlip(1)(chw:float()):totable())
    lt.manual_seed(4)
    local flips = {}
    for k = 1, 20 do flips[k] = rawequal(T.RandomHorizontalFlip()(img), img) end
    lt.manual_seed(4)
    for k = 1, 20 do assert.equal(flips[k], rawequal(T.RandomHorizontalFlip()(img), img)) end
    h.fails_cleanly(function() return T.RandomHorizontalFlip(2) end, "p must be a probability")
  end)

  it("ToTensor, ToFloat and Normalize convert as torchvision", function()
    local img = lt.tensor({ { { 0, 51, 255 }, { 102, 153, 204 } } }, { dtype = "uint8" }) -- [H=1, W=2, C=3]
    local t = T.ToTensor()(img)
    assert.same({ 3, 1, 2 }, t.shape)
    assert.equal("float32", t.dtype)
    h.near({ { { 0, 0.4 } }, { { 0.2, 0.6 } }, { { 1, 0.8 } } }, t:totable())
    local f = T.ToFloat()(img)
    assert.same({ 1, 2, 3 }, f.shape)
    h.near({ { { 0, 0.2, 1 }, { 0.4, 0.6, 0.8 } } }, f:totable())
    local n = T.Normalize({ 0.5, 0.5, 0.5 }, { 0.5, 0.25, 1 })(t)
    h.near({ { { -1, -0.2 } }, { { -1.2, 0.4 } }, { { 0.5, 0.3 } } }, n:totable())
    local composed = T.Compose { T.ToTensor(), T.Normalize(0.5, 0.5) }
    h.near(((t - 0.5) / 0.5):totable(), composed(img):totable())
    assert.equal("Compose{ToTensor(), Normalize({0.5}, {0.5})}", tostring(composed))
  end)

  it("refuse images they would misread, and bad arguments", function()
    local chw_u8 = lt.zeros(3, 32, 32, { dtype = "uint8" })
    h.fails_cleanly(function() return T.RandomCrop(8)(chw_u8) end,
      "RandomCrop: a uint8 image is [H, W, C] with 1, 3 or 4 channels", "apply ToFloat() first")
    h.fails_cleanly(function() return T.Normalize(0.5, 0.5)(chw_u8) end, "Normalize: expected a floating [C, H, W] image")
    h.fails_cleanly(function() return T.Normalize({ 0.5, 0.5 }, { 1, 1 })(lt.zeros(3, 4, 4)) end,
      "Normalize: 2 means and stds for an image of 3 channels")
    h.fails_cleanly(function() return T.Normalize(0, { 1, 0 }) end, "Normalize: std[2] is 0")
    h.fails_cleanly(function() return T.ToTensor()(lt.zeros(4, 4, 3)) end, "ToTensor: expected a uint8 [H, W, C]")
    h.fails_cleanly(function() return T.Resize(0) end, "Resize: size must be a positive integer or {height, width}")
    h.fails_cleanly(function() return T.Resize(4)(lt.zeros(2, 2, 2, 2)) end, "Resize: expected a uint8 [H, W, C]")
    h.fails_cleanly(function() return T.Compose { T.ToTensor(), 3 } end, "Compose: transform 2 is a number, not callable")
  end)
end)
