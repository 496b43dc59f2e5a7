-- lt's side of the peak-memory benchmark (scripts/bench/memory.sh): the peak
-- allocated bytes of the second and third training steps of one of
-- scripts/bench/steps.lua's models, everything included (model, data,
-- gradients, optimizer state), on the CPU device, as written (no lt.del, no
-- lt.gc()). Prints one line: model batch requested_peak_mib allocated_peak_mib.
-- The first counts tensors' own bytes (what PyTorch's profiler timeline
-- counts); the second the allocator's blocks (512-byte rounding, and up to
-- 1 MiB a large block keeps unsplit: torch.cuda.max_memory_allocated's).
--   lt scripts/bench/memory_step.lua mlp|cnn|block BATCH
local lt = lt or require "lt"
local id, batch = arg[1], tonumber(arg[2])
lt.set_num_threads(1)
lt.manual_seed(0)
for _, s in ipairs(dofile("scripts/bench/steps.lua")) do
  if s.id == id then
    local before = lt.memory.stats("cpu")
    local step = s.make(batch)
    step()
    lt.memory.reset_peak("cpu")
    step()
    step()
    local after = lt.memory.stats("cpu")
    print(("%s %d %.4f %.4f"):format(id, batch,
      (after.requested_bytes.all.peak - before.requested_bytes.all.current) / 2 ^ 20,
      (after.allocated_bytes.all.peak - before.allocated_bytes.all.current) / 2 ^ 20))
    return
  end
end
error("scripts/bench/memory_step.lua: unknown model '" .. tostring(id) .. "' (mlp, cnn or block)", 0)
