-- require "lt.cuda": the lt.cuda table (is_available, device_count, streams, ...),
-- for scripts that want the namespace on its own.
return require("lt").cuda
