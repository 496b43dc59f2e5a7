-- The optimizer base: parameter groups, lazily allocated state, zero_grad,
-- state_dict/load_state_dict and state_bytes. A concrete optimizer (sgd.lua,
-- adam.lua) supplies its defaults, its option checks, the names of its state
-- buffers and the three parts of a step (see Optimizer:step): prepare(params,
-- group, made), the engine call's arguments for a list of parameters on one
-- device (any new state buffer appended to made, nothing stored yet);
-- run(calls), one engine call for all the lists, which changes nothing when
-- it fails; commit(call), which stores the new buffers and step counts.
local class = require "lt.class"
local core = require "lt.core"
local shapes = require "lt.shapes"
local raise = require "lt.user_error"
local options_reader = require "lt.nn.options"
local by_device = require "lt.by_device"
local methods = require "lt.methods"
local not_applied = require "lt.not_applied"
local estimate = require "lt.memory_estimate"

local set_category = core.memory.set_category
local is_tensor = core.is_tensor
local has_grad = core._optim.has_grad
local zero_grads = core._zero_grads

local Optimizer = {}
Optimizer.__index = Optimizer
Optimizer.name = "Optimizer"

-- The default of an option the user must give (SGD's lr, as PyTorch's `required`).
Optimizer.required = setmetatable({}, { __tostring = function() return "<required>" end })

local shape_text, same_shape = shapes.text, shapes.equal

-- A zero-filled (or, with fill false, uninitialised) buffer like p, counted
-- as optimizer memory.
function Optimizer.new_buffer(p, fill)
  local make = fill == false and core.empty or core.zeros
  return set_category(make(p.shape, { dtype = p.dtype, device = p.device }), "optimizer")
end

-- Defines a concrete optimizer: Optimizer:extend("SGD", defaults) gives a
-- class whose call constructs, as optim.SGD(params, options).
function Optimizer:extend(name, defaults)
  local cls = class.extend(self, name, {
    call = function(cls, ...) return cls.new(cls, ...) end,
    newindex = methods.guarding_newindex(name, "an optimizer", "opt", methods.instance_of(Optimizer)),
  })
  cls.name = name
  cls.defaults = defaults
  cls.__tostring = function(opt) return opt:describe() end
  return cls
end

-- Raises "<name>: message" at the caller of the public method.
function Optimizer:fail(fmt, ...)
  raise(self.name .. ": " .. string.format(fmt, ...))
end

local function check_options(cls, options)
  if options == nil then return {} end
  if type(options) ~= "table" then
    raise(string.format("%s: expected an options table, got %s", cls.name, type(options)))
  end
  for key in pairs(options) do
    if key ~= "params" and cls.defaults[key] == nil then options_reader.unknown(cls.name, key, cls.defaults) end
  end
  return options
end

function Optimizer.new(cls, params, options)
  options = check_options(cls, options)
  local self = setmetatable({ param_groups = {}, state = {} }, cls)
  -- Constructor options become the defaults of every group.
  local defaults = {}
  for key, value in pairs(cls.defaults) do defaults[key] = value end
  for key, value in pairs(options) do defaults[key] = value end
  self.options = defaults
  if type(params) ~= "table" then
    raise(string.format("%s: expected a list of tensors or of parameter groups, got %s", cls.name,
      type(params)))
  end
  if #params == 0 then raise(cls.name .. ": optimizer got an empty parameter list") end
  if is_tensor(params[1]) then
    self:add_param_group({ params = params })
  else
    for _, group in ipairs(params) do self:add_param_group(group) end
  end
  return self
end

-- Adds a group {params = {...}, option = value, ...}; missing options come
-- from the constructor's.
function Optimizer:add_param_group(group)
  if type(group) ~= "table" or type(group.params) ~= "table" then
    self:fail("a parameter group must be a table with a list of tensors under 'params'")
  end
  check_options(self, group)
  -- Table options (betas) are copied: a group's change must not reach the
  -- class defaults or another group.
  local g = {}
  for key, value in pairs(self.options) do g[key] = value end
  for key, value in pairs(group) do
    if key ~= "params" then g[key] = value end
  end
  for key, value in pairs(g) do
    if type(value) == "table" and value ~= Optimizer.required then g[key] = table.move(value, 1, #value, 1, {}) end
  end
  local list = is_tensor(group.params) and { group.params } or group.params
  if #list == 0 then self:fail("optimizer got an empty parameter list") end
  local seen = {}
  for _, other in ipairs(self.param_groups) do
    for _, p in ipairs(other.params) do seen[p] = true end
  end
  local params = {}
  local first = self:num_params()
  for i, p in ipairs(list) do
    local position = first + i
    if not is_tensor(p) then
      self:fail("parameter %d is not a tensor (got %s)", position, type(p))
    end
    -- A frozen parameter (requires_grad false: a frozen embedding, a
    -- fine-tuned model's body) is kept, as PyTorch keeps it: it gets no
    -- gradient, so step() skips it and it has no state; unfrozen later, it
    -- trains. A tensor computed from others never gets a .grad (PyTorch
    -- refuses it too): optimizing it would silently do nothing.
    if not p.is_leaf then
      self:fail("parameter %d is not a leaf tensor: it is computed from other tensors and never gets a .grad "
        .. "(optimize the tensors it came from, or a copy: t:detach():requires_grad_())", position)
    end
    if seen[p] then self:fail("parameter %d appears in more than one parameter group", position) end
    seen[p] = true
    params[i] = p
  end
  g.params = params
  for key, value in pairs(g) do
    if value == Optimizer.required then self:fail("option '%s' is required", key) end
  end
  if self.check then self:check(g) end
  self.param_groups[#self.param_groups + 1] = g
end

function Optimizer:num_params()
  local n = 0
  for _, group in ipairs(self.param_groups) do n = n + #group.params end
  return n
end

-- The parameters of group that have a gradient, as lists by device (one
-- engine call takes one device) in the order the devices first appear.
local function with_grads(group)
  local set = nil
  for _, p in ipairs(group.params) do
    -- has_grad, not p.grad: reading p.grad here would make a Lua handle that
    -- keeps the gradient alive after zero_grad.
    if has_grad(p) then
      set = set or by_device.new()
      by_device.add(set, p)
    end
  end
  if set == nil then return nil, nil end
  return set.lists, set.order
end

-- A step either completes or changes nothing: every list's state buffers
-- are made first, then one engine call checks and prepares every list
-- before its first write, and only then is the state updated (Lua work that
-- cannot fail on tensor memory).
local function step_groups(self, made)
  local calls = {}
  for _, group in ipairs(self.param_groups) do
    local lists, order = with_grads(group)
    if lists ~= nil then
      for _, device in ipairs(order) do calls[#calls + 1] = self:prepare(lists[device], group, made) end
    end
  end
  if #calls == 0 then return end
  self:run(calls)
  made.applied = true -- from here the new buffers are the state's
  for _, call in ipairs(calls) do self:commit(call) end
end

-- The update: for each parameter with a gradient, its state (allocated on
-- its first step) and the class's fused step, one engine call for the whole
-- step. closure, if given, is called first (it recomputes the loss) and its
-- result returned. A failed step (out of memory, a learning rate made
-- negative since construction) leaves every parameter and every state as it
-- was, frees the buffers it made, and is raised again at the script's line.
function Optimizer:step(closure)
  local loss
  if closure then loss = closure() end
  estimate.keep(self.state, 2) -- put back after lt.memory.estimate
  local made = {}
  local ok, err = pcall(step_groups, self, made)
  if not ok then
    if not made.applied then
      for _, t in ipairs(made) do t:free() end
    end
    raise(not_applied(self.name .. ": step", err, "the step was not applied (no parameter or state changed)"))
  end
  return loss
end

-- Gradients to nil (the default: their memory goes back to the allocator as
-- soon as nothing else holds them), or filled with zeros with set_to_none=false;
-- in C, with no handle made for any gradient.
function Optimizer:zero_grad(options)
  local set_to_none = true
  if options ~= nil then
    if type(options) ~= "table" then self:fail("zero_grad: expected an options table, got %s", type(options)) end
    for key in pairs(options) do
      if key ~= "set_to_none" then self:fail("zero_grad: unknown option '%s'", tostring(key)) end
    end
    if options.set_to_none ~= nil then set_to_none = options.set_to_none end
  end
  local params = self.param_groups[1] and self.param_groups[1].params or {}
  if #self.param_groups > 1 then -- one list, so that one collection serves all (core._zero_grads)
    params = {}
    for _, group in ipairs(self.param_groups) do table.move(group.params, 1, #group.params, #params + 1, params) end
  end
  zero_grads(params, set_to_none)
end

-- Bytes of the state tensors (0 before the first step: state is lazy).
function Optimizer:state_bytes()
  local total = 0
  for _, s in pairs(self.state) do
    for _, key in ipairs(self.state_tensors) do
      local t = s[key]
      if t ~= nil then total = total + t:nbytes() end
    end
  end
  return total
end

-- PyTorch's layout: state[i] for the parameter at position i over all groups
-- in order (1-based) with copies of its buffers, and param_groups with each
-- group's options and its parameters' positions.
function Optimizer:state_dict()
  local state, groups, index = {}, {}, 0
  for gi, group in ipairs(self.param_groups) do
    local g = {}
    for key, value in pairs(group) do
      if key == "params" then
        local positions = {}
        for i = 1, #value do positions[i] = index + i end
        g.params = positions
      elseif type(value) == "table" then
        g[key] = table.move(value, 1, #value, 1, {})
      else
        g[key] = value
      end
    end
    for _, p in ipairs(group.params) do
      index = index + 1
      local s = self.state[p]
      if s ~= nil then
        local copy = { step = s.step }
        for _, key in ipairs(self.state_tensors) do
          if s[key] ~= nil then copy[key] = s[key]:detach():clone() end
        end
        state[index] = copy
      end
    end
    groups[gi] = g
  end
  return { state = state, param_groups = groups }
end

-- Checks everything before changing anything: the group structure, that
-- state refers to existing parameters, known buffer names and their shapes.
function Optimizer:load_state_dict(sd)
  local name = self.name .. ": load_state_dict"
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    raise(name .. ": expected a table with 'state' and 'param_groups' (from state_dict())")
  end
  if #sd.param_groups ~= #self.param_groups then
    raise(string.format("%s: the state dict has %d parameter groups, the optimizer has %d", name,
      #sd.param_groups, #self.param_groups))
  end
  local params = {}
  for gi, group in ipairs(self.param_groups) do
    local loaded = sd.param_groups[gi]
    if type(loaded) ~= "table" then
      raise(string.format("%s: parameter group %d must be a table, got %s", name, gi, type(loaded)))
    end
    local n = type(loaded.params) == "table" and #loaded.params or 0
    if n ~= #group.params then
      raise(string.format("%s: parameter group %d has %d parameters in the state dict, %d in the optimizer",
        name, gi, n, #group.params))
    end
    for _, p in ipairs(group.params) do params[#params + 1] = p end
  end
  local known = {}
  for _, key in ipairs(self.state_tensors) do known[key] = true end
  for index, s in pairs(sd.state) do
    local p = params[index]
    if p == nil then
      raise(string.format("%s: state for parameter %s, but the optimizer has %d parameters", name,
        tostring(index), #params))
    end
    if type(s) ~= "table" then
      raise(string.format("%s: the state of parameter %d must be a table, got %s", name, index, type(s)))
    end
    for key, value in pairs(s) do
      if key == "step" then
        if math.type(value) ~= "integer" then
          raise(string.format("%s: step of parameter %d must be an integer, got %s", name, index, tostring(value)))
        end
      elseif not known[key] then
        raise(string.format("%s: unknown state '%s' for parameter %d", name, tostring(key), index))
      elseif not is_tensor(value) then
        raise(string.format("%s: %s of parameter %d must be a tensor, got %s", name, key, index, type(value)))
      elseif not same_shape(value.shape, p.shape) then
        raise(string.format("%s: %s of parameter %d has shape %s, expected %s", name, key, index,
          shape_text(value.shape), shape_text(p.shape)))
      end
    end
  end
  -- The loaded groups, checked as add_param_group checks a group.
  local groups = {}
  for gi, group in ipairs(self.param_groups) do
    local g = {}
    for key, value in pairs(group) do g[key] = value end
    for key, value in pairs(sd.param_groups[gi]) do
      if key ~= "params" then
        g[key] = type(value) == "table" and table.move(value, 1, #value, 1, {}) or value
      end
    end
    local ok, err = true, nil
    if self.check then ok, err = pcall(self.check, self, g) end
    if not ok then
      local message = tostring(err):gsub("^[^\n:]*:%d+: ", "")
      if message:sub(1, #self.name + 2) == self.name .. ": " then message = message:sub(#self.name + 3) end
      raise(string.format("%s: parameter group %d: %s", name, gi, message))
    end
    groups[gi] = g
  end
  -- Buffers are copied into fresh optimizer storage of the parameter's dtype
  -- and device, as PyTorch casts loaded state to its parameter. All are made
  -- before the optimizer takes the groups and the state: a failure (out of
  -- memory) leaves it as it was.
  local state, made = {}, {}
  local ok, err = pcall(function()
    for index, s in pairs(sd.state) do
      local p = params[index]
      local copy = { step = s.step or 0 }
      for _, key in ipairs(self.state_tensors) do
        if s[key] ~= nil then
          local buf = Optimizer.new_buffer(p, false)
          made[#made + 1] = buf
          copy[key] = buf:copy_(s[key])
        end
      end
      state[p] = copy
    end
  end)
  if not ok then
    for _, t in ipairs(made) do t:free() end
    raise(not_applied(name, err, "nothing was loaded"))
  end
  for gi, group in ipairs(self.param_groups) do
    for key, value in pairs(groups[gi]) do group[key] = value end
  end
  self.state = state
end

function Optimizer:describe()
  local lines = { self.name .. " (" }
  for gi, group in ipairs(self.param_groups) do
    lines[#lines + 1] = string.format("Parameter Group %d", gi)
    local keys = {}
    for key in pairs(group) do
      if key ~= "params" then keys[#keys + 1] = key end
    end
    table.sort(keys)
    for _, key in ipairs(keys) do
      local value = group[key]
      if type(value) == "table" then value = "{" .. table.concat(value, ", ") .. "}" end
      lines[#lines + 1] = string.format("    %s: %s", key, tostring(value))
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- opt.step() with a dot: a clear error, not one from inside these files.
methods.guard(Optimizer, "Optimizer", "an optimizer", "opt", methods.instance_of(Optimizer),
  { new = true, new_buffer = true, extend = true })

return Optimizer
