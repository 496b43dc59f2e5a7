-- The parts of DistributedDataParallel that run when it wraps a model
-- (lua/lt/nn/parallel.lua): the check that every rank has the same
-- parameter shapes, the broadcast of rank 0's tensors, and PyTorch's
-- assignment of the parameters to buckets with their flat buffers.
local core = require "lt.core"
local raise = require "lt.user_error"
local broadcast_coalesced = require "lt.broadcast_coalesced"
local shape_util = require "lt.shapes"
local same_shape, shape_text = shape_util.equal, shape_util.text

local setup = {}

local MiB = 1024 * 1024
local FIRST_BUCKET_BYTES = 1 * MiB -- PyTorch's dist._DEFAULT_FIRST_BUCKET_BYTES
setup.MiB = MiB

-- ---- wrap-time checks and broadcasts ----

-- The parameters' shapes as one int64 list: count, then ndim and sizes of each.
local function shape_code(params)
  local code = { #params }
  for _, p in ipairs(params) do
    code[#code + 1] = p:dim()
    for _, s in ipairs(p.shape) do code[#code + 1] = s end
  end
  return code
end

-- The k-th shape of a code (nil past the end).
local function decode(code)
  local shapes, i = {}, 2
  for k = 1, code[1] do
    local nd = code[i]
    local s = {}
    for d = 1, nd do s[d] = code[i + d] end
    shapes[k] = s
    i = i + nd + 1
  end
  return shapes
end

-- Every rank gets every rank's shape list (padded to the longest with -1,
-- the length agreed first by a max all-reduce), and all raise the same error
-- naming the first parameter that differs: no rank is left waiting.
function setup.verify_shapes(pg, named, rank, world)
  local params = {}
  for i, pair in ipairs(named) do params[i] = pair[2] end
  local code = shape_code(params)
  -- On the parameters' device: backend nccl moves CUDA tensors only.
  local on = { dtype = "int64", device = params[1] and params[1].device or "cpu" }
  local len = core.tensor({ #code }, on)
  pg.all_reduce(len, { op = "max" })
  local n = len:item()
  for i = #code + 1, n do code[i] = -1 end
  local mine = core.tensor(code, on)
  local all = {}
  for r = 1, world do all[r] = core.empty({ n }, on) end
  pg.all_gather(all, mine)
  local own = decode(code)
  for r = 1, world do
    local theirs = decode(all[r]:totable())
    if r - 1 ~= rank then
      for k = 1, math.max(#own, #theirs) do
        local a, b = own[k], theirs[k]
        if a == nil or b == nil then
          raise(("DistributedDataParallel: rank %d has %d parameters, rank %d has %d (the models differ)")
            :format(rank, #own, r - 1, #theirs))
        elseif not same_shape(a, b) then
          raise(("DistributedDataParallel: parameter %d ('%s') has shape %s on rank %d and %s on rank %d")
            :format(k, named[k][1], shape_text(a), rank, shape_text(b), r - 1))
        end
      end
    end
  end
end

-- Rank 0's values into tensors on every rank (coalesced by dtype).
function setup.broadcast_from_0(pg, tensors)
  broadcast_coalesced(pg, tensors, 0)
end

-- ---- buckets ----

-- PyTorch's _compute_bucket_assignment_by_size: parameters in reverse
-- order, one open bucket per dtype and device, closed once it reaches its
-- cap (first FIRST_BUCKET_BYTES, then cap_bytes).
function setup.assign_buckets(params, cap_bytes)
  local open, limit, buckets = {}, math.min(FIRST_BUCKET_BYTES, cap_bytes), {}
  local function close(key)
    local b = open[key]
    buckets[#buckets + 1] = b
    open[key] = nil
    limit = cap_bytes
  end
  for i = #params, 1, -1 do
    local p = params[i]
    local key = p.dtype .. "@" .. p.device
    local b = open[key]
    if b == nil then
      b = { params = {}, bytes = 0, dtype = p.dtype, device = p.device }
      open[key] = b
    end
    b.params[#b.params + 1] = p
    b.bytes = b.bytes + p:nbytes()
    if b.bytes >= limit then close(key) end
  end
  local keys = {}
  for key in pairs(open) do keys[#keys + 1] = key end
  table.sort(keys) -- the same order on every rank
  for _, key in ipairs(keys) do close(key) end
  return buckets
end

-- The flat buffer of a bucket and a view of it per parameter.
function setup.make_flat(b)
  local numel = 0
  for _, p in ipairs(b.params) do numel = numel + p:numel() end
  b.flat = core.memory.set_category(core.zeros({ numel }, { dtype = b.dtype, device = b.device }), "gradient")
  b.views, b.ready, b.used = {}, {}, {}
  local offset = 1
  for k, p in ipairs(b.params) do
    b.views[k] = b.flat:narrow(1, offset, p:numel()):view(p.shape)
    offset = offset + p:numel()
    b.ready[k] = false
  end
  b.pending = #b.params
end

return setup
