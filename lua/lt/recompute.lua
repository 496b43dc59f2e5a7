-- Whether lt.checkpoint is re-running a function for backward. Modules with
-- side effects read it: BatchNorm must not update its running statistics a
-- second time when its forward is recomputed (PyTorch's known pitfall).
local recompute = { depth = 0 }

function recompute.active() return recompute.depth > 0 end

-- Runs fn(...) marked as a recomputation; the mark is removed also when fn fails.
function recompute.run(fn, ...)
  recompute.depth = recompute.depth + 1
  local results = table.pack(pcall(fn, ...))
  recompute.depth = recompute.depth - 1
  if not results[1] then error(results[2], 0) end
  return table.unpack(results, 2, results.n)
end

return recompute
