-- lt.data.csv: a CSV table of numbers as tensors (the parsing is C,
-- engine/io/csv.c).
local raise = require "lt.user_error"
local core = require "lt.core"

local OPTIONS = { header = true, label = true, delimiter = true, dtype = true }
local DTYPES = { float32 = true, float64 = true }

--- csv(path, {header=true, label=, delimiter=",", dtype="float32"}) ->
--- features, labels, classes, columns.
--- features: [N, F] of dtype, every column but the label one (each must hold
--- numbers). label: the label column, by header name or 1-based index; none:
--- every column is a feature and labels is nil. A label column of text (class
--- names) gives int64 labels 1..C, class k being the k-th of the sorted
--- (byte order) distinct names, and classes lists those names; a numeric one
--- gives its values as written: int64 when every cell is an integer, else
--- dtype (classes is nil then). columns: the features' header names (nil
--- without a header). Errors name the file, line and column.
return function(path, opts)
  if type(path) ~= "string" then raise("csv: expected a file path, got " .. type(path)) end
  if opts ~= nil and type(opts) ~= "table" then raise("csv: expected an options table, got " .. type(opts)) end
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTIONS[k] then
      raise(string.format("csv: unknown option '%s' (expected delimiter, dtype, header, label)", tostring(k)))
    end
  end
  local header = opts.header
  if header == nil then header = true end
  if type(header) ~= "boolean" then raise("csv: header must be a boolean, got " .. type(header)) end
  local delimiter = opts.delimiter or ","
  if type(delimiter) ~= "string" or #delimiter ~= 1 then
    raise("csv: delimiter must be a one-character string, got " .. tostring(delimiter))
  end
  local dtype = opts.dtype or "float32"
  if not DTYPES[dtype] then raise("csv: dtype must be \"float32\" or \"float64\", got " .. tostring(dtype)) end
  local label = opts.label
  if label ~= nil and type(label) ~= "string" and not (math.type(label) == "integer" and label >= 1) then
    raise("csv: label must be a column name or a 1-based column index, got " .. tostring(label))
  end
  local features, labels, classes, columns = core._csv_read(path, delimiter, header, label, dtype)
  return features, labels, classes, columns
end
