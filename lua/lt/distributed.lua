-- lt.distributed: collectives between the processes mpirun starts, with
-- torch.distributed's meaning (ranks 0-based). The functions are C
-- (bindings/distributed.c over engine/dist); loaded on first use of
-- lt.distributed, so a run that never uses it never loads it.
local core = require "lt.core"

local distributed = {}
for name, fn in pairs(core._distributed) do distributed[name] = fn end

-- torch.distributed.ReduceOp's names for the op option's strings.
distributed.ReduceOp = { SUM = "sum", AVG = "avg", MAX = "max", MIN = "min", PRODUCT = "prod" }

return distributed
