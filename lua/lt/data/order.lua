-- The order of an epoch, shared by DataLoader and DistributedSampler so that
-- the ranks of a distributed loader see the single-process loader's order,
-- interleaved.
local core = require "lt.core"

local order = {}

-- The generator seed of one epoch: splitmix64 of (seed, epoch), so that each
-- epoch's order is fixed by the seed alone and epochs differ from each other.
-- Lua's integers wrap around, as the mixing needs.
function order.epoch_seed(seed, epoch)
  local z = seed + epoch * 0x9E3779B97F4A7C15
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return z ~ (z >> 31)
end

-- int64 indices 1..n: shuffled by (seed, epoch), by the global generator
-- without a seed, or in order.
function order.epoch_order(n, shuffle, seed, epoch)
  if not shuffle then return core.arange(1, n + 1) end
  if seed then return core.randperm(n, { seed = order.epoch_seed(seed, epoch) }) end
  return core.randperm(n)
end

return order
