-- lt's training steps against PyTorch's: the exact peak bytes of each step
-- of scripts/bench/steps.lua (the benchmark's MLP and CNN, a transformer
-- block; float32 and under bfloat16 autocast) at or below what PyTorch 2.x's
-- memory timeline shows for the same step (tests/fixtures/step_peaks, written
-- by tests/fixtures/gen_step_peaks_fixture.py), as written: no lt.del, no
-- lt.gc().
local lt = require "lt"
local steps = dofile("scripts/bench/steps.lua")
local fixture = dofile("tests/fixtures/step_peaks/torch_step_peaks.lua")

-- A one-row step drops its logits (1 x 10: 40 bytes in float32, 20 in
-- bfloat16) while its backward runs, below any collection's slack: only a
-- collection before every such step would free them (README, "Memory
-- against PyTorch"). Every other step is at or below PyTorch's.
local function allowance(case) return case.batch == 1 and 40 or 0 end

describe("a training step's peak against PyTorch 2.x's", function()
  local threads
  setup(function() threads = lt.get_num_threads(); lt.set_num_threads(1) end)
  teardown(function() lt.set_num_threads(threads) end)

  for _, case in ipairs(fixture) do
    local what = ("%s, batch %d, %s"):format(case.id, case.batch, case.precision)
    it(what, function()
      local requested = steps.peak(case.id, case.batch, case.precision == "bf16")
      assert(requested <= case.bytes + allowance(case),
        ("%s: lt %d bytes, PyTorch %d (%+d)"):format(what, requested, case.bytes, requested - case.bytes))
    end)
  end
end)
