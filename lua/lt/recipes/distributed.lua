-- Rank-aware recipes: `mpirun -np N lt scripts/train_fashion_cnn.lua --ddp`
-- (or --zero). Each rank trains a replica under DistributedDataParallel on
-- its share of every epoch (DataLoader{distributed = true}; --batch_size is
-- per rank, so the step's batch is N times it); --zero also shards Adam's
-- state (optim.ZeroRedundancyOptimizer). Only rank 0 prints, evaluates and
-- writes the checkpoint and the metrics: the other ranks' stdout goes to
-- /dev/null for the run (their errors still reach stderr). Every rank reads
-- the checkpoint to resume, so on several machines it must be on a shared
-- file system; resume with the same number of ranks (the data order of an
-- epoch depends on it).
local distributed = {}

--- The recipe's options with --ddp and --zero added.
function distributed.options(spec)
  spec[#spec + 1] = {"ddp", false, "data-parallel over the ranks of mpirun (DistributedDataParallel);"
    .. " --batch_size is per rank"}
  spec[#spec + 1] = {"zero", false, "--ddp with the optimizer state sharded over the ranks"
    .. " (ZeroRedundancyOptimizer)"}
  return spec
end

--- Starts the process group when --ddp or --zero asks for one: sets
--- opts.distributed, opts.rank and opts.world_size, and silences ranks other
--- than 0.
function distributed.setup(opts)
  if not (opts.ddp or opts.zero) then return opts end
  local dist = require "lt.distributed"
  local device = opts.device or ""
  dist.init_process_group({ backend = device:match("^cuda") and "nccl" or "mpi" })
  opts.distributed, opts.rank, opts.world_size = true, dist.get_rank(), dist.get_world_size()
  if opts.rank ~= 0 then
    local sink = assert(io.open("/dev/null", "w"))
    io.stdout = sink -- the progress bars write there
    io.output(sink)
    _G.print = function() end
  end
  return opts
end

--- The model to train: wrapped in DistributedDataParallel under --ddp/--zero
--- (opts.module keeps the bare model: it is evaluated and checkpointed).
function distributed.wrap(model, opts)
  opts.module = model
  if not opts.distributed then return model end
  return require("lt.nn.parallel").DistributedDataParallel(model)
end

--- cls(params, options), or ZeroRedundancyOptimizer over it under --zero.
function distributed.optimizer(params, cls, options, opts)
  if opts.zero then return require("lt.optim.zero")(params, cls, options) end
  return cls(params, options)
end

--- Ends the process group (after the run).
function distributed.finish(opts)
  if opts.distributed then
    local dist = require "lt.distributed"
    dist.barrier()
    dist.destroy_process_group()
  end
end

return distributed
