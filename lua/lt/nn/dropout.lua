-- nn.Dropout(p=0.5): zeroes elements with probability p in training and
-- scales the rest by 1/(1-p); the identity in eval mode.
local Module = require "lt.nn.module"
local raise = require "lt.user_error"

local function F() return require "lt.nn.functional" end

local Dropout = Module:extend("Dropout")

function Dropout:init(p)
  if p == nil then p = 0.5 end
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise("Dropout: dropout probability has to be between 0 and 1, but got " .. tostring(p))
  end
  self.p = p
end

function Dropout:forward(x)
  return F().dropout(x, self.p, self.training)
end

function Dropout:extra_repr()
  return "p=" .. tostring(self.p)
end

return { Dropout = Dropout }
