-- A collective that NCCL reports broken under it (ncclCommGetAsyncError: a peer gone, the
-- network failed): the wait on its work handle ends at once with NCCL's words, not at the
-- group's timeout, and the group is broken from then on. Run by tests/simdev/test_nccl.sh on
-- 2 ranks with LT_SIM_NCCL_ASYNC_ERROR=1, which breaks rank 1's communicator in the NCCL
-- stand-in. Prints "rank R wait: ..." and "rank R then: ..." lines; rank 1 then fails,
-- which ends the job.
local dist = lt.distributed
dist.init_process_group { backend = "nccl", timeout = 30 }
local rank = dist.get_rank()
local t = lt.ones(4):to("cuda:" .. lt.cuda.current_device())

local started = lt.clock()
local work = dist.all_reduce(t, { async_op = true })
local ok, err = pcall(work.wait, work)
print(("rank %d wait: %s after %.1f s"):format(rank, ok and "ok" or tostring(err), lt.clock() - started))
if not ok then
  local again, err2 = pcall(dist.all_reduce, t)
  print(("rank %d then: %s"):format(rank, again and "ok" or tostring(err2)))
  io.stdout:flush()
  error(err, 0) -- the job ends as on any rank's error: the others stop in their next collective
end
dist.barrier() -- rank 1 never comes: its failure stops this rank
