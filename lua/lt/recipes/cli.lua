-- Command-line options for recipes: `--name value` and `--flag`, with defaults
-- and types taken from a spec table, and a usage text for --help.
--
--   local opts = cli.parse(arg, {
--     {"epochs", 5, "passes over the training set"},
--     {"resume", false, "continue from --checkpoint"}, ...
--   }, "train_fashion_mlp.lua")

local cli = {}

local function usage(spec, program)
  local lines = {("usage: lt %s [options]"):format(program), "options:"}
  for _, s in ipairs(spec) do
    local default = s[2] == "" and "" or (" (default: %s)"):format(tostring(s[2]))
    lines[#lines + 1] = ("  --%-14s %s%s"):format(s[1], s[3], default)
  end
  return table.concat(lines, "\n")
end

-- Whether v is one of the words a number option also takes (spec entry's
-- `words`, e.g. {"auto"}).
local function listed(words, v)
  for _, w in ipairs(words or {}) do
    if w == v then return true end
  end
  return false
end

-- A command-line mistake: an error object that describes itself, so the lt
-- host (as lua.c) prints its message alone, with no traceback into this
-- file; tostring gives the message to a pcall.
local usage_error_mt = { __tostring = function(e) return e.message end }
local function usage_error(message) error(setmetatable({ message = message }, usage_error_mt), 0) end

-- For a recipe's own checks of its options (--resume without --checkpoint).
cli.usage_error = usage_error

-- Returns the options table, or raises an error naming the bad option.
function cli.parse(argv, spec, program)
  local opts, by_name = {}, {}
  for _, s in ipairs(spec) do
    opts[s[1]] = s[2]
    by_name[s[1]] = s
  end
  local i = 1
  while argv[i] do
    local a = argv[i]
    if a == "-h" or a == "--help" then
      print(usage(spec, program))
      os.exit(0)
    end
    local name = a:match("^%-%-([%w_%-]+)$")
    local s = name and by_name[name:gsub("-", "_")]
    if not s then usage_error(("%s: unknown option '%s'\n%s"):format(program, a, usage(spec, program))) end
    name = s[1]
    local default = s[2]
    if type(default) == "boolean" then
      opts[name] = true
    else
      local v = argv[i + 1]
      if v == nil then usage_error(("%s: option --%s needs a value"):format(program, name)) end
      if type(default) == "number" and not listed(s.words, v) then
        local n = math.tointeger(tonumber(v)) or tonumber(v)
        if not n then
          local also = s.words and (" or " .. table.concat(s.words, ", ")) or ""
          usage_error(("%s: option --%s expects a number%s, got '%s'"):format(program, name, also, v))
        end
        v = n
      end
      opts[name] = v
      i = i + 1
    end
    i = i + 1
  end
  return opts
end

return cli
