-- lt's side of the peak-memory benchmark (scripts/bench/memory.sh): the peak
-- allocated bytes of the second and third training steps of one of
-- scripts/bench/steps.lua's models (steps.peak), with bf16 as a third
-- argument the forward under bfloat16 autocast. Prints one line: model batch
-- requested_peak_mib allocated_peak_mib requested_peak_bytes.
-- The first counts tensors' own bytes (what PyTorch's profiler timeline
-- counts); the second the allocator's blocks (512-byte rounding, and up to
-- 1 MiB a large block keeps unsplit: torch.cuda.max_memory_allocated's).
--   lt scripts/bench/memory_step.lua mlp|cnn|block BATCH [bf16]
local lt = lt or require "lt"
local id, batch, amp = arg[1], tonumber(arg[2]), arg[3] == "bf16"
lt.set_num_threads(1)
local requested, blocks = dofile("scripts/bench/steps.lua").peak(id, batch, amp)
print(("%s %d %.4f %.4f %d"):format(id, batch, requested / 2 ^ 20, blocks / 2 ^ 20, requested))
