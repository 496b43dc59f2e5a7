-- lt.data.DistributedSampler: each rank's share of every epoch, by PyTorch's
-- rule (torch.utils.data.DistributedSampler): the epoch's order (the one
-- DataLoader{shuffle = true, seed = seed} gives in that epoch, or 1..n) is
-- padded by repeating its start up to a multiple of the number of replicas
-- (or cut down to one with drop_last), and rank r takes positions r+1,
-- r+1+W, r+1+2W, ... of it (ranks 0-based, indices 1-based). Every rank must
-- use the same seed: the default is 0, as PyTorch's.
local raise = require "lt.user_error"
local core = require "lt.core"
local options_reader = require "lt.nn.options"
local methods = require "lt.methods"
local epoch_order = require("lt.data.order").epoch_order

local DistributedSampler = {}
DistributedSampler.__index = DistributedSampler
DistributedSampler.__name = "lt.data.DistributedSampler"

local OPTIONS = { num_replicas = true, rank = true, shuffle = true, seed = true, drop_last = true }

-- The number of samples of a dataset: an integer, a tensor (its first size),
-- a list or named table of tensors, or anything with a length (#dataset).
local function dataset_size(dataset)
  if math.type(dataset) == "integer" then return dataset end
  if core.is_tensor(dataset) then return dataset.shape[1] end
  if type(dataset) == "table" and getmetatable(dataset) == nil then
    local _, t = next(dataset)
    if core.is_tensor(t) then return t.shape[1] end
  end
  local mt = getmetatable(dataset)
  if type(mt) == "table" and rawget(mt, "__len") ~= nil then return #dataset end
  raise("DistributedSampler: expected a dataset (a size, a tensor, a table of tensors or a value with "
    .. "#dataset), got " .. type(dataset))
end

-- The process group's figure when the option leaves it out.
local function from_group(what)
  local ok, dist = pcall(require, "lt.distributed")
  if not ok or not dist.is_initialized() then
    raise("DistributedSampler: " .. what .. " is needed when no process group is initialized "
      .. "(lt.distributed.init_process_group)")
  end
  return what == "rank" and dist.get_rank() or dist.get_world_size()
end

--- DistributedSampler(dataset, {num_replicas=, rank=, shuffle=true, seed=0,
--- drop_last=false}); num_replicas and rank default to the process group's.
local function new(dataset, opts)
  if opts ~= nil and type(opts) ~= "table" then
    raise("DistributedSampler: expected an options table, got " .. type(opts))
  end
  opts = opts or {}
  for key in pairs(opts) do
    if not OPTIONS[key] then options_reader.unknown("DistributedSampler", key, OPTIONS) end
  end
  local n = dataset_size(dataset)
  local replicas = opts.num_replicas or from_group("num_replicas")
  local rank = opts.rank or from_group("rank")
  if math.type(replicas) ~= "integer" or replicas < 1 then
    raise("DistributedSampler: num_replicas must be a positive integer, got " .. tostring(replicas))
  end
  if math.type(rank) ~= "integer" or rank < 0 or rank >= replicas then
    raise(("DistributedSampler: invalid rank %s, rank should be in the interval [0, %d]")
      :format(tostring(rank), replicas - 1))
  end
  for _, flag in ipairs { "shuffle", "drop_last" } do
    if opts[flag] ~= nil and type(opts[flag]) ~= "boolean" then
      raise(("DistributedSampler: %s must be a boolean, got %s"):format(flag, type(opts[flag])))
    end
  end
  local seed = opts.seed or 0
  if math.type(seed) ~= "integer" then raise("DistributedSampler: seed must be an integer, got " .. tostring(seed)) end
  local drop_last = opts.drop_last or false
  -- PyTorch: with drop_last, ceil((n - W) / W), which is floor(n / W).
  local num_samples = drop_last and n // replicas or (n + replicas - 1) // replicas
  return setmetatable({
    size = n,
    num_replicas = replicas,
    rank = rank,
    shuffle = opts.shuffle ~= false,
    seed = seed,
    drop_last = drop_last,
    num_samples = num_samples,
    total_size = num_samples * replicas,
    epoch = 1,
  }, DistributedSampler)
end

--- The number of indices each rank gets per epoch.
function DistributedSampler:__len() return self.num_samples end

--- The epoch that indices() uses without an argument (1 at first, as the
--- loader's epochs; PyTorch's set_epoch, called at each epoch's start).
function DistributedSampler:set_epoch(epoch)
  if math.type(epoch) ~= "integer" or epoch < 0 then
    raise("DistributedSampler: set_epoch expects a non-negative integer, got " .. tostring(epoch))
  end
  self.epoch = epoch
end

--- This rank's indices (1-based, a Lua list) for epoch (default: set_epoch's).
function DistributedSampler:indices(epoch)
  epoch = epoch or self.epoch
  local order = epoch_order(self.size, self.shuffle, self.seed, epoch)
  local all = order:totable()
  order:free()
  local n, total, out = self.size, self.total_size, {}
  if n == 0 then return out end
  for k = 1, self.num_samples do
    local position = self.rank + 1 + (k - 1) * self.num_replicas -- in the padded order
    if position > total then break end
    out[k] = all[(position - 1) % n + 1] -- padding repeats the start, as often as needed
  end
  return out
end

--- `for i in sampler:iter() do`: the indices of the current epoch.
function DistributedSampler:iter()
  local list, k = self:indices(), 0
  return function()
    k = k + 1
    return list[k]
  end
end

methods.guard(DistributedSampler, "DistributedSampler", "a DistributedSampler", "sampler",
  function(v) return getmetatable(v) == DistributedSampler end)

-- The constructor is the public name; the class (the samplers' metatable)
-- stays here, as DataLoader's does.
return new
