-- Shape tables ({2, 3}) as messages show them and compare them; shared by the
-- modules, optimizers and checkpointing so their errors read the same.
local shapes = {}

-- "[2, 3]", as the engine's messages print shapes.
function shapes.text(shape)
  return "[" .. table.concat(shape, ", ") .. "]"
end

function shapes.equal(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

return shapes
