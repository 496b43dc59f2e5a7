-- lt.data.transforms: torchvision's common image transforms, as callable
-- objects: `local t = T.Compose{T.Resize(36), T.RandomCrop(32), T.ToTensor()}`,
-- then `t(image)`.
--
-- Layouts follow torchvision's two kinds of image: a uint8 tensor is an image
-- as decoded, [H, W, C] (what lt.data.ImageFolder gives, as PIL gives it),
-- and a floating tensor is [C, H, W] (what ToTensor makes); a 2-D tensor is
-- [H, W] either way. Resize, RandomCrop and RandomHorizontalFlip take both;
-- ToTensor turns the first into the second (/ 255); Normalize takes the
-- second. A uint8 tensor in [C, H, W] order (CIFAR-10's) is refused rather
-- than misread: ToFloat makes it a float [C, H, W] image first.
--
-- The random transforms draw from lt's generator (lt.manual_seed reproduces
-- them) when they are called, on the Lua thread, in call order.
local raise = require "lt.user_error"
local core = require "lt.core"

local T = {}

local function shape_text(t) return "[" .. table.concat(t.shape, ", ") .. "]" end

local FLOATING = { float32 = true, float64 = true, float16 = true, bfloat16 = true }

-- Where an image's height and width are: the dims (1-based) and sizes, and
-- its layout "hwc", "chw" or "hw".
local function geometry(op, img)
  if not core.is_tensor(img) then raise(string.format("%s: expected an image tensor, got %s", op, type(img))) end
  local s, d = img.shape, img:dim()
  if d == 2 then return "hw", 1, 2, s[1], s[2] end
  if d == 3 then
    if img.dtype == "uint8" then
      if s[3] ~= 1 and s[3] ~= 3 and s[3] ~= 4 then
        raise(string.format("%s: a uint8 image is [H, W, C] with 1, 3 or 4 channels (as ImageFolder decodes it), " ..
          "got %s; for a [C, H, W] uint8 image (CIFAR-10's) apply ToFloat() first", op, shape_text(img)))
      end
      return "hwc", 1, 2, s[1], s[2]
    elseif FLOATING[img.dtype] then
      return "chw", 2, 3, s[2], s[3]
    end
  end
  raise(string.format("%s: expected a uint8 [H, W, C] or floating [C, H, W] image (or [H, W]), got a %s %s tensor",
    op, img.dtype, shape_text(img)))
end

-- A size option: an integer n (Resize: the shorter side; RandomCrop: n x n)
-- or {h, w}.
local function check_size(op, size)
  if math.type(size) == "integer" and size > 0 then return size end
  if type(size) == "table" and #size == 2 and math.type(size[1]) == "integer" and math.type(size[2]) == "integer"
      and size[1] > 0 and size[2] > 0 then
    return { size[1], size[2] }
  end
  raise(string.format("%s: size must be a positive integer or {height, width}, got %s", op, tostring(size)))
end

local function check_options(op, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" then raise(string.format("%s: expected an options table, got %s", op, type(opts))) end
  for k in pairs(opts) do
    if not allowed[k] then
      local names = {}
      for name in pairs(allowed) do names[#names + 1] = name end
      table.sort(names)
      raise(string.format("%s: unknown option '%s' (expected %s)", op, tostring(k),
        #names > 0 and table.concat(names, ", ") or "none"))
    end
  end
  return opts
end

-- A transform class: instances are called as functions.
local function class(name)
  local cls = { kind = name }
  cls.__index = cls
  cls.__name = "lt.data.transforms." .. name
  cls.__call = function(self, img) return self:apply(img) end
  return cls
end

local function randint(low, high) -- inclusive, from lt's generator
  local t = core.randint(low, high, { 1 })
  local v = t:item()
  t:free()
  return v
end

-- ---- Resize ----

local Resize = class("Resize")
Resize.__tostring = function(self)
  return type(self.size) == "table" and string.format("Resize({%d, %d})", self.size[1], self.size[2])
    or string.format("Resize(%d)", self.size)
end

--- Resize(size): bilinear resampling to size {h, w}, or, for an integer,
--- so that the shorter side is size and the aspect ratio is kept (the longer
--- side rounded down), as torchvision's Resize. Without antialiasing
--- (PyTorch's antialias=False, F.interpolate's bilinear with
--- align_corners=False); uint8 results are rounded to nearest.
function T.Resize(size, opts)
  check_options("Resize", opts, {})
  return setmetatable({ size = check_size("Resize", size) }, Resize)
end

-- The output size for an input of h x w (engine/io/image.c's rule).
function Resize:output_size(h, w)
  local size = self.size
  if type(size) == "table" then return size[1], size[2] end
  if h <= w then return size, math.max(1, size * w // h) end
  return math.max(1, size * h // w), size
end

-- The arguments the decode pool's resize takes: height, width, shorter side.
function Resize:_spec()
  if type(self.size) == "table" then return self.size[1], self.size[2], 0 end
  return 0, 0, self.size
end

function Resize:apply(img)
  local layout, _, _, h, w = geometry("Resize", img)
  local oh, ow = self:output_size(h, w)
  if layout == "hwc" then
    return core._image_resize(img:contiguous(), oh, ow)
  end
  local x = img
  if layout == "hw" then x = x:unsqueeze(img.dtype == "uint8" and 3 or 1) end
  local dtype = x.dtype
  if dtype ~= "uint8" and dtype ~= "float32" then x = x:to("float32") end
  local out = core._image_resize(x:contiguous(), oh, ow)
  if dtype ~= out.dtype then out = out:to(dtype) end
  if layout == "hw" then out = out:view(oh, ow) end
  return out
end

-- ---- RandomCrop ----

local RandomCrop = class("RandomCrop")
RandomCrop.__tostring = function(self) return string.format("RandomCrop({%d, %d})", self.size[1], self.size[2]) end

-- padding: n (all sides), {left/right, top/bottom} or {left, top, right, bottom}.
local function check_padding(p)
  if p == nil then return { 0, 0, 0, 0 } end
  local function ok(v) return math.type(v) == "integer" and v >= 0 end
  if ok(p) then return { p, p, p, p } end
  if type(p) == "table" then
    if #p == 2 and ok(p[1]) and ok(p[2]) then return { p[1], p[2], p[1], p[2] } end
    if #p == 4 and ok(p[1]) and ok(p[2]) and ok(p[3]) and ok(p[4]) then return { p[1], p[2], p[3], p[4] } end
  end
  raise("RandomCrop: padding must be a non-negative integer, {left/right, top/bottom} or " ..
    "{left, top, right, bottom}, got " .. tostring(p))
end

--- RandomCrop(size, {padding=0, fill=0, pad_if_needed=false}): a size (n x n
--- or {h, w}) window at a random position, after padding the image with fill
--- (padding n, {left/right, top/bottom} or {left, top, right, bottom}), as
--- torchvision's RandomCrop. The offsets are drawn top then left.
function T.RandomCrop(size, opts)
  opts = check_options("RandomCrop", opts, { padding = true, fill = true, pad_if_needed = true })
  size = check_size("RandomCrop", size)
  if type(size) ~= "table" then size = { size, size } end
  if opts.fill ~= nil and type(opts.fill) ~= "number" then
    raise("RandomCrop: fill must be a number, got " .. type(opts.fill))
  end
  if opts.pad_if_needed ~= nil and type(opts.pad_if_needed) ~= "boolean" then
    raise("RandomCrop: pad_if_needed must be a boolean, got " .. type(opts.pad_if_needed))
  end
  return setmetatable({ size = size, padding = check_padding(opts.padding), fill = opts.fill or 0,
    pad_if_needed = opts.pad_if_needed or false }, RandomCrop)
end

-- img padded by left, top, right, bottom (F.pad's list runs from the last dim).
local function pad_image(img, layout, l, t, r, b, fill)
  if l == 0 and t == 0 and r == 0 and b == 0 then return img end
  local list = layout == "hwc" and { 0, 0, l, r, t, b } or { l, r, t, b }
  return core._pad(img, list, { mode = "constant", value = fill })
end

function RandomCrop:apply(img)
  local layout, hd, wd, h, w = geometry("RandomCrop", img)
  local p = self.padding
  local x = pad_image(img, layout, p[1], p[2], p[3], p[4], self.fill)
  h, w = h + p[2] + p[4], w + p[1] + p[3]
  local th, tw = self.size[1], self.size[2]
  if self.pad_if_needed and (h < th or w < tw) then
    -- torchvision pads the missing amount on both sides
    local dh, dw = math.max(0, th - h), math.max(0, tw - w)
    x = pad_image(x, layout, dw, dh, dw, dh, self.fill)
    h, w = h + 2 * dh, w + 2 * dw
  end
  if h < th or w < tw then
    raise(string.format("RandomCrop: the crop size (%d, %d) is larger than the %simage size (%d, %d)", th, tw,
      (p[1] + p[2] + p[3] + p[4] > 0) and "padded " or "", h, w))
  end
  local i = randint(0, h - th)
  local j = randint(0, w - tw)
  if th == h and tw == w then return x end
  return x:narrow(hd, i + 1, th):narrow(wd, j + 1, tw):contiguous()
end

-- ---- RandomHorizontalFlip ----

local RandomHorizontalFlip = class("RandomHorizontalFlip")
RandomHorizontalFlip.__tostring = function(self) return string.format("RandomHorizontalFlip(%g)", self.p) end

--- RandomHorizontalFlip(p=0.5): the image mirrored left to right with
--- probability p (one uniform draw per call, flipped when below p).
function T.RandomHorizontalFlip(p)
  p = p == nil and 0.5 or p
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise("RandomHorizontalFlip: p must be a probability in [0, 1], got " .. tostring(p))
  end
  return setmetatable({ p = p }, RandomHorizontalFlip)
end

-- The image mirrored along its width.
function T._hflip(img)
  local _, _, wd, _, w = geometry("RandomHorizontalFlip", img)
  local index = core.arange(w, 0, -1)
  local out = img:index_select(wd, index)
  index:free()
  return out
end

function RandomHorizontalFlip:apply(img)
  geometry("RandomHorizontalFlip", img)
  local u = core.rand(1)
  local flip = u:item() < self.p
  u:free()
  if flip then return T._hflip(img) end
  return img
end

-- ---- Normalize ----

local Normalize = class("Normalize")
Normalize.__tostring = function(self)
  return string.format("Normalize({%s}, {%s})", table.concat(self.mean, ", "), table.concat(self.std, ", "))
end

local function number_list(op, name, v)
  if type(v) == "number" then return { v } end
  if type(v) == "table" and #v > 0 then
    local out = {}
    for i, x in ipairs(v) do
      if type(x) ~= "number" then raise(string.format("%s: %s[%d] is a %s, not a number", op, name, i, type(x))) end
      out[i] = x
    end
    return out
  end
  raise(string.format("%s: %s must be a number or a list of numbers (one per channel), got %s", op, name, type(v)))
end

--- Normalize(mean, std): (image - mean[c]) / std[c] for each channel c of a
--- floating [C, H, W] image (or a batch [..., C, H, W]); one number serves
--- every channel. As torchvision's Normalize.
function T.Normalize(mean, std, opts)
  check_options("Normalize", opts, {})
  mean, std = number_list("Normalize", "mean", mean), number_list("Normalize", "std", std)
  if #mean ~= #std and #mean ~= 1 and #std ~= 1 then
    raise(string.format("Normalize: mean has %d values and std %d", #mean, #std))
  end
  for i, s in ipairs(std) do
    if s == 0 then raise(string.format("Normalize: std[%d] is 0, which would divide by zero", i)) end
  end
  return setmetatable({ mean = mean, std = std, _cache = {} }, Normalize)
end

function Normalize:apply(img)
  if not core.is_tensor(img) or not FLOATING[img.dtype] or img:dim() < 3 then
    raise("Normalize: expected a floating [C, H, W] image (apply ToTensor() or ToFloat() first), got " ..
      (core.is_tensor(img) and (img.dtype .. " " .. shape_text(img)) or type(img)))
  end
  local c = img.shape[img:dim() - 2]
  local n = math.max(#self.mean, #self.std)
  if n ~= 1 and n ~= c then
    raise(string.format("Normalize: %d means and stds for an image of %d channels (%s)", n, c, shape_text(img)))
  end
  -- The [C, 1, 1] mean and std tensors, made once per dtype and device.
  local key = img.dtype .. "@" .. img.device .. "#" .. c
  local cached = self._cache[key]
  if not cached then
    local m, s = {}, {}
    for i = 1, c do
      m[i] = { { self.mean[#self.mean == 1 and 1 or i] } }
      s[i] = { { self.std[#self.std == 1 and 1 or i] } }
    end
    local opts = { dtype = img.dtype, device = img.device }
    cached = { core.tensor(m, opts), core.tensor(s, opts) }
    self._cache[key] = cached
  end
  return (img - cached[1]) / cached[2]
end

-- ---- ToTensor, ToFloat ----

local ToTensor = class("ToTensor")
ToTensor.__tostring = function() return "ToTensor()" end

--- ToTensor(): a uint8 [H, W, C] image (or [H, W]) as float32 [C, H, W] in
--- [0, 1] (divided by 255), as torchvision's ToTensor.
function T.ToTensor() return setmetatable({}, ToTensor) end

function ToTensor:apply(img)
  if not core.is_tensor(img) or img.dtype ~= "uint8" or (img:dim() ~= 2 and img:dim() ~= 3) then
    raise("ToTensor: expected a uint8 [H, W, C] or [H, W] image, got " ..
      (core.is_tensor(img) and (img.dtype .. " " .. shape_text(img)) or type(img)))
  end
  local chw = img:dim() == 2 and img:unsqueeze(1) or img:permute(3, 1, 2)
  local out = chw:contiguous():to("float32")
  return out:div_(255)
end

local ToFloat = class("ToFloat")
ToFloat.__tostring = function() return "ToFloat()" end

--- ToFloat(): a uint8 tensor of any layout as float32 divided by 255 (a
--- floating one unchanged), as torchvision's ToDtype(float32, scale=True).
function T.ToFloat() return setmetatable({}, ToFloat) end

function ToFloat:apply(img)
  if not core.is_tensor(img) then raise("ToFloat: expected a tensor, got " .. type(img)) end
  if FLOATING[img.dtype] then return img end
  if img.dtype ~= "uint8" then raise("ToFloat: expected a uint8 or floating tensor, got " .. img.dtype) end
  return img:to("float32"):div_(255)
end

-- ---- Compose ----

local Compose = class("Compose")
Compose.__tostring = function(self)
  local parts = {}
  for i, t in ipairs(self.transforms) do parts[i] = tostring(t) end
  return "Compose{" .. table.concat(parts, ", ") .. "}"
end

local function callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

--- Compose{t1, t2, ...}: applies the transforms in order (each a transform
--- or any function of one image).
function T.Compose(list)
  if type(list) ~= "table" or getmetatable(list) ~= nil then
    raise("Compose: expected a list of transforms {t1, t2, ...}, got " .. type(list))
  end
  local copy = {}
  for i, t in ipairs(list) do
    if not callable(t) then raise(string.format("Compose: transform %d is a %s, not callable", i, type(t))) end
    copy[i] = t
  end
  return setmetatable({ transforms = copy }, Compose)
end

function Compose:apply(img)
  for _, t in ipairs(self.transforms) do img = t(img) end
  return img
end

-- For ImageFolder: a leading Resize (on its own or first in a Compose) and
-- the transform that remains after it (nil: none), so that the resize can
-- run on the decode threads with the decode.
function T._split_resize(transform)
  local mt = getmetatable(transform)
  if mt == Resize then return transform, nil end
  if mt == Compose and getmetatable(transform.transforms[1]) == Resize then
    local rest = {}
    for i = 2, #transform.transforms do rest[#rest + 1] = transform.transforms[i] end
    return transform.transforms[1], #rest > 0 and T.Compose(rest) or nil
  end
  return nil, transform
end

return T
