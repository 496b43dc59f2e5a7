-- Loss modules: nn.CrossEntropyLoss({weight=, reduction="mean",
-- ignore_index=-100, label_smoothing=0}) over logits and 1-based class
-- targets or class probabilities (a floating target of the logits' shape,
-- F.cross_entropy's rule), and nn.MSELoss({reduction="mean"}).
-- m(input, target).
local core = require "lt.core"
local Module = require "lt.nn.module"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local function F() return require "lt.nn.functional" end

local REDUCTIONS = { none = true, mean = true, sum = true }

local function check_reduction(name, r)
  if not REDUCTIONS[r] then
    raise(string.format("%s: reduction must be 'none', 'mean' or 'sum', got %s", name, tostring(r)))
  end
  return r
end

local CrossEntropyLoss = Module:extend("CrossEntropyLoss")

function CrossEntropyLoss:init(opts)
  local o = options.read("CrossEntropyLoss", opts, { reduction = "mean", ignore_index = -100, label_smoothing = 0 },
    { weight = true })
  self.reduction = check_reduction("CrossEntropyLoss", o.reduction)
  self.ignore_index = options.integer("CrossEntropyLoss", "ignore_index", o.ignore_index)
  if type(o.label_smoothing) ~= "number" or o.label_smoothing < 0 or o.label_smoothing > 1 then
    raise("CrossEntropyLoss: label_smoothing must be between 0 and 1, got " .. tostring(o.label_smoothing))
  end
  self.label_smoothing = o.label_smoothing
  if o.weight ~= nil and not core.is_tensor(o.weight) then
    raise("CrossEntropyLoss: weight must be a tensor of class weights, got " .. type(o.weight))
  end
  -- A buffer, as PyTorch's: it follows the module's to() and state_dict.
  self:register_buffer("weight", o.weight)
end

function CrossEntropyLoss:forward(input, target)
  return F().cross_entropy(input, target, {
    weight = self.weight, reduction = self.reduction, ignore_index = self.ignore_index,
    label_smoothing = self.label_smoothing,
  })
end

local MSELoss = Module:extend("MSELoss")

function MSELoss:init(opts)
  self.reduction = check_reduction("MSELoss", options.read("MSELoss", opts, { reduction = "mean" }).reduction)
end

function MSELoss:forward(input, target)
  return F().mse_loss(input, target, { reduction = self.reduction })
end

return { CrossEntropyLoss = CrossEntropyLoss, MSELoss = MSELoss }
