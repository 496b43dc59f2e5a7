-- Command-line options for recipes: `--name value` and `--flag`, with defaults
-- and types taken from a spec table, and a usage text for --help.
--
--   local opts = cli.parse(arg, {
--     {"epochs", 5, "passes over the training set", min = 1},
--     {"checkpoint", "", "save the model to FILE after every epoch", arg = "FILE"},
--     {"resume", false, "continue from --checkpoint"}, ...
--   }, "train_fashion_mlp.lua")
--
-- A spec entry is {name, default, help} and optionally: arg (the value's
-- name in the usage, default N for an integer, X for a number, VALUE for a
-- string), min (the least number accepted), words (what a number option
-- also takes, e.g. {"auto"}), choices (the values a string option takes). The default's type is the option's: a boolean
-- is a flag, an integer takes integers only. Mistakes are usage errors: the
-- message alone, no traceback (see usage_error).

local cli = {}

-- Where the help text starts and how wide lines may grow before wrapping.
local HELP_COLUMN_MAX, LINE_WIDTH = 28, 100

local function arg_name(s)
  if s.arg then return s.arg end
  local default = s[2]
  if type(default) == "boolean" then return nil end
  local name = math.type(default) == "integer" and "N" or type(default) == "number" and "X" or "VALUE"
  if s.words then name = name .. "|" .. table.concat(s.words, "|") end
  return name
end

-- "(default 128)" unless the help already says what the default does (its
-- wording has "default" in it), the option is a flag (off by default), or the
-- default is empty (nothing happens unless given).
local function default_note(s)
  local default = s[2]
  if type(default) == "boolean" or default == "" or s[3]:find("default", 1, true) then return "" end
  return (" (default %s)"):format(tostring(default))
end

-- Words of text in lines of at most width, the first after `first` columns
-- are used, the rest indented by indent.
local function wrap(text, first, indent, width)
  local lines, line, used = {}, {}, first
  for word in text:gmatch("%S+") do
    if #line > 0 and used + 1 + #word > width then
      lines[#lines + 1] = table.concat(line, " ")
      line, used = {}, indent
    end
    used = used + (#line > 0 and 1 or 0) + #word
    line[#line + 1] = word
  end
  lines[#lines + 1] = table.concat(line, " ")
  return table.concat(lines, "\n" .. string.rep(" ", indent))
end

function cli.usage(spec, program)
  local heads, column = {}, 12
  for i, s in ipairs(spec) do
    local a = arg_name(s)
    heads[i] = "--" .. s[1] .. (a and (" " .. a) or "")
    if #heads[i] + 4 <= HELP_COLUMN_MAX then column = math.max(column, #heads[i] + 4) end
  end
  local lines = {("usage: lt %s [options]"):format(program), "", "options:"}
  for i, s in ipairs(spec) do
    local text = s[3] .. default_note(s)
    local head = "  " .. heads[i]
    if #head + 2 > column then
      -- A long option name gets a line of its own, its help under it.
      lines[#lines + 1] = head
      head = ""
    end
    lines[#lines + 1] = head .. string.rep(" ", column - #head) .. wrap(text, column, column, LINE_WIDTH)
  end
  lines[#lines + 1] = "  --help" .. string.rep(" ", column - 8) .. "print this and exit"
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

-- Whether err is a usage error (from usage_error).
function cli.is_usage_error(err) return getmetatable(err) == usage_error_mt end

-- Returns the options table, or raises a usage error naming the bad option.
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
      print(cli.usage(spec, program))
      os.exit(0)
    end
    local name = a:match("^%-%-([%w_%-]+)$")
    local s = name and by_name[name:gsub("-", "_")]
    if not s then
      usage_error(("%s: unknown option '%s' (--help lists them)\n%s"):format(program, a, cli.usage(spec, program)))
    end
    name = s[1]
    local default = s[2]
    if type(default) == "boolean" then
      opts[name] = true
    else
      local v = argv[i + 1]
      if v == nil then
        usage_error(("%s: option --%s needs a value (%s)"):format(program, name, arg_name(s)))
      end
      if type(default) == "number" and not listed(s.words, v) then
        local n = math.tointeger(tonumber(v)) or tonumber(v)
        local also = s.words and (" or " .. table.concat(s.words, ", ")) or ""
        if not n then
          usage_error(("%s: option --%s expects a number%s, got '%s'"):format(program, name, also, v))
        end
        if math.type(default) == "integer" and math.type(n) ~= "integer" then
          usage_error(("%s: option --%s expects a whole number%s, got '%s'"):format(program, name, also, v))
        end
        if s.min and n < s.min then
          usage_error(("%s: option --%s must be at least %s, got %s"):format(program, name, tostring(s.min), v))
        end
        v = n
      end
      if s.choices and not listed(s.choices, v) then
        usage_error(("%s: option --%s takes %s, got '%s'"):format(program, name, table.concat(s.choices, " or "), v))
      end
      opts[name] = v
      i = i + 1
    end
    i = i + 1
  end
  return opts
end

return cli
