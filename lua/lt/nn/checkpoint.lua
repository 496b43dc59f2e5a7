-- nn.checkpoint_sequential(seq, segments, x): runs a Sequential (or a list of
-- modules/functions) in segments, each but the last under lt.checkpoint, as
-- torch.utils.checkpoint.checkpoint_sequential: the segment size is
-- n // segments, the first segments-1 chunks are checkpointed and the last
-- one (with the remainder) runs normally, since its activations are needed
-- at once by backward anyway.
local Module = require "lt.nn.module"
local raise = require "lt.user_error"

-- The children of a Sequential, or the given list.
local function function_list(seq)
  if Module.is_module(seq) then
    local list = {}
    for _, child in ipairs(seq:children()) do list[#list + 1] = child end
    return list
  end
  if type(seq) ~= "table" then
    raise("checkpoint_sequential: expected a Sequential or a list of modules, got " .. type(seq))
  end
  return seq
end

-- A function running list[first..last] in order.
local function run_range(list, first, last)
  return function(x)
    for i = first, last do x = list[i](x) end
    return x
  end
end

local function checkpoint_sequential(seq, segments, x)
  local list = function_list(seq)
  local n = #list
  if math.type(segments) ~= "integer" or segments < 1 or segments > math.max(n, 1) then
    raise(string.format("checkpoint_sequential: segments must be an integer between 1 and %d (the number of modules), got %s",
      n, tostring(segments)))
  end
  local checkpoint = require "lt.checkpoint"
  local size = n // segments
  local last = 0
  for first = 1, size * (segments - 1), size do
    last = first + size - 1
    x = checkpoint(run_range(list, first, last), x)
  end
  return run_range(list, last + 1, n)(x)
end

return { checkpoint_sequential = checkpoint_sequential }
