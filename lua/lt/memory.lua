-- require "lt.memory": the lt.memory table (lt.memory.allocated, stats, estimate, ...),
-- for scripts that want the namespace on its own.
return require("lt").memory
