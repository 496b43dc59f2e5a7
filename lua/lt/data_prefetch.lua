-- lt.data.prefetch: a batch iterator moved to a device one batch ahead.
--
-- On CUDA the copy of batch k+1 is queued on a side stream of its own while
-- batch k computes on the current stream, so that host-to-device copies
-- (non-blocking from pinned memory: DataLoader{pin_memory = true}) overlap
-- the training step instead of preceding it. The pattern is PyTorch's
-- pin_memory + non_blocking + a copy stream (as NVIDIA apex's
-- data_prefetcher):
--   * before batch k is handed out, the compute stream waits for the copy
--     stream, so no kernel reads a batch before its bytes have arrived;
--   * batch k's tensors were allocated on the copy stream but are used on the
--     compute stream: record_stream tells the caching allocator, so their
--     blocks are reused only once the compute stream has finished with them.
local raise = require "lt.user_error"
local core = require "lt.core"

local function is_cuda(device)
  return device == "cuda" or device:match("^cuda:%d+$") ~= nil
end

-- Calls fn on every tensor of a batch (the values of one step: tensors, or
-- tables of tensors for a named dataset), replacing each by fn's result.
local function map_tensors(batch, fn)
  for i = 1, batch.n do
    local v = batch[i]
    if core.is_tensor(v) then
      batch[i] = fn(v)
    elseif type(v) == "table" then
      for k, t in pairs(v) do
        if core.is_tensor(t) then v[k] = fn(t) end
      end
    end
  end
end

local function to_device(device)
  return function(t) return t:to(device, {non_blocking = true}) end
end

--- prefetch(batches, device): for use as `for x, y in lt.data.prefetch(loader:iter(), "cuda")`.
--- batches is an iterator such as DataLoader:iter(); each step's tensors come
--- out on device. On the CPU the batches pass through unchanged.
return function(batches, device)
  if type(batches) ~= "function" then
    raise("data.prefetch: expected a batch iterator (loader:iter()), got " .. type(batches))
  end
  device = device or "cpu"
  if type(device) ~= "string" or not (device == "cpu" or is_cuda(device)) then
    error(("data.prefetch: expected a device 'cpu', 'cuda' or 'cuda:N', got %s"):format(
      type(device) == "string" and "'" .. device .. "'" or type(device)), 2)
  end
  if device == "cpu" then return batches end

  local cuda = core.cuda
  local copy_stream = cuda.Stream(device)
  local move = to_device(device)

  local function fetch()
    local batch = table.pack(batches())
    if batch[1] == nil then return nil end
    cuda.stream(copy_stream, map_tensors, batch, move)
    return batch
  end

  local ahead = fetch()
  return function()
    local batch = ahead
    if batch == nil then return nil end
    -- The stream current now (not when prefetch was called) is where the
    -- batch will be used: set_stream / lt.cuda.stream may have changed it.
    -- copy_stream.device pins the device that "cuda" meant at the start.
    local compute = cuda.current_stream(copy_stream.device)
    compute:wait_stream(copy_stream)
    map_tensors(batch, function(t)
      t:record_stream(compute)
      return t
    end)
    ahead = fetch()
    return table.unpack(batch, 1, batch.n)
  end
end
