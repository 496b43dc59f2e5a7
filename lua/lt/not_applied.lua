-- The message of an update that failed before it changed anything (an
-- optimizer step, GradScaler's unscale_, gradient clipping): the error
-- without the position it was raised at (raise puts the script's line back),
-- prefixed with the op, and for out of memory, where a retry after freeing
-- memory is the usual next move, a note on its first line (the lines after
-- it list the largest tensors) that nothing was changed.
return function(op, err, note)
  local message = tostring(err)
  message = message:match("^[^\n:]*:%d+: (.*)$") or message
  if message:sub(1, #op + 2) ~= op .. ": " then message = op .. ": " .. message end
  if message:find("out of memory", 1, true) then
    local first, rest = message:match("^([^\n]*)(.*)$")
    message = first .. "; " .. note .. rest
  end
  return message
end
