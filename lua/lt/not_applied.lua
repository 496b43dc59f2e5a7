-- The message of an update that failed before it changed anything (an
-- optimizer step, GradScaler's unscale_, gradient clipping, loading state,
-- converting a module): the error without the position it was raised at
-- (raise puts the script's line back). Out of memory, where a retry after
-- freeing memory is the usual next move, gets the op in front and a note
-- that nothing was changed at the end of its first line (the lines after it
-- list the largest tensors).
return function(op, err, note)
  local message = tostring(err)
  message = message:match("^[^\n:]*:%d+: (.*)$") or message
  -- The allocator's message names no op; the others name theirs already.
  if message:sub(1, 13) == "out of memory" then message = op .. ": " .. message end
  if message:find("out of memory", 1, true) then
    local first, rest = message:match("^([^\n]*)(.*)$")
    message = first .. "; " .. note .. rest
  end
  return message
end
