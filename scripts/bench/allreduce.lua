-- lt's half of scripts/bench/allreduce.sh: lt.distributed.all_reduce (float32
-- sum, in place) of 1, 16 and 64 MiB, median of the repeats, printed by rank 0
-- as "lt <MiB> <ms>" (and "lt_async ..." for async_op=true, then wait()).
--   mpirun -np 2 lt scripts/bench/allreduce.lua [repeats]
local lt = require "lt"
local dist = lt.distributed
local repeats = tonumber(arg[1]) or 10
dist.init_process_group({ backend = "mpi" })
local rank = dist.get_rank()

local function median(xs)
  table.sort(xs)
  return xs[#xs // 2 + 1]
end

for _, async in ipairs { false, true } do
  for _, mib in ipairs { 1, 16, 64 } do
    local t = lt.ones(mib * 2 ^ 20 // 4)
    local times = {}
    for r = 0, repeats do -- r = 0: warm-up, not timed
      dist.barrier()
      local start = lt.clock()
      local work = dist.all_reduce(t, { async_op = async })
      if work then work:wait() end
      if r > 0 then times[#times + 1] = (lt.clock() - start) * 1e3 end
    end
    if rank == 0 then print(string.format("%s %d %.3f", async and "lt_async" or "lt", mib, median(times))) end
    t:free()
  end
end
dist.destroy_process_group()
