-- lt.data: data sets and a loader that cuts them into (shuffled) batches:
-- in-memory tensors, the Dataset protocol (#dataset and dataset:get(i)),
-- MNIST, Fashion-MNIST and CIFAR-10 files, CSV tables, image folders and
-- their transforms.
local options_reader = require "lt.nn.options"
local raise = require "lt.user_error"
local core = require "lt.core"
local methods = require "lt.methods"

local data = {}

-- ---- MNIST-like IDX files, CIFAR-10 ---------------------------------------

-- The images and labels of an MNIST-like pair of IDX files: images uint8
-- [N, 1, 28, 28], labels int64 in 1..10 (the file's 0..9 plus one). Errors
-- name op and the file.
local function read_images_and_labels(op, images_path, labels_path)
  local images, labels = core.read_idx(images_path), core.read_idx(labels_path)
  local n = images.shape[1]
  if images:dim() ~= 3 or images.shape[2] ~= 28 or images.shape[3] ~= 28 then
    raise(string.format("%s: %s holds images of shape [%s], expected [N, 28, 28]",
      op, images_path, table.concat(images.shape, ", ")))
  end
  if labels:dim() ~= 1 or labels.shape[1] ~= n then
    raise(string.format("%s: %s holds %s labels for %d images",
      op, labels_path, table.concat(labels.shape, " x "), n))
  end
  if n > 0 then
    local max = labels:max()
    local above = max:item() > 9
    max:free()
    if above then raise(string.format("%s: %s holds a label above 9", op, labels_path)) end
  end
  -- The file's bytes and the int64 copy are freed here, not left to the
  -- collector: at 60000 labels they are 0.5 MiB that nobody holds.
  local wide = labels:long()
  if not rawequal(wide, labels) then labels:free() end
  local classes = wide + 1
  wide:free()
  return images:view(n, 1, 28, 28), classes
end

-- Debian's dataset-fashion-mnist package installs the original gzip files here.
local DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
local SPLIT_PREFIX = { train = "train", test = "t10k" }

local function readable(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function check_options(op, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    raise(string.format("%s: expected an options table, got %s", op, type(opts)))
  end
  for key in pairs(opts) do
    if not allowed[key] then options_reader.unknown(op, key, allowed) end
  end
  return opts
end

--- Fashion-MNIST (Xiao et al. 2017): split "train" (60000 images) or "test"
--- (10000). Returns images, uint8 [N, 1, 28, 28], and labels, int64 in 1..10
--- (the file's classes 0..9 plus one, as every class label in lt is 1-based).
function data.fashion_mnist(split, opts)
  split = split or "train"
  opts = check_options("fashion_mnist", opts, { dir = true })
  local prefix = SPLIT_PREFIX[split]
  if not prefix then
    raise(string.format("fashion_mnist: unknown split '%s' (expected \"train\" or \"test\")", tostring(split)))
  end
  local dir = opts.dir or DEFAULT_DIR
  if type(dir) ~= "string" then raise("fashion_mnist: dir must be a string, got " .. type(dir)) end
  if dir:find("\0", 1, true) then raise("fashion_mnist: dir contains a NUL character") end
  local images_path = string.format("%s/%s-images-idx3-ubyte.gz", dir, prefix)
  local labels_path = string.format("%s/%s-labels-idx1-ubyte.gz", dir, prefix)
  for _, path in ipairs { images_path, labels_path } do
    if not readable(path) then
      error(string.format("fashion_mnist: %s not found: install Debian's dataset-fashion-mnist package " ..
        "(apt-get install dataset-fashion-mnist) or pass {dir=...}", path), 2)
    end
  end
  return read_images_and_labels("fashion_mnist", images_path, labels_path)
end

--- MNIST (LeCun et al. 1998) from dir, which holds the four IDX files as
--- distributed (train-images-idx3-ubyte, train-labels-idx1-ubyte,
--- t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte), each plain or gzipped
--- (.gz). Split "train" (60000) or "test" (10000): images uint8
--- [N, 1, 28, 28] and labels int64 in 1..10 (the digit plus one).
function data.mnist(dir, split)
  split = split or "train"
  if type(dir) ~= "string" then raise("mnist: expected the directory of the IDX files, got " .. type(dir)) end
  if dir:find("\0", 1, true) then raise("mnist: dir contains a NUL character") end
  local prefix = SPLIT_PREFIX[split]
  if not prefix then
    raise(string.format("mnist: unknown split '%s' (expected \"train\" or \"test\")", tostring(split)))
  end
  local function find(name)
    local plain = string.format("%s/%s-%s", dir, prefix, name)
    if readable(plain) then return plain end
    if readable(plain .. ".gz") then return plain .. ".gz" end
    raise(string.format("mnist: %s not found (nor %s.gz)", plain, plain))
  end
  return read_images_and_labels("mnist", find("images-idx3-ubyte"), find("labels-idx1-ubyte"))
end

-- CIFAR-10's class names, in the order of its labels (batches.meta.txt).
local CIFAR10_CLASSES = { "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck" }

--- CIFAR-10 (Krizhevsky 2009), binary version, from dir (the folder
--- cifar-10-batches-bin): split "train" reads data_batch_1.bin to
--- data_batch_5.bin, "test" test_batch.bin. Each record is 1 label byte and
--- 3072 pixel bytes in [C, H, W] order. Returns images uint8 [N, 3, 32, 32],
--- labels int64 in 1..10 (the file's 0..9 plus one) and the class names.
--- A file that is not a whole number of 3073-byte records is an error naming
--- the file and its byte count.
function data.cifar10(dir, split)
  split = split or "train"
  if type(dir) ~= "string" then raise("cifar10: expected the directory of the .bin files, got " .. type(dir)) end
  if dir:find("\0", 1, true) then raise("cifar10: dir contains a NUL character") end
  local names
  if split == "train" then
    names = {}
    for i = 1, 5 do names[i] = string.format("%s/data_batch_%d.bin", dir, i) end
  elseif split == "test" then
    names = { dir .. "/test_batch.bin" }
  else
    raise(string.format("cifar10: unknown split '%s' (expected \"train\" or \"test\")", tostring(split)))
  end
  local images, labels = core._cifar10_read(names)
  local classes = {}
  for i, name in ipairs(CIFAR10_CLASSES) do classes[i] = name end
  return images, labels, classes
end

-- ---- DataLoader ------------------------------------------------------------

local DataLoader = {}
DataLoader.__index = DataLoader
DataLoader.__name = "lt.data.DataLoader"

local epoch_order = require("lt.data.order").epoch_order
local DistributedSampler = require "lt.data.distributed_sampler"

-- The tensors of a dataset as a list and their names (nil for a list).
local function dataset_tensors(dataset)
  if core.is_tensor(dataset) then dataset = { dataset } end
  if type(dataset) ~= "table" then
    raise("DataLoader: expected a dataset (a tensor or a table of tensors), got " .. type(dataset))
  end
  local tensors, names = {}, nil
  if #dataset > 0 then
    for i, t in ipairs(dataset) do tensors[i] = t end
  else
    names = {}
    for name in pairs(dataset) do names[#names + 1] = name end
    table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
    for i, name in ipairs(names) do tensors[i] = dataset[name] end
  end
  if #tensors == 0 then raise("DataLoader: the dataset holds no tensors") end
  local n
  for i, t in ipairs(tensors) do
    local label = names and ("'" .. tostring(names[i]) .. "'") or ("tensor " .. i)
    if not core.is_tensor(t) then raise(string.format("DataLoader: dataset %s is a %s, not a tensor", label, type(t))) end
    if t:dim() == 0 then raise(string.format("DataLoader: dataset %s is 0-dimensional", label)) end
    n = n or t.shape[1]
    if t.shape[1] ~= n then
      raise(string.format("DataLoader: dataset tensors differ in their first size (%d and %d for %s)", n, t.shape[1], label))
    end
  end
  return tensors, names, n
end

local LOADER_OPTIONS = { dataset = true, batch_size = true, shuffle = true, seed = true, drop_last = true,
  pin_memory = true, collate = true, num_workers = true, prefetch_factor = true, sampler = true,
  distributed = true }

-- ---- the Dataset protocol ----
-- A dataset other than tensors is any table or userdata with
--   #dataset        its number of samples (the metatable's __len, as PyTorch's __len__)
--   dataset:get(i)  sample i, 1-based (PyTorch's __getitem__): a tensor, a
--                   number, a table of them, or anything the collate function takes
-- and optionally
--   dataset:prefetch(indices, num_workers)  a hint: the samples at indices
--                   will be asked for soon; a dataset may start loading them
--                   in the background (lt.data.ImageFolder decodes them on C
--                   threads). The loader calls it only when num_workers > 0.

-- The get method of a protocol dataset, or nil (tensors and tables of them
-- are the in-memory datasets; a named table's "get" field is a tensor then).
local function get_method(v)
  if (type(v) ~= "table" and type(v) ~= "userdata") or core.is_tensor(v) then return nil end
  local ok, get = pcall(function() return v.get end)
  if ok and type(get) == "function" then return get end
  return nil
end

local function dataset_length(dataset)
  local mt = getmetatable(dataset)
  if type(mt) ~= "table" or rawget(mt, "__len") == nil then
    raise("DataLoader: the dataset has a get method but no length: give its metatable a __len " ..
      "(the number of samples, as PyTorch's __len__)")
  end
  local n = #dataset
  if math.type(n) ~= "integer" or n < 0 then
    raise("DataLoader: the dataset's length (#dataset) must be a non-negative integer, got " .. tostring(n))
  end
  return n
end

local function check_count(name, v, min)
  if v ~= nil and (math.type(v) ~= "integer" or v < min) then
    raise(string.format("DataLoader: %s must be an integer >= %d, got %s", name, min, tostring(v)))
  end
end

--- DataLoader{dataset = {images, labels}, batch_size = 128, shuffle = true,
--- seed = 1, drop_last = false, pin_memory = false} (or DataLoader(dataset,
--- {batch_size = ...})). pin_memory puts each batch in page-locked memory, from
--- which t:to("cuda", {non_blocking = true}) copies without waiting.
--- `for x, y in loader:iter() do` walks one epoch in batches, each a new
--- tensor gathered along the first dimension; a dataset given as a table with
--- names yields one table of batches per step instead. Shuffled orders come
--- from lt's generator: with a seed, epoch k's order depends only on (seed, k);
--- without one, from the global generator (lt.manual_seed, lt.get_rng_state).
---
--- The dataset may also follow the Dataset protocol (#dataset and
--- dataset:get(i), see above): each batch is then collate(samples, indices),
--- lt.data.default_collate unless opts.collate is given, and a batch that is a
--- list ({x, y}) comes out as several values, as with {images, labels}.
--- num_workers > 0 lets a dataset with a prefetch method load the next
--- prefetch_factor (2) batches in the background while the current one is
--- used.
--- sampler (a DistributedSampler, or anything with indices(epoch) and a
--- length) orders the samples instead of shuffle, by the loader's epochs;
--- distributed = true makes a DistributedSampler over the process group (with
--- shuffle, and seed defaulting to 0): each rank iterates its share.
function data.DataLoader(dataset, opts)
  if opts == nil and type(dataset) == "table" and not core.is_tensor(dataset) and dataset.dataset ~= nil
      and not get_method(dataset) then
    opts, dataset = dataset, dataset.dataset
  end
  opts = check_options("DataLoader", opts, LOADER_OPTIONS)
  local protocol = get_method(dataset) ~= nil
  local tensors, names, n
  if protocol then
    n = dataset_length(dataset)
  else
    tensors, names, n = dataset_tensors(dataset)
    for _, key in ipairs { "collate", "num_workers", "prefetch_factor" } do
      if opts[key] ~= nil then
        raise(string.format("DataLoader: %s applies to a dataset with get(i) and a length, not to tensors", key))
      end
    end
  end
  local batch_size = opts.batch_size or 1
  if math.type(batch_size) ~= "integer" or batch_size < 1 then
    raise("DataLoader: batch_size must be a positive integer, got " .. tostring(batch_size))
  end
  if opts.seed ~= nil and math.type(opts.seed) ~= "integer" then
    raise("DataLoader: seed must be an integer, got " .. tostring(opts.seed))
  end
  for _, flag in ipairs { "shuffle", "drop_last", "pin_memory" } do
    if opts[flag] ~= nil and type(opts[flag]) ~= "boolean" then
      raise(string.format("DataLoader: %s must be a boolean, got %s", flag, type(opts[flag])))
    end
  end
  if opts.collate ~= nil and type(opts.collate) ~= "function" then
    raise("DataLoader: collate must be a function(samples, indices), got " .. type(opts.collate))
  end
  check_count("num_workers", opts.num_workers, 0)
  check_count("prefetch_factor", opts.prefetch_factor, 1)
  local sampler = opts.sampler
  if opts.distributed ~= nil and type(opts.distributed) ~= "boolean" then
    raise("DataLoader: distributed must be a boolean, got " .. type(opts.distributed))
  end
  if sampler ~= nil and opts.distributed then
    raise("DataLoader: give either sampler or distributed = true, not both")
  end
  if sampler ~= nil and opts.shuffle then
    raise("DataLoader: sampler option is mutually exclusive with shuffle (the sampler orders the samples)")
  end
  if opts.distributed then
    -- This rank's share of every epoch; all ranks need the same order, so
    -- the seed defaults to DistributedSampler's 0.
    sampler = DistributedSampler(n, { shuffle = opts.shuffle or false, seed = opts.seed })
  elseif sampler ~= nil and (getmetatable(sampler) == nil or type(sampler.indices) ~= "function") then
    raise("DataLoader: sampler must have indices(epoch) and a length, such as lt.data.DistributedSampler, got "
      .. type(sampler))
  end
  return setmetatable({
    dataset = dataset,
    batch_size = batch_size,
    shuffle = opts.shuffle or false,
    seed = opts.seed,
    drop_last = opts.drop_last or false,
    pin_memory = opts.pin_memory or false,
    size = sampler and #sampler or n,
    sampler = sampler,
    collate = opts.collate or (protocol and data.default_collate or nil),
    num_workers = opts.num_workers or 0,
    prefetch_factor = opts.prefetch_factor or 2,
    _protocol = protocol,
    _tensors = tensors,
    _names = names,
    _next_epoch = 1,
  }, DataLoader)
end

--- The number of batches in an epoch.
function DataLoader:__len()
  if self.drop_last then return self.size // self.batch_size end
  return (self.size + self.batch_size - 1) // self.batch_size
end

--- Makes the next epoch started by iter() epoch k (1-based), e.g. to resume
--- a run: its shuffled order is the one an uninterrupted run would see.
function DataLoader:set_epoch(k)
  if math.type(k) ~= "integer" or k < 1 then
    raise("DataLoader: set_epoch expects a positive integer, got " .. tostring(k))
  end
  self._next_epoch = k
end

--- The order of the samples in epoch k: int64 indices 1..size (with a
--- sampler, its indices for epoch k).
function DataLoader:order(k)
  if self.sampler then return core.tensor(self.sampler:indices(k), { dtype = "int64" }) end
  return epoch_order(self.size, self.shuffle, self.seed, k)
end

-- The one device every dataset tensor is on, or nil when they are on the CPU
-- or on several.
local function common_device(tensors)
  local dev = tensors[1].device
  for i = 2, #tensors do
    if tensors[i].device ~= dev then return nil end
  end
  return dev ~= "cpu" and dev or nil
end

-- Pins every tensor of a collated batch (tables walked), freeing the
-- pageable copies made by the collate.
local function pin_batch(v)
  if core.is_tensor(v) then
    local pinned = v:pin_memory()
    if not rawequal(pinned, v) then v:free() end
    return pinned
  elseif type(v) == "table" and getmetatable(v) == nil then
    for k, x in pairs(v) do v[k] = pin_batch(x) end
  end
  return v
end

-- One epoch of a protocol dataset. Everything here runs on the Lua thread in
-- a fixed order (the order tensor, then the batches' get calls in sequence),
-- so a dataset's random transforms draw the same numbers however long the
-- background decoding takes. The prefetch hints run ahead of the gets:
-- before batch b is gathered, batches up to b + prefetch_factor have been
-- announced, so they load while the caller computes on batch b.
local function protocol_epoch(self, order)
  local positions = order:totable()
  order:free()
  local dataset, batch_size, size, batches = self.dataset, self.batch_size, self.size, #self
  local collate, workers = self.collate, self.num_workers
  local prefetch
  if workers > 0 then
    local ok, fn = pcall(function() return dataset.prefetch end)
    if ok and type(fn) == "function" then prefetch = fn end
  end
  local function indices_of(b)
    local first, list = (b - 1) * batch_size, {}
    for k = 1, math.min(batch_size, size - first) do list[k] = positions[first + k] end
    return list
  end
  local announced, b = 0, 0
  return function()
    b = b + 1
    if b > batches then return nil end
    if prefetch then
      local last = math.min(batches, b + self.prefetch_factor)
      while announced < last do
        announced = announced + 1
        prefetch(dataset, indices_of(announced), workers)
      end
    end
    local indices, samples = indices_of(b), {}
    for k, i in ipairs(indices) do
      local sample = dataset:get(i)
      if sample == nil then raise(string.format("DataLoader: dataset:get(%d) returned nil", i)) end
      samples[k] = sample
    end
    local batch = collate(samples, indices)
    if self.pin_memory then batch = pin_batch(batch) end
    if type(batch) == "table" and getmetatable(batch) == nil and #batch > 0 then
      return table.unpack(batch, 1, #batch)
    end
    return batch
  end
end

--- Iterates the next epoch (1 first, then 2, ...: each call moves on).
function DataLoader:iter()
  local epoch = self._next_epoch
  self._next_epoch = epoch + 1
  if self._protocol then return protocol_epoch(self, self:order(epoch)) end
  local order, tensors, names = self:order(epoch), self._tensors, self._names
  -- A dataset on a device gets its order there once per epoch: each batch's
  -- gather then reads its indices on the device, and their range is known
  -- from the copy, so no batch touches the host.
  local dev = common_device(tensors)
  if dev then
    local moved = order:to(dev)
    if not rawequal(moved, order) then order:free() end -- made here: the host copy is garbage now
    order = moved
  end
  local batches, batch_size, size = #self, self.batch_size, self.size
  local b = 0
  return function()
    b = b + 1
    if b > batches then return nil end
    local first = (b - 1) * batch_size + 1
    local index = order:narrow(1, first, math.min(batch_size, size - first + 1))
    local out = {}
    for i, t in ipairs(tensors) do
      local batch = t:index_select(1, index)
      if self.pin_memory then
        local pinned = batch:pin_memory()
        if not rawequal(pinned, batch) then batch:free() end -- the pageable copy, made here
        batch = pinned
      end
      out[i] = batch
    end
    index:free()
    if names then
      local named = {}
      for i, name in ipairs(names) do named[name] = out[i] end
      return named
    end
    return table.unpack(out, 1, #tensors)
  end
end

--- DistributedSampler(dataset, {num_replicas=, rank=, shuffle=, seed=, drop_last=}):
--- one rank's share of each epoch (lua/lt/data/distributed_sampler.lua).
data.DistributedSampler = DistributedSampler

--- default_collate(samples): a batch from a list of samples (lua/lt/data/collate.lua).
data.default_collate = require "lt.data.collate"

--- csv(path, opts): a CSV table's features and labels (lua/lt/data/csv.lua).
data.csv = require "lt.data.csv"

--- ImageFolder(root, opts): PNG and JPEG images, one sub-folder per class,
--- decoded on C threads ahead of use (lua/lt/data/image_folder.lua).
data.ImageFolder = require "lt.data.image_folder"

--- transforms: Resize, RandomCrop, RandomHorizontalFlip, Normalize, ToTensor,
--- ToFloat, Compose (lua/lt/data/transforms.lua).
data.transforms = require "lt.data.transforms"

-- _write_image(path, image, format="png", quality=95): a uint8 [H, W, C]
-- or [H, W] image as a PNG or JPEG file, for tests and benchmarks that need
-- image files.
data._write_image = core._image_write

--- prefetch(loader:iter(), device): the batches on device, the next one's
--- copy overlapping the current step on CUDA (lua/lt/data_prefetch.lua).
data.prefetch = require "lt.data_prefetch"

--- set_epoch(k) then iter(): `for x, y in loader:epoch(k) do`.
function DataLoader:epoch(k)
  self:set_epoch(k)
  return self:iter()
end

methods.guard(DataLoader, "DataLoader", "a DataLoader", "loader", function(v) return getmetatable(v) == DataLoader end)

return data
