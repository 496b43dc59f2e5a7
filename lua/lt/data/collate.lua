-- lt.data.default_collate: a list of samples (what dataset:get(i) returns)
-- into one batch, as PyTorch's default_collate:
--   tensors of one shape and dtype -> lt.stack(samples, 1): [B, ...]
--   numbers  -> a [B] tensor: int64 when all are integers, else float32
--               (Lua's integers and floats, as lt.tensor reads them)
--   booleans -> a bool [B] tensor
--   strings  -> the list of them (as PyTorch keeps strings)
--   a list {x, y, ...} -> the list of the collated positions
--   a table with names {image = ..., label = ...} -> the table of the collated fields
-- Samples that do not fit together (shapes, types, fields) are an error that
-- names the two samples by their dataset index and where in the sample the
-- difference is.
local raise = require "lt.user_error"
local core = require "lt.core"

local function shape_text(t) return "[" .. table.concat(t.shape, ", ") .. "]" end

local function same_shape(a, b)
  local sa, sb = a.shape, b.shape
  if #sa ~= #sb then return false end
  for i = 1, #sa do
    if sa[i] ~= sb[i] then return false end
  end
  return true
end

-- What a value is, for the rule that batches it.
local function kind(v)
  if core.is_tensor(v) then return "tensor" end
  local t = type(v)
  if t == "table" then return getmetatable(v) == nil and "table" or "object" end
  return t
end

local collate

-- "sample 3 (dataset index 17)"
local function sample_name(k, indices)
  if indices and indices[k] ~= nil then return string.format("sample %d (dataset index %s)", k, tostring(indices[k])) end
  return "sample " .. k
end

local function at(path) return path == "" and "" or " at " .. path end

local HINT = "; pass collate=function(samples) ... end to batch such samples yourself"

local function fail(message) raise("DataLoader: cannot collate the batch: " .. message) end

collate = function(samples, indices, path)
  path = path or ""
  local first = samples[1]
  local k1 = kind(first)
  for k = 2, #samples do
    local kk = kind(samples[k])
    if kk ~= k1 then
      fail(string.format("%s is a %s%s where %s is a %s%s", sample_name(k, indices), kk, at(path),
        sample_name(1, indices), k1, HINT))
    end
  end
  if k1 == "tensor" then
    for k = 2, #samples do
      local s = samples[k]
      if not same_shape(s, first) then
        fail(string.format("%s has shape %s%s where %s has %s%s", sample_name(k, indices), shape_text(s), at(path),
          sample_name(1, indices), shape_text(first), HINT))
      end
      if s.dtype ~= first.dtype or s.device ~= first.device then
        fail(string.format("%s is %s on %s%s where %s is %s on %s", sample_name(k, indices), s.dtype, s.device,
          at(path), sample_name(1, indices), first.dtype, first.device))
      end
    end
    return core.stack(samples, 1)
  elseif k1 == "number" then
    local dtype = "int64"
    for k = 1, #samples do
      if math.type(samples[k]) == "float" then dtype = "float32" break end
    end
    return core.tensor(samples, { dtype = dtype })
  elseif k1 == "boolean" then
    return core.tensor(samples, { dtype = "bool" })
  elseif k1 == "string" then
    local copy = {}
    for k = 1, #samples do copy[k] = samples[k] end
    return copy
  elseif k1 == "table" then
    local n = #first
    if n > 0 then -- a list: position by position
      local out = {}
      for k = 2, #samples do
        if #samples[k] ~= n then
          fail(string.format("%s holds %d values%s where %s holds %d", sample_name(k, indices), #samples[k], at(path),
            sample_name(1, indices), n))
        end
      end
      for j = 1, n do
        local column = {}
        for k = 1, #samples do column[k] = samples[k][j] end
        out[j] = collate(column, indices, path .. "[" .. j .. "]")
      end
      return out
    end
    local keys = {}
    for key in pairs(first) do keys[#keys + 1] = key end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for k = 2, #samples do
      local count = 0
      for key in pairs(samples[k]) do
        count = count + 1
        if first[key] == nil then
          fail(string.format("%s has a field '%s'%s that %s lacks", sample_name(k, indices), tostring(key), at(path),
            sample_name(1, indices)))
        end
      end
      if count ~= #keys then
        for _, key in ipairs(keys) do
          if samples[k][key] == nil then
            fail(string.format("%s lacks the field '%s'%s that %s has", sample_name(k, indices), tostring(key),
              at(path), sample_name(1, indices)))
          end
        end
      end
    end
    local out = {}
    for _, key in ipairs(keys) do
      local column = {}
      for k = 1, #samples do column[k] = samples[k][key] end
      out[key] = collate(column, indices, path .. "." .. tostring(key))
    end
    return out
  end
  fail(string.format("%s is a %s%s, which the default collate does not batch (tensors, numbers, booleans, " ..
    "strings and tables of them)%s", sample_name(1, indices), k1, at(path), HINT))
end

return collate
