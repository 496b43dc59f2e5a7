-- Every memory-saving technique, measured: each runs without and with the
-- technique on the Fashion CNN and a deep MLP (batch 64, random data), and
-- the allocator's exact figures (lt.memory.max_allocated, reserved) give
-- the peak of each run and the saving. The measuring code is
-- lua/lt/recipes/memory_tricks.lua, which the specs check as well.
--   lt scripts/memory_tricks.lua [--markdown] [--only ID]
--   lt scripts/memory_tricks.lua --help
local lt = lt or require "lt"
local cli, tricks = require "lt.recipes.cli", require "lt.recipes.memory_tricks"

-- The ids in the table's order, for --help and for a mistaken --only.
local ids = {}
for i, t in ipairs(tricks.techniques) do ids[i] = t.id end

local opts = cli.parse(arg, {
  {"markdown", false, "print the table in Markdown (the README's)"},
  {"only", "", "measure one technique only: " .. table.concat(ids, ", "), arg = "ID"},
}, "scripts/memory_tricks.lua")

-- One thread: the figures do not depend on it, and the runs stay comparable.
lt.set_num_threads(1)

local only
if opts.only ~= "" then
  local t = tricks.techniques[opts.only]
  if not t then
    cli.usage_error(("scripts/memory_tricks.lua: unknown technique '%s'; --only takes one of: %s")
      :format(opts.only, table.concat(ids, ", ")))
  end
  only = { t }
end
local rows = tricks.measure_all(only)
print(opts.markdown and tricks.format_markdown(rows) or tricks.format_text(rows))
