-- lt.optim.ZeroRedundancyOptimizer(params, optim.Adam, opts): ZeRO stage 1,
-- after torch.distributed.optim.ZeroRedundancyOptimizer. The parameters are
-- partitioned over the ranks (PyTorch's greedy rule: each group's
-- parameters largest first, each to the rank with the fewest elements so
-- far); each rank builds the inner optimizer over its own shard only, so it
-- holds that shard's state (1/N of Adam's, up to the rounding of the
-- partition). step() steps the shard and then broadcasts the parameters
-- from the rank that owns them (one flat buffer per owner), so all replicas
-- stay equal. The gradients must
-- already be the same on every rank (DistributedDataParallel does that).
--
-- state_dict() is collective (every rank calls it; each owner broadcasts its
-- shard's state) and returns the whole state in the plain optimizer's layout,
-- so a checkpoint written by rank 0 loads into ZeRO on any number of ranks,
-- or into the plain optimizer. load_state_dict(sd) keeps each rank's share.
local core = require "lt.core"
local broadcast_coalesced = require "lt.broadcast_coalesced"
local raise = require "lt.user_error"
local methods = require "lt.methods"

local Zero = {}
Zero.__index = Zero

local function fail(fmt, ...)
  raise("ZeroRedundancyOptimizer: " .. string.format(fmt, ...))
end

-- Parameter groups' options without their params.
local function options_of(group)
  local out = {}
  for key, value in pairs(group) do
    if key ~= "params" then out[key] = type(value) == "table" and table.move(value, 1, #value, 1, {}) or value end
  end
  return out
end

-- PyTorch's _partition_parameters: owner[p] = rank.
local function partition(groups, world)
  local sizes, owner = {}, {}
  for r = 1, world do sizes[r] = 0 end
  for _, group in ipairs(groups) do
    local sorted = {}
    for i, p in ipairs(group.params) do sorted[i] = { p, i } end
    table.sort(sorted, function(a, b) -- largest first; stable, as Python's sorted
      local na, nb = a[1]:numel(), b[1]:numel()
      if na ~= nb then return na > nb end
      return a[2] < b[2]
    end)
    for _, entry in ipairs(sorted) do
      local rank = 1
      for r = 2, world do
        if sizes[r] < sizes[rank] then rank = r end
      end
      owner[entry[1]] = rank - 1
      sizes[rank] = sizes[rank] + entry[1]:numel()
    end
  end
  return owner
end

local function new(params, optimizer_class, opts)
  if type(optimizer_class) ~= "table" or type(optimizer_class.defaults) ~= "table"
      or type(optimizer_class.state_tensors) ~= "table" then
    fail("expected an optimizer class (such as lt.optim.Adam) as argument 2, got %s", type(optimizer_class))
  end
  if opts ~= nil and type(opts) ~= "table" then fail("expected an options table, got %s", type(opts)) end
  local inner_opts = {}
  for key, value in pairs(opts or {}) do
    if key ~= "process_group" then inner_opts[key] = value end
  end
  local pg = (opts and opts.process_group) or require "lt.distributed"
  if not pg.is_initialized() then
    fail("no process group: call lt.distributed.init_process_group() first")
  end
  -- The plain optimizer over every parameter checks the options and fills in
  -- the defaults; its state is lazy, so it allocates nothing.
  local full = optimizer_class(params, inner_opts)
  local rank, world = pg.get_rank(), pg.get_world_size()
  local self = setmetatable({
    param_groups = full.param_groups,
    defaults = optimizer_class.defaults,
    optimizer_class = optimizer_class,
    rank = rank,
    world_size = world,
    _pg = pg,
  }, Zero)
  self.owner = partition(self.param_groups, world)
  self._by_owner = {} -- [rank + 1] = its parameters, in param_groups' order
  for r = 1, world do self._by_owner[r] = {} end
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local list = self._by_owner[self.owner[p] + 1]
      list[#list + 1] = p
    end
  end
  -- This rank's groups (a group with no parameter here is left out: the
  -- inner optimizer refuses empty groups) and where each came from.
  local inner_groups, from = {}, {}
  for gi, group in ipairs(self.param_groups) do
    local mine = {}
    for _, p in ipairs(group.params) do
      if self.owner[p] == rank then mine[#mine + 1] = p end
    end
    if #mine > 0 then
      local g = options_of(group)
      g.params = mine
      inner_groups[#inner_groups + 1] = g
      from[#inner_groups] = gi
    end
  end
  self._from = from
  if #inner_groups > 0 then self.optim = optimizer_class(inner_groups, inner_opts) end
  return self
end

-- Options changed on param_groups (a learning-rate schedule) reach the shard.
function Zero:_sync_options()
  if not self.optim then return end
  for i, g in ipairs(self.optim.param_groups) do
    for key, value in pairs(options_of(self.param_groups[self._from[i]])) do g[key] = value end
  end
end

--- step(closure): closure() first when given (its result is returned), then
--- the shard's step and the broadcast of every parameter from its owner.
function Zero:step(closure)
  local loss
  if closure then loss = closure() end
  self:_sync_options()
  if self.optim then self.optim:step() end
  -- One broadcast per owner (and dtype), as PyTorch's per-rank buckets.
  for src, params in ipairs(self._by_owner) do
    if #params > 0 then broadcast_coalesced(self._pg, params, src - 1) end
  end
  return loss
end

--- zero_grad({set_to_none = true}): every parameter's gradient, not only the shard's.
function Zero:zero_grad(options)
  local set_to_none = not (type(options) == "table" and options.set_to_none == false)
  local all = {}
  for _, group in ipairs(self.param_groups) do table.move(group.params, 1, #group.params, #all + 1, all) end
  core._zero_grads(all, set_to_none)
end

--- The bytes of this rank's optimizer state (its shard's only).
function Zero:state_bytes()
  return self.optim and self.optim:state_bytes() or 0
end

--- The parameters this rank steps, in the order of param_groups.
function Zero:shard()
  local out = {}
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      if self.owner[p] == self.rank then out[#out + 1] = p end
    end
  end
  return out
end

-- ---- checkpoints ----

--- Collective: the whole state, every rank's shard gathered, in the plain
--- optimizer's layout (state[i] by position over all groups, param_groups
--- with options and positions). Every rank must call it.
function Zero:state_dict()
  local keys = self.optimizer_class.state_tensors
  local state, groups, index = {}, {}, 0
  local guard <close> = core.no_grad()
  for gi, group in ipairs(self.param_groups) do
    local g = options_of(group)
    g.params = {}
    for _, p in ipairs(group.params) do
      index = index + 1
      g.params[#g.params + 1] = index
      local src = self.owner[p]
      local s = src == self.rank and self.optim.state[p] or nil
      -- header: has state, step, then which buffers it has
      local header = { s and 1 or 0, s and s.step or 0 }
      for k, key in ipairs(keys) do header[2 + k] = (s and s[key] ~= nil) and 1 or 0 end
      local h = core.tensor(header, { dtype = "int64", device = p.device })
      self._pg.broadcast(h, { src = src })
      header = h:totable()
      h:free()
      if header[1] == 1 then
        local copy = { step = header[2] }
        for k, key in ipairs(keys) do
          if header[2 + k] == 1 then
            local buf = s and s[key]:detach():clone() or core.empty(p.shape, { dtype = p.dtype, device = p.device })
            self._pg.broadcast(buf, { src = src })
            copy[key] = buf
          end
        end
        state[index] = copy
      end
    end
    groups[gi] = g
  end
  return { state = state, param_groups = groups }
end

--- Loads a state_dict() (this rank keeps its shard's state; the options of
--- every group are taken). Not collective.
function Zero:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd.state) ~= "table" or type(sd.param_groups) ~= "table" then
    fail("load_state_dict: expected a table with 'state' and 'param_groups' (from state_dict())")
  end
  if #sd.param_groups ~= #self.param_groups then
    fail("load_state_dict: the state dict has %d parameter groups, the optimizer has %d", #sd.param_groups,
      #self.param_groups)
  end
  local inner_state, inner_index, index = {}, 0, 0
  local position = {} -- global position of each parameter
  for gi, group in ipairs(self.param_groups) do
    local n = type(sd.param_groups[gi].params) == "table" and #sd.param_groups[gi].params or 0
    if n ~= #group.params then
      fail("load_state_dict: parameter group %d has %d parameters in the state dict, %d in the optimizer",
        gi, n, #group.params)
    end
    for _, p in ipairs(group.params) do
      index = index + 1
      position[p] = index
    end
  end
  local inner_groups = {}
  if self.optim then
    for i, g in ipairs(self.optim.param_groups) do
      local loaded = options_of(sd.param_groups[self._from[i]])
      loaded.params = {}
      for _, p in ipairs(g.params) do
        inner_index = inner_index + 1
        loaded.params[#loaded.params + 1] = inner_index
        inner_state[inner_index] = sd.state[position[p]]
      end
      inner_groups[i] = loaded
    end
    self.optim:load_state_dict({ state = inner_state, param_groups = inner_groups })
  end
  for gi, group in ipairs(self.param_groups) do
    for key, value in pairs(options_of(sd.param_groups[gi])) do group[key] = value end
  end
end

function Zero:__tostring()
  local total = 0
  for _, g in ipairs(self.param_groups) do total = total + #g.params end
  return ("ZeroRedundancyOptimizer(%s, rank %d of %d, %d of %d parameters here)"):format(
    self.optimizer_class.name, self.rank, self.world_size, #self:shard(), total)
end

methods.guard(Zero, "ZeroRedundancyOptimizer", "a ZeroRedundancyOptimizer", "zero",
  function(v) return getmetatable(v) == Zero end)

-- The constructor is the public name; the class stays here (as DataLoader's).
return new
