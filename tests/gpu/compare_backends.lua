-- Every op on CUDA against the CPU backend (ggml's test-backend-ops idea):
-- elementwise, reductions, matmul, the nn ops forward and backward and the
-- optimizer steps, in float32, float64, float16 and bfloat16 at several
-- shapes (the cases are tests/gpu/cases.lua). Prints one row per case and
-- what no case covers, and exits 1 if any case fails or anything is
-- uncovered. Run by scripts/gpu_check.sh:
--   lt tests/gpu/compare_backends.lua [side-stream]
-- With "side-stream" every case runs on a pool stream instead of the default
-- stream, which shows whether any kernel, copy or library call still goes to
-- the legacy default stream (it would race with the pool stream's work).
local lt = lt or require "lt"
local side_stream = arg and arg[1] == "side-stream"

if not lt.cuda.is_available() then
  print("skipped: no CUDA device")
  os.exit(0)
end

local cases = dofile("tests/gpu/cases.lua")
if side_stream then lt.cuda.set_stream(lt.cuda.Stream()) end
local rows, failures = cases.run()
print(string.format("%-32s %-9s %-14s %12s %s", "op", "dtype", "shape", "max error", "ok"))
for _, r in ipairs(rows) do print(cases.format(r)) end
print(string.format("%d cases, %d failed", #rows, failures))
-- What no case runs: a kernel-table entry, an op of the op table, a reduction.
local missing = cases.coverage(rows)
for _, what in ipairs(missing) do print("not covered: " .. what) end
print(string.format("coverage: %d not covered", #missing))
os.exit((failures == 0 and #missing == 0) and 0 or 1)
