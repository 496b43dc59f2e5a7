-- The public names of lt, found by walking its tables: what lt.help maps a
-- function back to its name with, and what tests/lua/help_spec.lua holds the
-- docs to (every name found here must have an entry or be listed in
-- lt.help.internal).
--
-- A name is written as a user writes it: "lt.zeros", "lt.memory.stats",
-- "nn.Linear", "F.relu", "optim.SGD", "optim.lr_scheduler.StepLR"; methods
-- with the variable people give the instance: "t:sum" (a tensor), "m:parameters"
-- (a module), "opt:step", "sched:step", "scaler:scale", "loader:iter",
-- "ctx:save_for_backward", "tok:encode". A class's static functions keep its
-- name ("nn.Module:extend", "lt.text.WordPiece.from_file").
-- Names starting with "_" are private and lt.core and lt.recipes are internal:
-- none of them is walked.
local class = require "lt.class"

local walk = {}

-- How a table's path shows: lt.nn.functional is F, lt.nn nn, lt.optim optim.
local SHORT = { ["lt.nn"] = "nn", ["lt.nn.functional"] = "F", ["lt.optim"] = "optim" }
local INTERNAL = { ["lt.core"] = true, ["lt.recipes"] = true }

local function public_keys(t)
  local keys = {}
  for k in pairs(t) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  return keys
end

-- The class families: instances of a class deriving from base are written
-- var; statics maps a class's own functions to how they are called on the
-- class (":" for Module:extend, "." for from_file).
local function families(lt)
  local Scheduler = getmetatable(lt.optim.lr_scheduler.StepLR).__index
  local list = {
    { base = lt.nn.Module, var = "m", statics = { extend = ":", Parameter = ".", is_module = ".", is_parameter = ".",
      keeps_no_handles = "." } },
    { base = lt.optim.Optimizer, var = "opt", statics = { extend = ":", new = ".", new_buffer = "." } },
    { base = Scheduler, var = "sched", statics = { new = ".", normalize = "." } },
    { base = lt.autograd.Function, var = "fn", statics = { extend = ":" } },
  }
  local text = rawget(lt, "text")
  if text then
    list[#list + 1] = { base = text.WordPiece, var = "tok", statics = { new = ".", from_json = ".", from_file = "." } }
  end
  return list
end

-- The keys a table's metatable loads on first use: those of the table its __index reads
-- them from (an upvalue named lazy, lua/lt/namespace.lua). For lt itself, lt.text at least.
function walk.lazy_keys(t)
  local mt = getmetatable(t)
  local index = mt and mt.__index
  local keys = {}
  if type(index) == "function" then
    for i = 1, 16 do
      local name, value = debug.getupvalue(index, i)
      if name == nil then break end
      if name == "lazy" and type(value) == "table" then
        for k in pairs(value) do keys[#keys + 1] = k end
      end
    end
  end
  if #keys == 0 and t == package.loaded.lt then keys[1] = "text" end
  table.sort(keys)
  return keys
end

-- lt and its namespaces with members loaded on first use (lt.optim.lr_scheduler,
-- lt.nn.parallel, lt.memory.summary, ...), each with its path.
local function lazy_tables(lt)
  local list = { { t = lt, path = "lt" } }
  for _, k in ipairs { "optim", "nn", "memory" } do
    local sub = rawget(lt, k)
    if type(sub) == "table" and #walk.lazy_keys(sub) > 0 then list[#list + 1] = { t = sub, path = "lt." .. k } end
  end
  return list
end

-- Which lazily loaded members are loaded now, as one string ("lt.text,lt.optim.RMSprop"):
-- lt.help's map from values to names is built again when it changes.
function walk.lazy_loaded(lt)
  local loaded = {}
  for _, entry in ipairs(lazy_tables(lt)) do
    for _, key in ipairs(walk.lazy_keys(entry.t)) do
      if rawget(entry.t, key) ~= nil then loaded[#loaded + 1] = entry.path .. "." .. key end
    end
  end
  return table.concat(loaded, ",")
end

-- Loads every lazily loaded member (opts.lazy of walk.each).
local function load_lazy(lt)
  for _, entry in ipairs(lazy_tables(lt)) do
    for _, key in ipairs(walk.lazy_keys(entry.t)) do local _ = entry.t[key] end
  end
end

-- A table with no function anywhere inside it (lt.plot.colours, the VGG
-- configurations lt.models.cfgs) is data: a value, not a namespace.
local function has_functions(t, depth)
  depth = depth or 0
  for _, v in pairs(t) do
    if type(v) == "function" then return true end
    if type(v) == "table" and depth < 4 and has_functions(v, depth + 1) then return true end
  end
  return false
end

local function family_of(list, v)
  for _, f in ipairs(list) do
    if class.derives(v, f.base) then return f end
  end
end

-- Objects whose methods live in a metatable no public table holds: made
-- once, cheaply, to reach their methods. Each returns the method table; name
-- is the entry that describes such an object.
local function probes(lt)
  local list = {
    { var = "scaler", name = "lt.amp.GradScaler", methods = function() return getmetatable(lt.amp.GradScaler()) end },
    { var = "loader", name = "lt.data.DataLoader", methods = function()
      local data = lt.zeros(1)
      local mt = getmetatable(lt.data.DataLoader(data))
      data:free()
      return mt
    end },
    { var = "sampler", name = "lt.data.DistributedSampler", methods = function()
      return getmetatable(lt.data.DistributedSampler(1, { num_replicas = 1, rank = 0 }))
    end },
    { var = "zero", name = "optim.ZeroRedundancyOptimizer", methods = function()
      local p = lt.zeros(1, { requires_grad = true })
      local alone = { is_initialized = function() return true end, get_rank = function() return 0 end,
        get_world_size = function() return 1 end } -- no process group needed to reach the methods
      local mt = getmetatable(lt.optim.ZeroRedundancyOptimizer({ p }, lt.optim.SGD, { lr = 1, process_group = alone }))
      p:free()
      return mt
    end },
    { var = "hook", name = "t:register_post_accumulate_grad_hook", methods = function()
      local p = lt.zeros(1, { requires_grad = true })
      local handle = p:register_post_accumulate_grad_hook(function() end)
      handle:remove()
      return getmetatable(handle)
    end },
    { var = "ctx", name = "lt.autograd.Function", methods = function()
      local Probe = lt.autograd.Function:extend("HelpProbe")
      local found
      function Probe.forward(ctx) found = getmetatable(ctx) end
      function Probe.backward() end
      Probe.apply()
      return found
    end },
  }
  if rawget(lt, "progress") then
    list[#list + 1] = { var = "bar", name = "lt.progress.new", methods = function()
      return getmetatable(lt.progress.new(1, { out = io.stdout, tty = false }))
    end }
  end
  return list
end

-- Calls visit(name, value, kind) for every public name, in a fixed order:
-- lt's namespaces first (so that a function found under two names is named
-- by the first, lt.matmul before t:matmul), then the class families' bases
-- (their inherited methods: sched:step), then probed instances. kind is
-- "namespace", "class", "function", "method", "value" or "instance" (a
-- probed object's metatable, under its maker's name). What lt loads on
-- first use (lt.text, lt.progress, ...) is walked once loaded; opts.lazy
-- loads it all first.
function walk.each(lt, visit, opts)
  opts = opts or {}
  if opts.lazy then load_lazy(lt) end
  local fams = families(lt)
  local seen = {}

  local function walk_class(cls, path, fam)
    visit(path, cls, "class")
    if seen[cls] then return end
    seen[cls] = true
    for _, k in ipairs(public_keys(cls)) do
      local v = rawget(cls, k)
      if type(v) == "function" then
        local sep = fam.statics[k]
        if sep then visit(path .. sep .. k, v, "function") else visit(fam.var .. ":" .. k, v, "method") end
      end
    end
  end

  -- path: the table's full name (lt.nn.init); shown: as a user writes it (nn.init).
  local function walk_table(t, path, shown)
    visit(shown, t, "namespace")
    if seen[t] then return end
    seen[t] = true
    local keys = public_keys(t)
    if path == "lt" then -- the tensor methods last: lt.matmul and F.softmax keep those names
      for i, k in ipairs(keys) do
        if k == "Tensor" then table.remove(keys, i); keys[#keys + 1] = k; break end
      end
    end
    for _, k in ipairs(keys) do
      local v = rawget(t, k)
      local full = path .. "." .. k
      local name = SHORT[full] or (shown .. "." .. k)
      if not INTERNAL[full] then
        local fam = type(v) == "table" and family_of(fams, v)
        if path == "lt.Tensor" then
          if type(v) == "function" then visit("t:" .. k, v, "method") end
        elseif fam then
          walk_class(v, name, fam)
        elseif type(v) == "table" and has_functions(v) then
          walk_table(v, full, name)
        else
          visit(name, v, type(v) == "function" and "function" or "value")
        end
      end
    end
  end

  walk_table(lt, "lt", "lt")
  for _, fam in ipairs(fams) do
    if not seen[fam.base] then
      for _, k in ipairs(public_keys(fam.base)) do
        local v = rawget(fam.base, k)
        if type(v) == "function" and not fam.statics[k] then visit(fam.var .. ":" .. k, v, "method") end
      end
      seen[fam.base] = true
    end
  end
  for _, probe in ipairs(probes(lt)) do
    local mt = probe.methods()
    if mt and not seen[mt] then
      seen[mt] = true
      visit(probe.name, mt, "instance") -- an object's metatable names what it is
      for _, k in ipairs(public_keys(mt)) do
        local v = rawget(mt, k)
        if type(v) == "function" then visit(probe.var .. ":" .. k, v, "method") end
      end
    end
  end
end

-- Every public name once, as a list of {name =, value =, kind =} in walk order.
function walk.names(lt, opts)
  local list, seen = {}, {}
  walk.each(lt, function(name, value, kind)
    if not seen[name] then
      seen[name] = true
      list[#list + 1] = { name = name, value = value, kind = kind }
    end
  end, opts)
  return list
end

return walk
