-- nn.Module: the base of every layer and model, after torch.nn.Module.
--
--   local Block = nn.Module:extend("Block")
--   function Block:init(n) self.fc = nn.Linear(n, n) end
--   function Block:forward(x) return self.fc(x) end
--   local m = Block(10); local y = m(x)
--
-- Assigning a tensor made by nn.Parameter registers a parameter, assigning a
-- module registers a child, m:register_buffer(name, t) registers a buffer;
-- each kind keeps its registration order. They live in three ordered slot
-- tables (_parameters, _buffers, _modules) rather than in the instance, so
-- that every assignment reaches __newindex and reads find them through
-- __index. Other values are plain fields of the instance.
--
-- Names (named_parameters, state_dict, files) are PyTorch's exactly, a
-- container's children numbered from 0 ("0.weight", "layers.0.fc.bias")
-- while Lua indexing stays 1-based (seq[1] holds "0.*"), so checkpoints
-- interchange with PyTorch and Hugging Face without renaming, and
-- load_state_dict(sd, {strict=false}) returns {missing_keys=, unexpected_keys=}
-- and names them on stderr unless {quiet=true}.
local class = require "lt.class"
local core = require "lt.core"
local shapes = require "lt.shapes"
local raise = require "lt.user_error"
local methods = require "lt.methods"
local not_applied = require "lt.not_applied"
local options = require "lt.nn.options"

local is_tensor = core.is_tensor
local set_category = core.memory.set_category
local set_data = core._set_data
local zero_grads = core._zero_grads
local grad_of = core._grad

local Module = {}

-- ---- parameters ----

-- Tensors that nn.Parameter marked. Weak keys: marking keeps nothing alive.
local parameter_set = setmetatable({}, { __mode = "k" })

-- nn.Parameter(t, requires_grad=true): t itself (a leaf; a non-leaf is
-- detached first, sharing its storage), now requiring grad and counted as
-- parameter memory. Assigning it to a module field registers it.
local function Parameter(t, requires_grad)
  if not is_tensor(t) then raise("Parameter: expected a tensor, got " .. type(t)) end
  if not t.is_leaf then t = t:detach() end
  t:requires_grad_(requires_grad ~= false)
  set_category(t, "parameter")
  parameter_set[t] = true
  return t
end

local function is_parameter(t)
  return parameter_set[t] == true
end

-- ---- ordered slots ----

local function new_slots()
  return { names = {}, values = {}, has = {} }
end

local function slot_set(slots, name, value)
  if not slots.has[name] then
    slots.has[name] = true
    slots.names[#slots.names + 1] = name
  end
  slots.values[name] = value
end

local function slot_remove(slots, name)
  if not slots.has[name] then return end
  slots.has[name] = nil
  slots.values[name] = nil
  for i, n in ipairs(slots.names) do
    if n == name then
      table.remove(slots.names, i)
      break
    end
  end
end

-- ---- classes and instances ----

local function is_module(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__lt_module") == true
end

local function class_name(m)
  return getmetatable(m).__name
end

-- Slot names are strings; integer keys name the same slots. A container
-- (its class sets _children_from_zero) holds its k-th child under PyTorch's
-- name k-1, so that seq[1] is the child named "0" and state_dict names match
-- PyTorch checkpoints; any other module's m[1] is simply the slot "1".
local function key_name(cls, k)
  if math.type(k) == "integer" then
    return tostring(cls._children_from_zero and k - 1 or k)
  end
  return k
end

-- A slot may not hide a method: m.train = nn.Linear(...) would make
-- m:train() call the Linear.
local function check_slot_name(self, name)
  if type(getmetatable(self).__class[name]) == "function" then
    raise(string.format("%s: cannot register '%s': it is the name of a method", class_name(self), name))
  end
end

local function assign(self, k, v)
  local name = key_name(getmetatable(self).__class, k)
  local params, buffers, modules = self._parameters, self._buffers, self._modules
  if is_tensor(v) and is_parameter(v) then
    check_slot_name(self, name)
    slot_remove(buffers, name)
    slot_remove(modules, name)
    slot_set(params, name, v)
  elseif is_module(v) then
    check_slot_name(self, name)
    slot_remove(params, name)
    slot_remove(buffers, name)
    slot_set(modules, name, v)
  elseif params.has[name] then
    if v ~= nil then
      raise(string.format("%s: cannot assign a %s as parameter '%s' (nn.Parameter or nil expected)",
        class_name(self), is_tensor(v) and "plain tensor" or type(v), name))
    end
    params.values[name] = nil
  elseif buffers.has[name] then
    if v ~= nil and not is_tensor(v) then
      raise(string.format("%s: cannot assign a %s as buffer '%s' (a tensor or nil expected)",
        class_name(self), type(v), name))
    end
    buffers.values[name] = v
  elseif modules.has[name] then
    if v ~= nil then
      raise(string.format("%s: cannot assign a %s as child module '%s' (a module or nil expected)",
        class_name(self), type(v), name))
    end
    modules.values[name] = nil
  else
    rawset(self, k, v)
  end
end

-- Every module's __call: not a tail call, so that its frame stays on the
-- stack while forward runs; lt.user_where finds it there and recovers the line
-- of a forward that ended in a tail call (`return self.fc(x)`).
local function pass(...) return ... end
local function call_forward(self, ...) return pass(self:forward(...)) end
require("lt.user_where").set_forward_caller(call_forward)

local function instance_metatable(cls, name)
  local mt = { __lt_module = true, __name = name, __class = cls }
  mt.__index = function(self, k)
    local name_k = key_name(cls, k)
    local v = self._parameters.values[name_k]
    if v ~= nil then return v end
    v = self._buffers.values[name_k]
    if v ~= nil then return v end
    v = self._modules.values[name_k]
    if v ~= nil then return v end
    return cls[k]
  end
  mt.__newindex = assign
  mt.__call = call_forward
  mt.__tostring = function(self) return self:repr() end
  mt.__len = function(self) return self:length() end
  return mt
end

local function construct(cls, ...)
  local mt = rawget(cls, "_instance_mt")
  local self = setmetatable({
    _parameters = new_slots(),
    _buffers = new_slots(),
    _modules = new_slots(),
    _non_persistent = {},
    training = true,
  }, mt)
  self:init(...)
  return self
end

local function class_tostring(cls)
  return "nn." .. rawget(cls, "_name")
end

-- Torch7 names a module's constructor __init, lt init: a class that
-- defines __init gets it as its init (unless it has one), with a note on
-- stderr, instead of a constructor that is never called and a model
-- without parameters.
local function torch7_init(class, newindex)
  return function(cls, name, value)
    if name == "__init" and type(value) == "function" and rawget(cls, "init") == nil then
      io.stderr:write(("lt: %s:__init is Torch7's name for the constructor; lt calls %s:init, "
        .. "and uses this __init as it\n"):format(class, class))
      newindex(cls, "init", value)
    end
    newindex(cls, name, value)
  end
end

-- A subclass: Module:extend("Block"), Linear:extend("MyLinear"), ...
function Module:extend(name)
  if type(name) ~= "string" then raise("extend: expected a class name, got " .. type(name)) end
  local cls = class.extend(self, name, { call = construct, tostring = class_tostring, own_instances = true,
    newindex = torch7_init(name, methods.guarding_newindex(name, "a module", "m", is_module)) })
  cls._name = name
  cls._instance_mt = instance_metatable(cls, name)
  return cls
end

Module._name = "Module"
Module._instance_mt = instance_metatable(Module, "Module")
setmetatable(Module, { __call = construct, __tostring = class_tostring })

function Module.is_module(v) return is_module(v) end

-- Marks a class whose forward keeps no reference to the handles it takes or
-- returns; keeps_no_handles(m) asks it of a module's own class (not of the
-- classes it derives from).
function Module.keeps_no_handles(cls_or_module)
  if is_module(cls_or_module) then
    return rawget(getmetatable(cls_or_module).__class, "_keeps_no_handles") == true
  end
  rawset(cls_or_module, "_keeps_no_handles", true)
end
Module.Parameter = Parameter
Module.is_parameter = is_parameter

-- ---- defaults a subclass overrides ----

function Module:init() end

function Module:forward()
  raise(class_name(self) .. ": forward is not implemented")
end

-- One line of options for tostring (PyTorch's extra_repr).
function Module:extra_repr() return "" end

function Module:length()
  raise("attempt to get the length of a " .. class_name(self) .. " module")
end

-- ---- registration ----

function Module:register_parameter(name, t)
  if t ~= nil and not is_tensor(t) then
    raise(string.format("register_parameter: expected a tensor or nil for '%s', got %s", name, type(t)))
  end
  check_slot_name(self, name)
  slot_remove(self._buffers, name)
  slot_remove(self._modules, name)
  if t ~= nil and not is_parameter(t) then t = Parameter(t) end
  slot_set(self._parameters, name, t)
end

-- A tensor that is part of the module's state but not trained (running
-- statistics). persistent=false keeps it out of state_dict.
function Module:register_buffer(name, t, persistent)
  if type(name) ~= "string" then raise("register_buffer: expected a name, got " .. type(name)) end
  if t ~= nil and not is_tensor(t) then
    raise(string.format("register_buffer: expected a tensor or nil for '%s', got %s", name, type(t)))
  end
  if self._parameters.has[name] or self._modules.has[name] then
    raise(string.format("register_buffer: '%s' is already a parameter or a child module", name))
  end
  check_slot_name(self, name)
  slot_set(self._buffers, name, t)
  self._non_persistent[name] = persistent == false or nil
end

function Module:add_module(name, m)
  if m ~= nil and not is_module(m) then
    raise(string.format("add_module: expected a module or nil for '%s', got %s", tostring(name), type(m)))
  end
  name = key_name(getmetatable(self).__class, name)
  check_slot_name(self, name)
  slot_remove(self._parameters, name)
  slot_remove(self._buffers, name)
  slot_set(self._modules, name, m)
end
Module.register_module = Module.add_module

-- ---- traversal ----
-- The named_* methods return iterators (for name, value in m:named_parameters()
-- do ... end), the plain ones lists; each tensor and module appears once.

local function list_iterator(pairs_list)
  local i = 0
  return function()
    i = i + 1
    local pair = pairs_list[i]
    if pair then return pair[1], pair[2] end
  end
end

-- {prefix.name, module} for self and every descendant, pre-order.
local function collect_modules(m, prefix, out, seen)
  if seen[m] then return out end
  seen[m] = true
  out[#out + 1] = { prefix, m }
  for _, name in ipairs(m._modules.names) do
    local child = m._modules.values[name]
    if child ~= nil then
      collect_modules(child, prefix == "" and name or prefix .. "." .. name, out, seen)
    end
  end
  return out
end

-- {dotted name, tensor} of one slot kind over the tree; dedupe drops a
-- tensor already listed (shared weights), as PyTorch does.
local function collect_tensors(m, kind, recurse, dedupe, persistent_only)
  local out, seen = {}, {}
  local tree = recurse and collect_modules(m, "", {}, {}) or { { "", m } }
  for _, entry in ipairs(tree) do
    local prefix, mod = entry[1], entry[2]
    local slots = mod[kind]
    for _, name in ipairs(slots.names) do
      local t = slots.values[name]
      if t ~= nil and not (dedupe and seen[t]) and not (persistent_only and mod._non_persistent[name]) then
        seen[t] = true
        out[#out + 1] = { prefix == "" and name or prefix .. "." .. name, t }
      end
    end
  end
  return out
end

local function values_of(pairs_list)
  local out = {}
  for i, pair in ipairs(pairs_list) do out[i] = pair[2] end
  return out
end

function Module:named_parameters(recurse)
  return list_iterator(collect_tensors(self, "_parameters", recurse ~= false, true))
end

function Module:parameters(recurse)
  return values_of(collect_tensors(self, "_parameters", recurse ~= false, true))
end

function Module:named_buffers(recurse)
  return list_iterator(collect_tensors(self, "_buffers", recurse ~= false, true))
end

function Module:buffers(recurse)
  return values_of(collect_tensors(self, "_buffers", recurse ~= false, true))
end

local function direct_children(m)
  local out, seen = {}, {}
  for _, name in ipairs(m._modules.names) do
    local child = m._modules.values[name]
    if child ~= nil and not seen[child] then
      seen[child] = true
      out[#out + 1] = { name, child }
    end
  end
  return out
end

function Module:named_children()
  return list_iterator(direct_children(self))
end

function Module:children()
  return values_of(direct_children(self))
end

-- self first (named ""), then every descendant, pre-order.
function Module:named_modules()
  return list_iterator(collect_modules(self, "", {}, {}))
end

function Module:modules()
  return values_of(collect_modules(self, "", {}, {}))
end

-- fn(m) for every descendant and then self (children first, as PyTorch).
function Module:apply(fn)
  for _, child in ipairs(self:children()) do child:apply(fn) end
  fn(self)
  return self
end

function Module:num_parameters(opts)
  local trainable_only = type(opts) == "table" and opts.trainable_only
  local n = 0
  for _, p in ipairs(self:parameters()) do
    if not trainable_only or p.requires_grad then n = n + p:numel() end
  end
  return n
end

-- ---- modes ----

function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then raise("train: expected a boolean, got " .. type(mode)) end
  for _, m in ipairs(self:modules()) do rawset(m, "training", mode) end
  return self
end

function Module:eval()
  return self:train(false)
end

function Module:requires_grad_(on)
  for _, p in ipairs(self:parameters()) do p:requires_grad_(on ~= false) end
  return self
end

-- Gradients to nil (default; frees their memory) or zero-filled with
-- {set_to_none=false}; in C, with no handle made for any gradient.
function Module:zero_grad(opts)
  local set_to_none = not (type(opts) == "table" and opts.set_to_none == false)
  zero_grads(self:parameters(), set_to_none)
  return self
end

-- ---- conversion ----

local DEVICE_PATTERN = "^cuda"

local function parse_to_args(a, b)
  local dtype, device
  local function take(v)
    if v == nil then return end
    if is_tensor(v) then
      dtype, device = v.dtype, v.device
    elseif type(v) == "table" then
      for k in pairs(v) do
        if k ~= "dtype" and k ~= "device" then options.unknown("to", k, { dtype = true, device = true }) end
      end
      dtype, device = v.dtype or dtype, v.device or device
    elseif type(v) == "string" then
      if v == "cpu" or v:match(DEVICE_PATTERN) then device = v else dtype = v end
    else
      raise("to: expected a dtype, a device, a tensor or an options table, got " .. type(v))
    end
  end
  take(a)
  take(b)
  return dtype, device
end

local FLOATING = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
local DTYPE_ALIASES = { float = "float32", double = "float64", half = "float16" }

-- t converted to device and (if t is floating) dtype; t itself when unchanged.
local function convert(t, dtype, device)
  local out = t
  if device ~= nil then out = out:to(device) end
  if dtype ~= nil and FLOATING[out.dtype] and out.dtype ~= dtype then out = out:to(dtype) end
  return out
end

-- Converts parameters and buffers in place; a tensor shared by several
-- modules is converted once and stays shared. A parameter stays the same Lua
-- value (its handle takes the converted tensor, as PyTorch's param.data =),
-- keeping requires_grad, the parameter mark and its gradient (converted), so
-- that an optimizer made before to("cuda") still steps the model's
-- parameters. Buffers are replaced in their slots. Everything is converted
-- before anything is swapped in: a conversion that fails (out of memory on
-- the target device) leaves the whole module as it was, at the price of
-- holding both copies until the swap.
function Module:to(a, b)
  local dtype, device = parse_to_args(a, b)
  dtype = DTYPE_ALIASES[dtype] or dtype
  if dtype ~= nil and not FLOATING[dtype] then
    raise("to: modules convert only to floating dtypes (float32, float64, float16, bfloat16), got "
      .. tostring(dtype))
  end
  local done, params, made = {}, {}, {}
  local function converted(t)
    local new = convert(t, dtype, device)
    if not rawequal(new, t) then made[#made + 1] = new end
    return new
  end
  local modules = self:modules()
  local ok, err = pcall(function()
    for _, m in ipairs(modules) do
      local values = m._parameters.values
      for _, name in ipairs(m._parameters.names) do
        local p = values[name]
        if p ~= nil and done[p] == nil then
          local data = p:detach()
          local new = converted(data)
          if not rawequal(new, data) then
            -- Not p.grad: that handle would stay cached on p and hold the
            -- old gradient until collected.
            local grad = grad_of(p)
            local new_grad = grad ~= nil and converted(grad) or nil
            if grad ~= nil and not rawequal(new_grad, grad) then grad:free() end
            params[#params + 1] = { p, new, new_grad }
          end
          done[p] = p
        end
      end
      for _, name in ipairs(m._buffers.names) do
        local t = m._buffers.values[name]
        if t ~= nil and done[t] == nil then done[t] = converted(t) end
      end
    end
  end)
  if not ok then
    for _, t in ipairs(made) do t:free() end
    raise(not_applied("to", err, "the module was not changed"))
  end
  for _, entry in ipairs(params) do
    local p, new, grad = entry[1], entry[2], entry[3]
    local requires_grad = p.requires_grad
    set_data(p, new)
    p:requires_grad_(requires_grad)
    set_category(p, "parameter")
    if grad ~= nil then p.grad = grad end
  end
  for _, m in ipairs(modules) do
    local values = m._buffers.values
    for _, name in ipairs(m._buffers.names) do
      local t = values[name]
      if t ~= nil then values[name] = done[t] end
    end
  end
  return self
end

function Module:half() return self:to("float16") end
function Module:float() return self:to("float32") end
function Module:double() return self:to("float64") end
function Module:bfloat16() return self:to("bfloat16") end
function Module:cpu() return self:to("cpu") end
function Module:cuda(index) return self:to(index and ("cuda:" .. index) or "cuda") end

-- ---- state ----

-- Parameters and persistent buffers by dotted name, detached (they share
-- storage with the module, as PyTorch's state_dict does: clone to keep).
function Module:state_dict()
  local sd = {}
  for _, pair in ipairs(collect_tensors(self, "_parameters", true, false)) do sd[pair[1]] = pair[2]:detach() end
  for _, pair in ipairs(collect_tensors(self, "_buffers", true, false, true)) do sd[pair[1]] = pair[2]:detach() end
  return sd
end

local shape_text, same_shape = shapes.text, shapes.equal

-- A key list for a message: the first few, then how many more, so that a
-- model with hundreds of mismatched keys still gets a readable line.
local SHOWN_KEYS = 8
local function key_list(keys)
  if #keys <= SHOWN_KEYS then return table.concat(keys, ", ") end
  return table.concat(keys, ", ", 1, SHOWN_KEYS) .. string.format(", ... (%d more)", #keys - SHOWN_KEYS)
end

-- name with every numeric component one higher: "layer.0.fc.weight" ->
-- "layer.1.fc.weight".
local function shifted_up(name)
  return (("." .. name .. "."):gsub("%.(%d+)%f[.]", function(n) return "." .. (tonumber(n) + 1) end)
    :sub(2, -2))
end

-- A hint when the keys are one position off: every missing key appears
-- among the unexpected ones with its numbers one higher, as in a file
-- written by lt before its names numbered container children from 0.
local function off_by_one_hint(missing, unexpected)
  if #missing == 0 or #unexpected == 0 then return nil end
  local offered = {}
  for _, name in ipairs(unexpected) do offered[name] = true end
  for _, name in ipairs(missing) do
    local up = shifted_up(name)
    if up == name or not offered[up] then return nil end
  end
  return "the keys are one position off: the file numbers container children from 1, as lt did "
    .. "before it took PyTorch's names (from 0); renumber its keys n -> n-1"
end

local LOAD_DEFAULTS = { strict = true, quiet = false }

-- Copies sd's tensors into the parameters and buffers in place, by
-- PyTorch's names (so a PyTorch or Hugging Face checkpoint loads as it is).
-- Every problem is gathered into one error before anything is copied:
-- missing and unexpected keys (with strict, the default) and shape
-- mismatches (always), so a failed load leaves the module as it was.
-- Returns {missing_keys=, unexpected_keys=}; with {strict=false} these are
-- also printed on stderr in one line, unless {quiet=true}: a non-strict load
-- that matched nothing would otherwise go unnoticed.
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then raise("load_state_dict: expected a table of tensors, got " .. type(sd)) end
  opts = options.read("load_state_dict", opts, LOAD_DEFAULTS)
  local strict = opts.strict
  local own = collect_tensors(self, "_parameters", true, false)
  for _, pair in ipairs(collect_tensors(self, "_buffers", true, false, true)) do own[#own + 1] = pair end
  local known, missing, unexpected, problems = {}, {}, {}, {}
  for _, pair in ipairs(own) do
    local name, t = pair[1], pair[2]
    known[name] = true
    local v = sd[name]
    if v == nil then
      missing[#missing + 1] = name
    elseif not is_tensor(v) then
      problems[#problems + 1] = string.format("%s is a %s, expected a tensor", name, type(v))
    elseif not same_shape(v.shape, t.shape) then
      problems[#problems + 1] = string.format("shape mismatch for %s: expected %s, got %s", name,
        shape_text(t.shape), shape_text(v.shape))
    end
  end
  for name in pairs(sd) do
    if not known[name] then unexpected[#unexpected + 1] = tostring(name) end
  end
  table.sort(unexpected)
  local hint = off_by_one_hint(missing, unexpected)
  local parts = {}
  if strict and #missing > 0 then parts[#parts + 1] = "missing keys: " .. table.concat(missing, ", ") end
  if strict and #unexpected > 0 then parts[#parts + 1] = "unexpected keys: " .. table.concat(unexpected, ", ") end
  for _, p in ipairs(problems) do parts[#parts + 1] = p end
  if strict and hint and #parts > 0 then parts[#parts + 1] = hint end
  if #parts > 0 then raise("load_state_dict: " .. table.concat(parts, "; ")) end
  -- A value of another dtype or device is converted before the first copy,
  -- so that what can fail (allocating the converted copies) fails with the
  -- module unchanged; a copy between tensors of one dtype and device
  -- allocates nothing.
  local sources, made = {}, {}
  local ok, err = pcall(function()
    for i, pair in ipairs(own) do
      local v, t = sd[pair[1]], pair[2]
      if v ~= nil then
        local src = v
        if src.device ~= t.device then src = src:to(t.device) end
        if src.dtype ~= t.dtype then src = src:to(t.dtype) end
        if not rawequal(src, v) then made[#made + 1] = src end
        sources[i] = src
      end
    end
  end)
  if not ok then
    for _, t in ipairs(made) do t:free() end
    raise(not_applied("load_state_dict", err, "nothing was loaded"))
  end
  for i, pair in ipairs(own) do
    -- detach: an in-place write into a leaf that requires grad must not be
    -- recorded (PyTorch copies under no_grad).
    if sources[i] ~= nil then pair[2]:detach():copy_(sources[i]) end
  end
  if not strict and not opts.quiet and (#missing > 0 or #unexpected > 0) then
    local said = {}
    if #missing > 0 then said[#said + 1] = #missing .. " missing (" .. key_list(missing) .. ")" end
    if #unexpected > 0 then said[#said + 1] = #unexpected .. " unexpected (" .. key_list(unexpected) .. ")" end
    if hint then said[#said + 1] = hint end
    io.stderr:write("lt: load_state_dict(strict=false): keys ", table.concat(said, "; "), "\n")
  end
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- ---- printing ----

-- PyTorch's _addindent: every line but the first indented.
local function indent(s, spaces)
  local pad = string.rep(" ", spaces)
  return (s:gsub("\n", "\n" .. pad))
end

-- The module tree as PyTorch prints it.
function Module:repr()
  local lines = {}
  local extra = self:extra_repr()
  local extra_lines = {}
  if extra ~= nil and extra ~= "" then
    for line in (extra .. "\n"):gmatch("(.-)\n") do extra_lines[#extra_lines + 1] = line end
  end
  for _, l in ipairs(extra_lines) do lines[#lines + 1] = l end
  local has_children = false
  for _, name in ipairs(self._modules.names) do
    local child = self._modules.values[name]
    if child ~= nil then
      has_children = true
      lines[#lines + 1] = "(" .. name .. "): " .. indent(child:repr(), 2)
    end
  end
  local s = class_name(self) .. "("
  if #extra_lines == 1 and not has_children then
    s = s .. extra_lines[1]
  elseif #lines > 0 then
    s = s .. "\n  " .. table.concat(lines, "\n  ") .. "\n"
  end
  return s .. ")"
end

-- m.forward(x) with a dot: a clear error, not one from inside these files.
-- Subclasses' methods are guarded as they are defined (extend's __newindex).
methods.guard(Module, "Module", "a module", "m", is_module,
  { extend = true, is_module = true, Parameter = true, is_parameter = true, keeps_no_handles = true })

return Module
