-- lt.nn.parallel.DistributedDataParallel, after torch.nn.parallel's: one
-- replica of the model per rank; each backward averages the gradients over
-- the ranks, overlapping the communication with the rest of the backward.
--
-- How (PyTorch's Reducer, in Lua): the parameters that require grad are cut
-- into buckets in reverse order (the order backward produces their
-- gradients), the first bucket capped at 1 MiB so that communication starts
-- early, the others at bucket_cap_mb. Each parameter gets a
-- post-accumulate-grad hook (t:register_post_accumulate_grad_hook); when the
-- last gradient of a bucket is in, an asynchronous all-reduce (avg) of the
-- bucket's flat buffer starts, buckets in their fixed order on every rank
-- (MPI needs the same collective order everywhere). Each .grad is a view of
-- its bucket's buffer (PyTorch's gradient_as_bucket_view): a gradient the
-- engine made anew (after zero_grad set it to nil) is copied in once and
-- replaced by the view; one that is the view already was accumulated there
-- in place. The hook that launches the last bucket waits for all of them:
-- when loss:backward() returns, the gradients are the averages, the same on
-- every rank, so any optimizer steps them as usual. Nothing has to be called
-- before the step, and the order of the hooks (not a queue drained later)
-- keeps this robust: the wait happens inside the backward that started it.
--
-- A parameter that requires grad but gets no gradient in a backward keeps
-- its bucket from launching (PyTorch's find_unused_parameters case): the
-- next forward raises an error naming the parameters, rather than a rank
-- waiting forever. With find_unused_parameters = true, each forward walks the
-- autograd graph from its outputs and marks the parameters it does not reach
-- ready at once, so their bucket still goes (with zeros for them, as
-- PyTorch).
local core = require "lt.core"
local raise = require "lt.user_error"
local options = require "lt.nn.options"
local Module = require "lt.nn.module"

local setup = require "lt.nn.parallel_setup"

local grad_of, set_grad, grad_is = core._grad, core._set_grad, core._grad_is
local MiB = setup.MiB

local DEFAULTS = { bucket_cap_mb = 25, broadcast_buffers = true, find_unused_parameters = false }
local ALLOWED = { process_group = true }

local DDP = Module:extend("DistributedDataParallel")

-- ---- construction ----

function DDP:init(model, opts)
  if not Module.is_module(model) then
    raise("DistributedDataParallel: expected a module to wrap, got " .. type(model))
  end
  opts = options.read("DistributedDataParallel", opts, DEFAULTS, ALLOWED)
  local cap = opts.bucket_cap_mb
  if type(cap) ~= "number" or cap <= 0 then
    raise("DistributedDataParallel: bucket_cap_mb must be a positive number, got " .. tostring(cap))
  end
  local pg = opts.process_group or require "lt.distributed"
  if not pg.is_initialized() then
    raise("DistributedDataParallel: no process group: call lt.distributed.init_process_group() first")
  end
  self.module = model
  local rank, world = pg.get_rank(), pg.get_world_size()
  rawset(self, "_pg", pg)
  rawset(self, "rank", rank)
  rawset(self, "world_size", world)
  rawset(self, "broadcast_buffers", opts.broadcast_buffers)
  rawset(self, "find_unused_parameters", opts.find_unused_parameters)

  local named = {}
  for name, p in model:named_parameters() do named[#named + 1] = { name, p } end
  setup.verify_shapes(pg, named, rank, world)
  local params, buffers = {}, model:buffers()
  for _, pair in ipairs(named) do params[#params + 1] = pair[2] end
  setup.broadcast_from_0(pg, params)
  setup.broadcast_from_0(pg, buffers)

  local trained, name_of = {}, {}
  for i, pair in ipairs(named) do
    if pair[2].requires_grad then
      trained[#trained + 1] = pair[2]
      name_of[pair[2]] = { i, pair[1] }
    end
  end
  local buckets = setup.assign_buckets(trained, math.floor(cap * MiB))
  for _, b in ipairs(buckets) do setup.make_flat(b) end
  rawset(self, "_buckets", buckets)
  rawset(self, "_name_of", name_of)
  rawset(self, "_require_sync", true) -- no_sync clears it
  -- What the last forward decided for its backward (no_sync is PyTorch's: read
  -- at forward time); nil when the model ran without this wrapper's forward
  -- (nn.checkpoint_sequential(ddp, ...) calls the children), and then the
  -- no_sync state at backward time decides.
  rawset(self, "_sync_step", nil)
  rawset(self, "_next_launch", 1)
  rawset(self, "_started", false)
  local hooks, slots, bucketed = {}, {}, {}
  for _, b in ipairs(buckets) do
    for k, p in ipairs(b.params) do
      hooks[#hooks + 1] = p:register_post_accumulate_grad_hook(function() self:_mark_ready(b, k) end)
      slots[#slots + 1], bucketed[#bucketed + 1] = { b, k }, p
    end
  end
  rawset(self, "_hooks", hooks)
  rawset(self, "_slots", slots)   -- {bucket, position} of each of _params
  rawset(self, "_params", bucketed)
end

-- ---- the reducer ----

function DDP:_mark_ready(b, k)
  local sync = self._sync_step
  if sync == nil then sync = self._require_sync end
  if not sync or b.ready[k] then return end
  b.ready[k] = true
  b.pending = b.pending - 1
  rawset(self, "_started", true)
  if b.pending == 0 then
    self:_launch_ready()
  else
    self:_progress()
  end
end

-- MPI moves a non-blocking collective's data only inside MPI calls (Open
-- MPI has no progress thread): testing the buckets in flight at each hook
-- lets their transfers advance while backward computes, instead of all at
-- the final wait.
function DDP:_progress()
  local buckets = self._buckets
  for i = 1, self._next_launch - 1 do
    local work = buckets[i].work
    if work and work.is_completed then work:is_completed() end
  end
end

-- Launches the buckets that are complete, in order, and finishes the
-- reduction after the last.
function DDP:_launch_ready()
  local buckets = self._buckets
  local i = self._next_launch
  while buckets[i] and buckets[i].pending == 0 do
    local b = buckets[i]
    for k, p in ipairs(b.params) do
      local view = b.views[k]
      if grad_is(p, view) then -- accumulated in place into the bucket: nothing to copy
        b.used[k] = true
      else
        local g = grad_of(p)
        b.used[k] = g ~= nil
        if g ~= nil then
          -- From now on .grad is the bucket's view (PyTorch's
          -- gradient_as_bucket_view): the average lands there, nothing is
          -- copied back, and the copy the engine made goes.
          view:copy_(g)
          g:free()
          set_grad(p, view)
        else -- unused (find_unused_parameters): contributes zeros
          view:zero_()
        end
      end
    end
    if i < #buckets then
      b.work = self._pg.all_reduce(b.flat, { op = "avg", async_op = true })
    else
      -- The last bucket has nothing left to overlap with: the blocking call
      -- is MPI's fastest (a non-blocking one took twice as long here), and
      -- it first starts the payloads of the earlier buckets, in order.
      self._pg.all_reduce(b.flat, { op = "avg" })
    end
    i = i + 1
  end
  rawset(self, "_next_launch", i)
  if i > #buckets then self:_finish() end
end

-- Which parameters some rank used (PyTorch's globally used map): only those
-- get a gradient where this rank had none.
function DDP:_globally_used()
  local flags = {}
  for i, slot in ipairs(self._slots) do flags[i] = slot[1].used[slot[2]] and 1 or 0 end
  local t = core.tensor(flags, { dtype = "int32", device = self._params[1] and self._params[1].device or "cpu" })
  self._pg.all_reduce(t, { op = "sum" })
  local used = {}
  for i, n in ipairs(t:totable()) do used[self._params[i]] = n > 0 end
  t:free()
  return used
end

-- Waits for every bucket: the averages are then in the gradients (views of
-- the buckets).
function DDP:_finish()
  local used = self.find_unused_parameters and self:_globally_used()
  for _, b in ipairs(self._buckets) do
    if b.work then b.work:wait() end -- the last bucket's call was synchronous
    b.work = nil
    for k, p in ipairs(b.params) do
      if not b.used[k] and used and used[p] then -- unused here, used elsewhere: the average, as PyTorch
        set_grad(p, b.views[k])
      end
    end
  end
  self:_reset()
end

function DDP:_reset()
  rawset(self, "_sync_step", nil)
  for _, b in ipairs(self._buckets) do
    for k = 1, #b.params do b.ready[k] = false end
    b.pending = #b.params
  end
  rawset(self, "_next_launch", 1)
  rawset(self, "_started", false)
end

-- An unfinished reduction from the last backward: some parameter got no
-- gradient. Every rank sees the same and raises the same error.
function DDP:_check_finished()
  if not self._started then return end
  local missing = {}
  for _, b in ipairs(self._buckets) do
    for k, p in ipairs(b.params) do
      if not b.ready[k] then missing[#missing + 1] = self._name_of[p] end
    end
  end
  self:_reset()
  for _, b in ipairs(self._buckets) do
    if b.work then b.work:wait(); b.work = nil end
  end
  table.sort(missing, function(x, y) return x[1] < y[1] end)
  for i, m in ipairs(missing) do missing[i] = ("%d ('%s')"):format(m[1], m[2]) end
  raise("DistributedDataParallel: the previous backward produced no gradient for parameter(s) "
    .. table.concat(missing, ", ") .. ", so their gradients were not averaged over the ranks: make every "
    .. "parameter that requires grad take part in the loss, freeze the unused ones "
    .. "(requires_grad_(false) before wrapping), or pass find_unused_parameters = true")
end

-- ---- forward ----

-- The tensors among a forward's results (tables walked).
local function collect_outputs(v, out, seen)
  if core.is_tensor(v) then
    out[#out + 1] = v
  elseif type(v) == "table" and not seen[v] then
    seen[v] = true
    for _, x in pairs(v) do collect_outputs(x, out, seen) end
  end
  return out
end

-- Marks ready at once the parameters the outputs' graph does not reach.
function DDP:_mark_unused(results)
  local reached = core._graph_reaches(collect_outputs(results, {}, {}), self._params)
  for i, slot in ipairs(self._slots) do
    if not reached[i] then self:_mark_ready(slot[1], slot[2]) end
  end
end

function DDP:forward(...)
  self:_check_finished()
  local grad = core.is_grad_enabled()
  rawset(self, "_sync_step", grad and self._require_sync)
  if self.broadcast_buffers and self.world_size > 1 then
    local buffers = self.module:buffers()
    if #buffers > 0 then setup.broadcast_from_0(self._pg, buffers) end
  end
  local results = table.pack(self.module(...))
  if self._sync_step and self.find_unused_parameters then self:_mark_unused(results) end
  return table.unpack(results, 1, results.n)
end

--- local g <close> = ddp:no_sync(): forwards inside it skip the all-reduce
--- in their backward (gradients accumulate locally; the next synchronised
--- backward averages the sum). With a function, runs it so and returns its
--- results.
function DDP:no_sync(fn)
  local previous = self._require_sync
  rawset(self, "_require_sync", false)
  local guard = setmetatable({}, { __close = function() rawset(self, "_require_sync", previous) end })
  if fn == nil then return guard end
  local results = table.pack(pcall(fn))
  rawset(self, "_require_sync", previous)
  if not results[1] then error(results[2], 0) end
  return table.unpack(results, 2, results.n)
end

--- The buckets as lists of parameter names (for inspection and tests).
function DDP:bucket_names()
  local out = {}
  for i, b in ipairs(self._buckets) do
    out[i] = {}
    for k, p in ipairs(b.params) do out[i][k] = self._name_of[p][2] end
  end
  return out
end

--- Removes the hooks (the model trains alone again).
function DDP:remove_hooks()
  for _, h in ipairs(self._hooks) do h:remove() end
  rawset(self, "_hooks", {})
end

function DDP:extra_repr()
  return ("world_size=%d, buckets=%d"):format(self.world_size, #self._buckets)
end

return { DistributedDataParallel = DDP }
