-- nn.Embedding(num_embeddings, embedding_dim, {padding_idx=, dtype=,
-- device=}): a lookup table, weight [num, dim] initialised normal(0, 1).
-- Indices are 1-based; padding_idx (1-based, or negative from the end) names
-- a row that starts at zero and gets no gradient.
local core = require "lt.core"
local Module = require "lt.nn.module"
local init = require "lt.nn.initializers"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local function F() return require "lt.nn.functional" end

local Embedding = Module:extend("Embedding")

function Embedding:init(num_embeddings, embedding_dim, opts)
  local o = options.read("Embedding", opts, {}, { padding_idx = true, dtype = true, device = true })
  self.num_embeddings = options.integer("Embedding", "num_embeddings", num_embeddings, 1)
  self.embedding_dim = options.integer("Embedding", "embedding_dim", embedding_dim, 1)
  if o.padding_idx ~= nil then
    local p = options.integer("Embedding", "padding_idx", o.padding_idx)
    local n = self.num_embeddings
    if p == 0 or p > n or p < -n then
      raise(string.format("Embedding: padding_idx must be within 1..%d or -%d..-1, got %d", n, n, p))
    end
    self.padding_idx = p > 0 and p or n + 1 + p
  end
  self.weight = Module.Parameter(options.tensor("Embedding", core.empty,
    { self.num_embeddings, self.embedding_dim }, options.factory(o)))
  self:reset_parameters()
end

function Embedding:reset_parameters()
  init.normal_(self.weight)
  if self.padding_idx ~= nil then self.weight:detach()[self.padding_idx]:zero_() end
end

function Embedding:forward(indices)
  return F().embedding(indices, self.weight, { padding_idx = self.padding_idx })
end

function Embedding:extra_repr()
  local s = string.format("%d, %d", self.num_embeddings, self.embedding_dim)
  if self.padding_idx ~= nil then s = s .. ", padding_idx=" .. self.padding_idx end
  return s
end

return { Embedding = Embedding }
