-- docs/API.md from lt.help's data: scripts/gen_api_doc.lua writes it, and
-- tests/lua/help_spec.lua fails when the committed file differs from what
-- this returns. Deterministic: areas and entries in the data's order.
local help = require "lt.help"

-- GitHub's heading anchors: lower case, punctuation dropped, spaces to "-".
local function slug(title)
  return (title:lower():gsub("[^%w%s%-_]", ""):gsub("%s", "-"))
end

-- Prose with "<" escaped outside `code` spans (Markdown would take
-- "<cycle>" for an HTML tag).
local function prose(s)
  local out = {}
  local pos = 1
  while pos <= #s do
    local a, b = s:find("`[^`]*`", pos)
    if not a then
      out[#out + 1] = s:sub(pos):gsub("<", "&lt;")
      break
    end
    out[#out + 1] = s:sub(pos, a - 1):gsub("<", "&lt;")
    out[#out + 1] = s:sub(a, b)
    pos = b + 1
  end
  return table.concat(out)
end

local function code_list(names)
  local out = {}
  for i, n in ipairs(names) do out[i] = "`" .. n .. "`" end
  return table.concat(out, ", ")
end

local function entry(e)
  local out = { "### `" .. e.name .. "`", "", "`" .. (e.sig or e.name) .. "`", "" }
  if e.doc then out[#out + 1] = prose(e.doc); out[#out + 1] = "" end
  if e.opts then out[#out + 1] = "Options: " .. prose(e.opts); out[#out + 1] = "" end
  if e.ex then
    out[#out + 1] = "```lua"
    out[#out + 1] = e.ex
    out[#out + 1] = "```"
    out[#out + 1] = ""
  end
  local also = {}
  for _, a in ipairs(e.aliases or {}) do also[#also + 1] = a end
  for _, s in ipairs(e.see or {}) do also[#also + 1] = s end
  if #also > 0 then
    out[#out + 1] = "Also: " .. code_list(also)
    out[#out + 1] = ""
  end
  return table.concat(out, "\n")
end

return function()
  local areas = help.areas()
  local out = {
    "# lt API reference",
    "",
    "Generated from the docs in `lua/lt/help/` by `lt scripts/gen_api_doc.lua > docs/API.md`; do not edit "
      .. "it by hand (`tests/lua/help_spec.lua` fails when it is stale). The same entries print at the REPL "
      .. "with `?name` or `name?`, and anywhere with `lt.help(x)` (x a function, class, module, tensor, "
      .. "namespace or name).",
    "",
    "Every index, dimension and class label is 1-based and -1 is the last; keyword arguments are an options "
      .. "table. Methods are written with the variable people give the object: `t` a tensor, `m` a module, "
      .. "`opt` an optimizer, `sched` a learning-rate schedule, `scaler` a GradScaler, `loader` a DataLoader, "
      .. "`tok` a tokenizer; `F` is `lt.nn.functional`. The examples assume this setup (the spec runs each "
      .. "after it):",
    "",
    "```lua",
    (require("lt.help.setup"):gsub("\n$", "")),
    "```",
    "",
    "## Contents",
    "",
  }
  for i, area in ipairs(areas) do
    out[#out + 1] = string.format("%d. [%s](#%s) (%d)", i, area.title, slug(area.title), #area.entries)
  end
  out[#out + 1] = ""
  for _, area in ipairs(areas) do
    out[#out + 1] = "## " .. area.title
    out[#out + 1] = ""
    if area.intro then
      out[#out + 1] = prose(area.intro)
      out[#out + 1] = ""
    end
    local names = {}
    for i, e in ipairs(area.entries) do names[i] = "`" .. e.name .. "`" end
    out[#out + 1] = "Entries: " .. table.concat(names, ", ")
    out[#out + 1] = ""
    for _, e in ipairs(area.entries) do out[#out + 1] = entry(e) end
  end
  return (table.concat(out, "\n"):gsub("\n+$", "\n"))
end
