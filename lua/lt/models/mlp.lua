-- mlp(sizes, {activation="relu", dropout=0, bias=true, dtype=, device=}):
-- a multilayer perceptron through sizes = {in, hidden..., out}, as the
-- nn.Sequential one writes by hand in PyTorch:
--
--   Linear(in, h1), act, [Dropout(p)], Linear(h1, h2), act, [Dropout(p)], ..., Linear(hk, out)
--
-- so its state_dict names are that Sequential's ("0.weight", "2.weight",
-- ...; with dropout "0.weight", "3.weight", ...). No activation follows the
-- last layer: the output is logits. activation is a name ("relu", "gelu",
-- "tanh", "sigmoid") or a function returning a fresh module for each layer
-- (nn.GELU works: a class is callable). (torchvision.ops.MLP differs: it
-- always adds a Dropout, one after the last layer too.)
local nn = require "lt.nn"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local M = {}

local ACTIVATIONS = {
  relu = function() return nn.ReLU() end,
  gelu = function() return nn.GELU() end,
  tanh = function() return nn.Tanh() end,
  sigmoid = function() return nn.Sigmoid() end,
}

local DEFAULTS = { activation = "relu", dropout = 0, bias = true }

function M.mlp(sizes, opts)
  local o = options.read("mlp", opts, DEFAULTS, options.factory_keys)
  if type(sizes) ~= "table" or #sizes < 2 then
    raise("mlp: expected a table of at least 2 sizes {in, ..., out}, got " ..
      (type(sizes) == "table" and #sizes .. " sizes" or type(sizes)))
  end
  for i, n in ipairs(sizes) do options.integer("mlp", "size " .. i, n, 1) end
  local make_activation = o.activation
  if type(make_activation) == "string" then
    make_activation = ACTIVATIONS[o.activation]
    if make_activation == nil then
      raise("mlp: unknown activation '" .. o.activation .. "' (expected relu, gelu, tanh, sigmoid or a function)")
    end
  elseif not (type(make_activation) == "function" or (type(make_activation) == "table"
      and getmetatable(make_activation) and getmetatable(make_activation).__call)) then
    raise("mlp: activation must be a name or a function returning a module, got " .. type(make_activation))
  end
  local p = o.dropout
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise("mlp: dropout must be a probability between 0 and 1, got " .. tostring(p))
  end
  local linear_opts = { bias = o.bias, dtype = o.dtype, device = o.device }
  local layers = {}
  for i = 1, #sizes - 1 do
    layers[#layers + 1] = nn.Linear(sizes[i], sizes[i + 1], linear_opts)
    if i < #sizes - 1 then
      local act = make_activation()
      if not nn.is_module(act) then raise("mlp: the activation function must return a module") end
      layers[#layers + 1] = act
      if p > 0 then layers[#layers + 1] = nn.Dropout(p) end
    end
  end
  return nn.Sequential(layers)
end

return M
