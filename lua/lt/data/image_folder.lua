-- lt.data.ImageFolder: images in one sub-folder per class (torchvision's
-- ImageFolder), a dataset of the DataLoader protocol.
--
--   root/cat/1.png, root/cat/2.jpg, root/dog/a.jpeg, ...
--   classes = sorted sub-folder names, labels 1..C
--
-- Files are PNG or JPEG (.png, .jpg, .jpeg, any case), decoded by Debian's
-- libstb (engine/io/image.c) to uint8 [H, W, C] (C = channels: 3, RGB, by
-- default, as PIL's convert("RGB"); 1 for gray).
--
-- Background decoding: with DataLoader{num_workers = n > 0}, the loader
-- calls dataset:prefetch(indices) for the batches ahead, which queues those
-- files on a pool of n C threads (engine/io/image_pool.c). A thread reads the
-- file, decodes it and, when the transform starts with a Resize, resizes it:
-- all of that overlaps whatever the Lua thread is doing (the training step on
-- the current batch). dataset:get(i) then takes the finished image (waiting
-- only if its thread is not done; decoding it itself if no thread started
-- it), copies it into a tensor, and applies the rest of the transform on the
-- Lua thread. So the random transforms (RandomCrop, RandomHorizontalFlip)
-- draw from lt's generator in get order, whatever the threads' timing: the
-- same seed gives the same batches with any num_workers, 0 included.
local raise = require "lt.user_error"
local core = require "lt.core"
local transforms = require "lt.data.transforms"

local ImageFolder = {}
ImageFolder.__index = ImageFolder
ImageFolder.__name = "lt.data.ImageFolder"

local EXTENSIONS = { png = true, jpg = true, jpeg = true }
local MAX_DEPTH = 16

local function is_image(name)
  local ext = name:match("%.([%w]+)$")
  return ext ~= nil and EXTENSIONS[ext:lower()] == true
end

-- The image files under dir (recursively, sorted by path), appended to out.
local function walk(dir, out, depth)
  if depth > MAX_DEPTH then
    raise(string.format("ImageFolder: %s is nested more than %d folders deep (a symbolic link loop?)", dir, MAX_DEPTH))
  end
  local names, is_dir = core._list_dir(dir)
  for k, name in ipairs(names) do
    local path = dir .. "/" .. name
    if is_dir[k] then walk(path, out, depth + 1)
    elseif is_image(name) then out[#out + 1] = path end
  end
end

local OPTIONS = { transform = true, target_transform = true, channels = true }

local function callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

--- ImageFolder(root, {transform=, target_transform=, channels=3}): the
--- images under root/<class>/ (sub-folders too), classes in sorted order,
--- labels 1..C. dataset:get(i) returns {image, label}: image the decoded
--- uint8 [H, W, C] after transform, label the class number (after
--- target_transform). dataset.classes lists the class names,
--- dataset.class_to_idx maps a name to its label, dataset.samples holds
--- {path, label} pairs.
local function new(root, opts)
  if type(root) ~= "string" then raise("ImageFolder: expected the root folder's path, got " .. type(root)) end
  if root:find("\0", 1, true) then raise("ImageFolder: the path contains a NUL character") end
  if opts ~= nil and type(opts) ~= "table" then raise("ImageFolder: expected an options table, got " .. type(opts)) end
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTIONS[k] then
      raise(string.format("ImageFolder: unknown option '%s' (expected channels, target_transform, transform)", tostring(k)))
    end
  end
  for _, key in ipairs { "transform", "target_transform" } do
    if opts[key] ~= nil and not callable(opts[key]) then
      raise(string.format("ImageFolder: %s must be callable (a transform or a function), got %s", key, type(opts[key])))
    end
  end
  local channels = opts.channels or 3
  if channels ~= 1 and channels ~= 3 and channels ~= 4 then
    raise("ImageFolder: channels must be 1 (gray), 3 (RGB) or 4 (RGBA), got " .. tostring(channels))
  end
  root = root:gsub("(.)/+$", "%1")
  local names, is_dir = core._list_dir(root)
  local classes, class_to_idx, samples, targets, empty = {}, {}, {}, {}, {}
  for k, name in ipairs(names) do
    if is_dir[k] then
      classes[#classes + 1] = name
      class_to_idx[name] = #classes
    end
  end
  if #classes == 0 then raise(string.format("ImageFolder: %s has no sub-folders (one per class)", root)) end
  for label, name in ipairs(classes) do
    local files = {}
    walk(root .. "/" .. name, files, 1)
    if #files == 0 then empty[#empty + 1] = name end
    for _, path in ipairs(files) do
      samples[#samples + 1] = { path, label }
      targets[#targets + 1] = label
    end
  end
  if #empty > 0 then
    raise(string.format("ImageFolder: no PNG or JPEG file (.png, .jpg, .jpeg) in the class folder%s %s of %s",
      #empty > 1 and "s" or "", table.concat(empty, ", "), root))
  end
  local resize, rest = nil, opts.transform
  if rest ~= nil then resize, rest = transforms._split_resize(rest) end
  local h, w, short = 0, 0, 0
  if resize then h, w, short = resize:_spec() end
  return setmetatable({
    root = root,
    classes = classes,
    class_to_idx = class_to_idx,
    samples = samples,
    targets = targets,
    transform = opts.transform,
    target_transform = opts.target_transform,
    channels = channels,
    _spec = { channels, h, w, short }, -- what the decode does: channels, then a resize
    _rest = rest,                      -- the transform after it, on the Lua thread
    _pool = nil,
  }, ImageFolder)
end

function ImageFolder:__len() return #self.samples end

function ImageFolder:__tostring()
  return string.format("ImageFolder(%s: %d images, %d classes)", self.root, #self.samples, #self.classes)
end

local function check_index(self, i)
  if math.type(i) ~= "integer" or i < 1 or i > #self.samples then
    raise(string.format("ImageFolder: index %s is out of range (1 to %d)", tostring(i), #self.samples))
  end
end

--- dataset:get(i) -> {image, label}
function ImageFolder:get(i)
  check_index(self, i)
  local sample = self.samples[i]
  local spec = self._spec
  local img = self._pool and self._pool:take(i)
  if img == nil then img = core._image_decode(sample[1], spec[1], spec[2], spec[3], spec[4]) end
  if self._rest then img = self._rest(img) end
  local label = sample[2]
  if self.target_transform then label = self.target_transform(label) end
  return { img, label }
end

--- dataset:prefetch(indices, num_workers): queues the files at indices on a
--- pool of num_workers decode threads (made, or remade with a new size, on
--- demand); get(i) takes their results. DataLoader{num_workers = n} calls it.
function ImageFolder:prefetch(indices, num_workers)
  num_workers = num_workers or 2
  if math.type(num_workers) ~= "integer" or num_workers < 1 or num_workers > 64 then
    raise("ImageFolder: num_workers must be an integer from 1 to 64, got " .. tostring(num_workers))
  end
  local pool = self._pool
  if pool and pool:stats().threads ~= num_workers then
    pool:close() -- joins its threads; what they decoded and nobody took is dropped
    pool = nil
  end
  if not pool then
    pool = core._image_pool(num_workers)
    self._pool = pool
  end
  local spec = self._spec
  for _, i in ipairs(indices) do
    check_index(self, i)
    pool:submit(i, self.samples[i][1], spec[1], spec[2], spec[3], spec[4])
  end
end

--- dataset:stats(): the decode pool's counters: threads, submitted, decoded
--- (by the threads), ready (gets whose image was decoded before they asked),
--- waited (gets that waited for a thread), stolen (gets that decoded a
--- queued file themselves), missed (gets with nothing queued), refused,
--- dropped, pending. All 0 before the first prefetch.
function ImageFolder:stats()
  if self._pool then return self._pool:stats() end
  return { threads = 0, submitted = 0, refused = 0, dropped = 0, decoded = 0, ready = 0, waited = 0, stolen = 0,
    missed = 0, pending = 0 }
end

--- dataset:close(): stops and joins the decode threads now (the collector
--- does it otherwise); a later prefetch starts new ones.
function ImageFolder:close()
  if self._pool then self._pool:close() end
  self._pool = nil
end
ImageFolder.__close = ImageFolder.close

-- Blocks until the decode threads have nothing queued or running: lets a
-- test see what they did before the Lua thread asked, with no timing.
function ImageFolder:_wait_prefetched()
  if self._pool then self._pool:wait_idle() end
end

return new
