-- Options tables of module constructors: defaults filled in, unknown keys
-- refused (a misspelt option is an error, not a silently ignored default).
local core = require "lt.core"
local raise = require "lt.user_error"

local options = {}

-- Raises "name: unknown option 'k' (did you mean 'x'?)" with the closest
-- key of the tables of known names (sets or tables keyed by name), or the
-- list of them when none is close: the one wording, as the C readers'.
function options.unknown(name, k, ...)
  local known = {}
  for i = 1, select("#", ...) do
    for key in pairs(select(i, ...) or {}) do
      if type(key) == "string" then known[#known + 1] = key end
    end
  end
  table.sort(known)
  local near = type(k) == "string" and core._closest(k, known)
  if near then raise(string.format("%s: unknown option '%s' (did you mean '%s'?)", name, k, near)) end
  raise(string.format("%s: unknown option '%s' (expected one of %s)", name, tostring(k), table.concat(known, ", ")))
end

-- Returns a new table: defaults overridden by opts. Errors name the module.
-- Keys in `allowed` (a set) are accepted without a default (dtype, device).
function options.read(name, opts, defaults, allowed)
  local out = {}
  for k, v in pairs(defaults) do out[k] = v end
  if opts == nil then return out end
  if type(opts) ~= "table" then
    raise(string.format("%s: expected an options table, got %s", name, type(opts)))
  end
  for k, v in pairs(opts) do
    if defaults[k] == nil and not (allowed and allowed[k]) then options.unknown(name, k, defaults, allowed) end
    -- A flag must be a flag: {bias = 0} would be true to Lua and make a bias.
    if type(defaults[k]) == "boolean" and type(v) ~= "boolean" then
      raise(string.format("%s: %s must be a boolean, got %s", name, tostring(k),
        type(v) == "number" and "number " .. tostring(v) or type(v)))
    end
    out[k] = v
  end
  return out
end

-- The options table a module's forward hands its functional op (keys: the
-- module fields it copies), built when the module is first called and again
-- only after one of those fields was changed on the module, so that a call
-- makes no table (the functional op reads it as it is each time).
function options.cached(module, keys)
  local opts = rawget(module, "_forward_options")
  if opts then
    for i = 1, #keys do
      local k = keys[i]
      if opts[k] ~= module[k] then opts = nil break end
    end
    if opts then return opts end
  end
  opts = {}
  for i = 1, #keys do opts[keys[i]] = module[keys[i]] end
  rawset(module, "_forward_options", opts)
  return opts
end

-- An integer argument at least `min`.
function options.integer(name, what, v, min)
  -- A float with an integral value counts (3.0), but not one beyond int64 (1e300, inf).
  local n = type(v) == "number" and math.tointeger(v) or nil
  if n == nil then
    raise(string.format("%s: expected an integer for %s, got %s", name, what,
      type(v) == "number" and tostring(v) or type(v)))
  end
  v = n
  if min and v < min then
    raise(string.format("%s: %s must be at least %d, got %d", name, what, min, v))
  end
  return v
end

-- A size given as one integer or a table of two: always a table {h, w}.
function options.pair(name, what, v, min)
  if type(v) == "table" then
    if #v ~= 2 then raise(string.format("%s: %s must be an integer or a table of 2, got %d values", name, what, #v)) end
    return { options.integer(name, what, v[1], min), options.integer(name, what, v[2], min) }
  end
  local n = options.integer(name, what, v, min)
  return { n, n }
end

-- Python's tuple repr, as PyTorch prints module options: (3, 3), (10,).
function options.tuple(t)
  if #t == 1 then return "(" .. tostring(t[1]) .. ",)" end
  return "(" .. table.concat(t, ", ") .. ")"
end

-- Creation options for parameters: {dtype=, device=} from a module's options.
function options.factory(opts)
  return { dtype = opts.dtype, device = opts.device }
end

options.factory_keys = { dtype = true, device = true }

-- make(shape, factory) (core.empty, core.ones, ...) once the shape is known
-- to fit, so that nn.Linear(2^32, 2^32) fails under the module's name.
function options.tensor(name, make, shape, factory)
  core._check_shape(name, shape)
  return make(shape, factory)
end

return options
