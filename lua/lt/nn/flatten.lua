-- nn.Flatten({start_dim=2, end_dim=-1}): flattens dims start_dim..end_dim
-- (1-based: the default keeps the batch dim, as PyTorch's start_dim=1).
local Module = require "lt.nn.module"
local options = require "lt.nn.options"

local function F() return require "lt.nn.functional" end

local Flatten = Module:extend("Flatten")

function Flatten:init(opts)
  local o = options.read("Flatten", opts, { start_dim = 2, end_dim = -1 })
  self.start_dim = options.integer("Flatten", "start_dim", o.start_dim)
  self.end_dim = options.integer("Flatten", "end_dim", o.end_dim)
end

function Flatten:forward(x)
  return F().flatten(x, self.start_dim, self.end_dim)
end

function Flatten:extra_repr()
  return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim)
end

return { Flatten = Flatten }
