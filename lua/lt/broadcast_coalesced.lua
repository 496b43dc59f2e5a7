-- broadcast_coalesced(pg, tensors, src): rank src's values into tensors on
-- every rank, as PyTorch's _broadcast_coalesced: one broadcast per dtype and
-- device, of the tensors flattened into one buffer. Each collective is a
-- meeting of all the ranks, which on a busy machine costs far more than its
-- bytes (DistributedDataParallel's parameters and buffers,
-- ZeroRedundancyOptimizer's shards).
local core = require "lt.core"

return function(pg, tensors, src)
  local guard <close> = core.no_grad()
  local groups, order = {}, {}
  for _, t in ipairs(tensors) do
    local key = t.dtype .. "@" .. t.device
    if not groups[key] then
      groups[key] = {}
      order[#order + 1] = key
    end
    local list = groups[key]
    list[#list + 1] = t
  end
  table.sort(order) -- the same order on every rank
  for _, key in ipairs(order) do
    local list = groups[key]
    if #list == 1 then
      local data = list[1]:detach() -- same storage; a leaf that requires grad may not be written in place
      pg.broadcast(data, { src = src })
      data:free()
    else
      local flats = {}
      for i, t in ipairs(list) do flats[i] = t:detach():reshape(-1) end
      local flat = core.cat(flats, 1)
      pg.broadcast(flat, { src = src })
      local offset = 1
      for i, t in ipairs(list) do
        local n = t:numel()
        local part = flat:narrow(1, offset, n):view(t.shape)
        local data = t:detach()
        data:copy_(part)
        data:free()
        part:free()
        flats[i]:free()
        offset = offset + n
      end
      flat:free()
    end
  end
end
