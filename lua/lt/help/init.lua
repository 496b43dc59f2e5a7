-- lt.help: the docs of lt's public names, kept as data in this directory
-- (one file per area, listed in areas.lua), printed by lt.help(x) and ?x at
-- the REPL, and written to docs/API.md by scripts/gen_api_doc.lua.
--
-- lua/lt/init.lua defines lt.help as a small function that loads this module on its
-- first call, so `require "lt"` reads none of the docs.
--
--   help.show(x)     prints the doc of x (what lt.help(x) does); nothing returned
--   help.text(x)     the same text as a string, or nil and the message
--   help.areas()     the areas in order: {title =, intro =, entries = {...}}
--   help.lookup(s)   the entries a name stands for (a list, maybe empty)
--
-- An entry is a table: name (as the user writes it: "lt.zeros", "t:sum",
-- "nn.Linear", "F.relu", "m:parameters"), sig (the call with its options),
-- doc (what it does), opts (options and their defaults), ex (an example, Lua
-- that the spec compiles and runs), aliases (other names of the same thing),
-- see (related names), members (a prefix: a namespace or class lists the
-- entries under it; with compact, by name only), types (the __name of the
-- objects it describes: a guard, a GradScaler), virtual (why no walk of lt's
-- tables finds the name: a field, syntax), run (why the spec only compiles
-- the example: it writes a file, it needs a GPU).
local core = require "lt.core"

local help = {}

local WIDTH = 90

-- ---- the data ----

local loaded -- {areas =, entries =, by_name =, by_last =, by_type =}

-- An entry written positionally, {name, sig, doc, ...}, with its fields named.
local function normalize(e, area)
  e.name, e.sig, e.doc = e.name or e[1], e.sig or e[2], e.doc or e[3]
  e[1], e[2], e[3] = nil, nil, nil
  e.area = area
  return e
end

-- The last component of a name: "sum" of "t:sum", "Linear" of "nn.Linear".
local function last_part(name)
  return name:match("[%.:]([^%.:]+)$") or name
end

local function load()
  if loaded then return loaded end
  local areas, entries, by_name, by_last, by_type = {}, {}, {}, {}, {}
  local function index(key, e)
    by_name[key] = by_name[key] or e
  end
  for _, module in ipairs(require "lt.help.areas") do
    local area = require("lt.help." .. module)
    areas[#areas + 1] = area
    for _, e in ipairs(area.entries) do
      normalize(e, area)
      entries[#entries + 1] = e
      index(e.name, e)
      for _, alias in ipairs(e.aliases or {}) do index(alias, e) end
      for _, type_name in ipairs(e.types or {}) do by_type[type_name] = e end
      local last = last_part(e.name)
      by_last[last] = by_last[last] or {}
      table.insert(by_last[last], e)
    end
  end
  loaded = { areas = areas, entries = entries, by_name = by_name, by_last = by_last, by_type = by_type }
  return loaded
end

function help.areas() return load().areas end

-- ---- names ----

-- Spellings of a name that map to the canonical one, longest prefix first:
-- lt.nn.functional.relu and torch.nn.functional.relu are F.relu,
-- Tensor:sum and lt.Tensor.sum are t:sum, nn.Module:train is m:train.
local REWRITES = {
  { "torch.nn.functional.", "F." }, { "lt.nn.functional.", "F." }, { "nn.functional.", "F." },
  { "torch.nn.", "nn." }, { "lt.nn.", "nn." }, { "torch.optim.", "optim." }, { "lt.optim.", "optim." },
  { "lt.Tensor:", "t:" }, { "lt.Tensor.", "t:" }, { "torch.Tensor.", "t:" }, { "Tensor:", "t:" },
  { "Tensor.", "t:" }, { "t.", "t:" }, { "nn.Module:", "m:" }, { "nn.Module.", "m:" }, { "Module:", "m:" },
  { "optim.Optimizer:", "opt:" }, { "Optimizer:", "opt:" }, { "torch.", "lt." },
}

local function rewrite(name)
  for _, r in ipairs(REWRITES) do
    local from, to = r[1], r[2]
    if name:sub(1, #from) == from then return to .. name:sub(#from + 1) end
  end
  return name
end

-- A namespace's own name too: lt.nn is nn, lt.nn.functional F.
local function rewritten(name)
  local r = rewrite(name)
  if r ~= name then return r end
  r = rewrite(name .. ".")
  return r ~= name .. "." and r:sub(1, -2) or name
end

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", ""):gsub("%(%)$", "")) end

-- The entries a name stands for: the one it names (in any spelling above),
-- else every entry whose last component it is ("sum": t:sum; "relu": t:relu
-- and F.relu), else an area by its title.
function help.lookup(name)
  local d = load()
  name = trim(name)
  local e = d.by_name[name] or d.by_name[rewritten(name)]
  if e then return { e } end
  local found, seen = {}, {}
  for _, key in ipairs { last_part(name), last_part(rewritten(name)) } do
    for _, candidate in ipairs(d.by_last[key] or {}) do
      if not seen[candidate] then
        seen[candidate] = true
        found[#found + 1] = candidate
      end
    end
  end
  if #found > 0 then return found end
  for _, area in ipairs(d.areas) do
    if area.title:lower() == name:lower() then return { area = area } end
  end
  return {}
end

-- The closest documented name, for "did you mean".
local function closest(name)
  local d = load()
  local names = {}
  for key in pairs(d.by_name) do names[#names + 1] = key end
  local near = core._closest(rewritten(name), names) or core._closest(name, names)
  if near then return near end
  local lasts = {}
  for key in pairs(d.by_last) do lasts[#lasts + 1] = key end
  local last = core._closest(last_part(name), lasts)
  return last and d.by_last[last][1].name
end

-- ---- values back to names ----

local walk = require "lt.help.walk"

local reverse -- value -> public name, built on the first lookup of a value
local reverse_for -- the modules lt loads on first use that were loaded then

local function lt_table() return require "lt" end

local function name_of(v)
  local lt = lt_table()
  local now = walk.lazy_loaded(lt) -- built again when one more module is loaded
  if not reverse or reverse_for ~= now then
    reverse, reverse_for = {}, now
    walk.each(lt, function(name, value)
      if (type(value) == "function" or type(value) == "table") and reverse[value] == nil then reverse[value] = name end
    end)
  end
  return reverse[v]
end

-- ---- text ----

-- s wrapped to WIDTH, each line starting with indent.
local function wrap(s, indent)
  local lines, line = {}, indent
  for word in s:gmatch("%S+") do
    if #line > #indent and #line + 1 + #word > WIDTH then
      lines[#lines + 1] = line
      line = indent .. word
    else
      line = (#line > #indent and line .. " " or line) .. word
    end
  end
  if #line > #indent then lines[#lines + 1] = line end
  return table.concat(lines, "\n")
end

-- The first sentence of a doc: a namespace's one-line summaries.
function help.summary(e)
  local doc = e.doc or ""
  local first = doc:match("^(.-[^%.]%.)%s") or doc
  return first
end

-- The entries directly under a prefix ("nn.": nn.Linear but not nn.init.zeros_;
-- "m:": every module method), in the order of the data.
function help.members(prefix)
  local out = {}
  for _, e in ipairs(load().entries) do
    local rest = e.name:sub(#prefix + 1)
    if e.name:sub(1, #prefix) == prefix and #rest > 0 and not rest:find("[%.:]") then out[#out + 1] = e end
  end
  return out
end

-- One line per entry: its name, then its first sentence cut to the width.
local function summary_lines(list)
  local lines = {}
  local w = 0
  for _, e in ipairs(list) do w = math.max(w, #e.name) end
  w = math.min(w, 34)
  for _, e in ipairs(list) do
    local head = "  " .. e.name .. string.rep(" ", math.max(w - #e.name, 0)) .. "  "
    local summary = help.summary(e)
    if #head + #summary > WIDTH then summary = summary:sub(1, WIDTH - #head - 3) .. "..." end
    lines[#lines + 1] = head .. summary
  end
  return table.concat(lines, "\n")
end

-- The text of one entry, as lt.help prints it.
function help.format(e)
  local out = { e.sig or e.name }
  if e.doc then out[#out + 1] = wrap(e.doc, "  ") end
  if e.opts then out[#out + 1] = wrap("options: " .. e.opts, "  ") end
  if e.ex then
    local ex = e.ex:gsub("\n", "\n           ")
    out[#out + 1] = "  example: " .. ex
  end
  local also = {}
  -- aliases the signature or the text does not show already
  local shown = (e.sig or "") .. " " .. (e.doc or "")
  for _, a in ipairs(e.aliases or {}) do
    if not shown:find(a, 1, true) then also[#also + 1] = a end
  end
  for _, s in ipairs(e.see or {}) do also[#also + 1] = s end
  if #also > 0 then out[#out + 1] = wrap("also: " .. table.concat(also, ", "), "  ") end
  if e.members and e.compact then -- the tensor's hundred methods: names only
    local names = {}
    for i, m in ipairs(help.members(e.members)) do names[i] = m.name:sub(#e.members + 1) end
    out[#out + 1] = ""
    out[#out + 1] = wrap("methods (lt.help(\"t:name\") for one): " .. table.concat(names, ", "), "  ")
  elseif e.members then
    out[#out + 1] = ""
    out[#out + 1] = summary_lines(help.members(e.members))
  end
  return table.concat(out, "\n")
end

local function format_area(area)
  return table.concat({ area.title, wrap(area.intro or "", "  "), "", summary_lines(area.entries) }, "\n")
end

local function overview()
  local out = {
    "lt.help(x) prints the doc of x: a function (lt.randn), a class (nn.Linear), a module, a tensor,",
    "an optimizer, a namespace (lt.nn, F) or a name (\"t:sum\", \"F.relu\", \"sum\"). At the REPL,",
    "?x, x? and help(x) do the same. docs/API.md has every entry. The areas (lt.help(\"Reductions\")",
    "lists one):",
    "",
  }
  for _, area in ipairs(load().areas) do
    out[#out + 1] = string.format("  %-40s %d entries", area.title, #area.entries)
  end
  return table.concat(out, "\n")
end

-- The text for several matches of one name.
local function format_list(list)
  local parts = {}
  for i, e in ipairs(list) do parts[i] = help.format(e) end
  return table.concat(parts, "\n\n")
end

local function no_entry(what)
  local near = type(what) == "string" and closest(what)
  if near then return string.format("lt.help: no entry for '%s' (did you mean '%s'?)", what, near) end
  return string.format("lt.help: no entry for '%s'", tostring(what))
end

-- The text of a name's exact entry (in any spelling), or nil.
local function exact(name)
  local d = load()
  name = trim(name)
  local e = d.by_name[name] or d.by_name[rewritten(name)]
  return e and help.format(e)
end

-- The text of what a name stands for (help.lookup), or nil.
local function by_name(name)
  local found = help.lookup(name)
  if found.area then return format_area(found.area) end
  if #found > 0 then return format_list(found) end
  return nil
end

-- A name made of identifiers, dots and one colon: safe to evaluate (indexing
-- only, no call), as ?x needs for a user's variable (?model).
local function is_name_path(s)
  return s:match("^[%a_][%w_]*[%w_%.:]*$") ~= nil and not s:find("[%.:][%.:]") and not s:find("[%.:]$")
end

-- The value a name path has in the global environment (nil when any part is
-- missing): "model" or "model.fc1"; "x:sum" is x.sum.
local function evaluate(path)
  local v = _G
  for part in path:gsub(":", "."):gmatch("[^%.]+") do
    if type(v) ~= "table" and type(v) ~= "userdata" then return nil end
    local ok, next_v = pcall(function() return v[part] end)
    if not ok then return nil end
    v = next_v
  end
  return v
end

local function instance_class_name(v)
  local mt = getmetatable(v)
  if type(mt) ~= "table" then return nil end
  return rawget(mt, "__name")
end

-- The text for a value: lt's own functions, classes and namespaces by the
-- name the walk gives them; instances by their class.
local function text_of_value(v)
  local lt = lt_table()
  if rawequal(v, lt) then return overview() end
  local name = name_of(v)
  if name then
    return exact(name) or string.format("lt.help: %s has no doc entry yet", name)
  end
  if core.is_tensor(v) then return exact("Tensor") end
  local class = require "lt.class"
  local Module = lt.nn.Module
  local cls = lt.nn.is_module(v) and getmetatable(v).__class or (class.derives(v, Module) and v)
  if cls then
    local cls_name = name_of(cls)
    if cls_name then return exact(cls_name) end
    return string.format("%s is a module class defined outside lt (nn.Module:extend); nn.Module's doc:\n\n%s",
      tostring(rawget(cls, "_name") or "this"), exact("nn.Module"))
  end
  local mt = getmetatable(v)
  if type(mt) == "table" and name_of(mt) then return exact(name_of(mt)) end -- an optimizer or schedule
  local type_name = instance_class_name(v) -- a GradScaler, a DataLoader, a guard
  if type(type_name) ~= "string" then return nil end
  local e = load().by_type[type_name]
  return e and help.format(e) or exact(type_name)
end

-- The doc text of x (see the top of the file), or nil and a message.
function help.text(...)
  if select("#", ...) == 0 then return overview() end
  local x = ...
  if type(x) == "string" then
    -- A documented name first, then what the name holds (a user's model),
    -- then the entries it is the last part of ("sum").
    local name = trim(x)
    local text = exact(name)
    if text then return text end
    if is_name_path(name) then
      local v = evaluate(name)
      if type(v) == "function" or type(v) == "table" or type(v) == "userdata" then
        text = text_of_value(v)
        if text then return text end
      end
    end
    text = by_name(name)
    if text then return text end
    return nil, no_entry(name)
  end
  if x == nil then
    return nil, "lt.help: got nil (an undefined variable?); lt.help(\"name\") looks a name up, lt.help() lists the areas"
  end
  local text = text_of_value(x)
  if text then return text end
  if type(x) == "function" then return nil, "lt.help: no entry for this function (it is not one of lt's)" end
  return nil, string.format("lt.help: no entry for this %s", type(x))
end

-- Prints the doc of x (lt.help's behaviour); returns nothing, so that the
-- REPL does not print it twice.
function help.show(...)
  local text, message = help.text(...)
  io.write(text or message, "\n")
  io.flush()
end

return help
