-- Tensors sorted into one list per device, for the engine calls that take
-- many tensors of one device (the optimizers' and the scaler's many-tensor
-- kernels). The devices keep the order in which they first appear, so a
-- step visits them the same way every time.
local by_device = {}

-- A new, empty set of lists.
function by_device.new()
  return { lists = {}, order = {} }
end

-- Appends t to the list of its device.
function by_device.add(set, t)
  local device = t.device
  local list = set.lists[device]
  if list == nil then
    list = {}
    set.lists[device] = list
    set.order[#set.order + 1] = device
  end
  list[#list + 1] = t
end

return by_device
