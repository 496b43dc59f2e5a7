-- nn.Dropout(p=0.5, {inplace=false}): zeroes elements with probability p in
-- training and scales the rest by 1/(1-p); the identity in eval mode. In
-- place it writes its input and returns it (no output of the input's size;
-- the mask is still kept for backward). nn.Dropout{p=, inplace=} also works.
local Module = require "lt.nn.module"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local function F() return require "lt.nn.functional" end

local Dropout = Module:extend("Dropout")

function Dropout:init(p, opts)
  -- The keyword form: every argument in one table, as PyTorch's keywords.
  if type(p) == "table" and opts == nil then
    local o = options.read("Dropout", p, { inplace = false }, { p = true })
    p, opts = o.p, { inplace = o.inplace }
  end
  if p == nil then p = 0.5 end
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise("Dropout: dropout probability has to be between 0 and 1, but got " .. tostring(p))
  end
  local inplace = options.read("Dropout", opts, { inplace = false }).inplace
  if type(inplace) ~= "boolean" then
    raise("Dropout: inplace must be a boolean, got " .. type(inplace))
  end
  self.p = p
  self.inplace = inplace
end

function Dropout:forward(x)
  return F().dropout(x, self.p, self.training, self.inplace)
end

function Dropout:extra_repr()
  if self.inplace then return "p=" .. tostring(self.p) .. ", inplace=true" end
  return "p=" .. tostring(self.p)
end

return { Dropout = Dropout }
