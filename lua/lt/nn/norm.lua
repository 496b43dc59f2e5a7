-- Normalisation layers: nn.BatchNorm2d (and BatchNorm1d) and nn.LayerNorm,
-- with PyTorch's defaults (weight 1, bias 0, running_mean 0, running_var 1).
local core = require "lt.core"
local Module = require "lt.nn.module"
local options = require "lt.nn.options"
local raise = require "lt.user_error"
local recompute = require "lt.recompute"

local Parameter = Module.Parameter

local function F() return require "lt.nn.functional" end

-- ---- batch norm ----

-- BatchNorm{1,2}d(num_features, {eps=1e-5, momentum=0.1, affine=true,
-- track_running_stats=true, dtype=, device=}). momentum=false (PyTorch's
-- None) averages the running statistics cumulatively over all batches.
local function define_batch_norm(name, accepted_dims)
  local cls = Module:extend(name)

  function cls:init(num_features, opts)
    local o = options.read(name, opts, { eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true },
      options.factory_keys)
    self.num_features = options.integer(name, "num_features", num_features, 1)
    self.eps = o.eps
    if o.momentum ~= false then self.momentum = o.momentum end
    self.affine = o.affine
    self.track_running_stats = o.track_running_stats
    local factory = options.factory(o)
    local n = self.num_features
    if self.affine then
      self.weight = Parameter(options.tensor(name, core.ones, { n }, factory))
      self.bias = Parameter(core.zeros({ n }, factory))
    else
      self:register_parameter("weight", nil)
      self:register_parameter("bias", nil)
    end
    if self.track_running_stats then
      self:register_buffer("running_mean", options.tensor(name, core.zeros, { n }, factory))
      self:register_buffer("running_var", core.ones({ n }, factory))
      self:register_buffer("num_batches_tracked", core.zeros({}, { dtype = "int64", device = o.device }))
    else
      self:register_buffer("running_mean", nil)
      self:register_buffer("running_var", nil)
      self:register_buffer("num_batches_tracked", nil)
    end
  end

  function cls:reset_running_stats()
    if self.track_running_stats then
      self.running_mean:zero_()
      self.running_var:fill_(1)
      self.num_batches_tracked:zero_()
    end
  end

  function cls:forward(x)
    if not core.is_tensor(x) then raise(string.format("%s: expected a tensor, got %s", name, type(x))) end
    if not accepted_dims[x:dim()] then
      raise(string.format("%s: expected %s input (got %dD input)", name, accepted_dims.text, x:dim()))
    end
    -- PyTorch's _BatchNorm.forward: the factor is the momentum, or 1/n for
    -- the cumulative average; the batch count only moves in training.
    local factor = self.momentum or 0
    -- Recomputed by lt.checkpoint: the statistics were updated by the first
    -- forward; this one normalises by the batch and leaves them alone.
    if self.training and recompute.active() then
      return F().batch_norm(x, nil, nil, self.weight, self.bias, { training = true, momentum = 0, eps = self.eps })
    end
    if self.training and self.track_running_stats and self.num_batches_tracked ~= nil then
      self.num_batches_tracked:add_(1)
      if self.momentum == nil then factor = 1 / self.num_batches_tracked:item() end
    end
    local use_batch_stats = self.training or (self.running_mean == nil and self.running_var == nil)
    local mean, var
    if not self.training or self.track_running_stats then mean, var = self.running_mean, self.running_var end
    return F().batch_norm(x, mean, var, self.weight, self.bias,
      { training = use_batch_stats, momentum = factor, eps = self.eps })
  end

  function cls:extra_repr()
    return string.format("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s", self.num_features,
      tostring(self.eps), tostring(self.momentum), tostring(self.affine), tostring(self.track_running_stats))
  end

  return cls
end

local BatchNorm2d = define_batch_norm("BatchNorm2d", { [4] = true, text = "4D" })
local BatchNorm1d = define_batch_norm("BatchNorm1d", { [2] = true, [3] = true, text = "2D or 3D" })

-- ---- layer norm ----

-- LayerNorm(normalized_shape, {eps=1e-5, elementwise_affine=true, bias=true,
-- dtype=, device=}): normalises over the trailing dims of normalized_shape
-- (an integer or a table of sizes).
local LayerNorm = Module:extend("LayerNorm")

function LayerNorm:init(normalized_shape, opts)
  local o = options.read("LayerNorm", opts, { eps = 1e-5, elementwise_affine = true, bias = true },
    options.factory_keys)
  local shape = type(normalized_shape) == "table" and normalized_shape or { normalized_shape }
  local copy = {}
  for i, n in ipairs(shape) do copy[i] = options.integer("LayerNorm", "normalized_shape", n, 1) end
  if #copy == 0 then raise("LayerNorm: normalized_shape must have at least one size") end
  self.normalized_shape = copy
  self.eps = o.eps
  self.elementwise_affine = o.elementwise_affine
  local factory = options.factory(o)
  if self.elementwise_affine then
    self.weight = Parameter(options.tensor("LayerNorm", core.ones, copy, factory))
    if o.bias then
      self.bias = Parameter(core.zeros(copy, factory))
    else
      self:register_parameter("bias", nil)
    end
  else
    self:register_parameter("weight", nil)
    self:register_parameter("bias", nil)
  end
end

function LayerNorm:forward(x)
  return F().layer_norm(x, self.normalized_shape, self.weight, self.bias, { eps = self.eps })
end

function LayerNorm:extra_repr()
  return string.format("%s, eps=%s, elementwise_affine=%s", options.tuple(self.normalized_shape),
    tostring(self.eps), tostring(self.elementwise_affine))
end

return { BatchNorm2d = BatchNorm2d, BatchNorm1d = BatchNorm1d, LayerNorm = LayerNorm }
