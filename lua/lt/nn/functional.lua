-- lt.nn.functional (F): the nn ops as functions, with PyTorch's signatures
-- adapted to Lua: keyword arguments are an options table, dims and class
-- labels count from 1. Most entries are the C functions themselves
-- (lt.core._functional), so a training step pays no Lua wrapper per op.
--
--   F.linear(x, w, b)                 F.conv2d(x, w, b, {stride=, padding=, dilation=, groups=})
--   F.max_pool2d(x, k, {stride=, padding=, dilation=, ceil_mode=, return_indices=})
--   F.avg_pool2d(x, k, {stride=, padding=, ceil_mode=, count_include_pad=, divisor_override=})
--   F.batch_norm(x, running_mean, running_var, w, b, {training=false, momentum=0.1, eps=1e-5})
--   F.layer_norm(x, normalized_shape, w, b, {eps=1e-5})
--   F.relu(x, {inplace=})  F.gelu(x, {approximate="none"|"tanh"})  F.tanh(x)  F.sigmoid(x)
--   F.softmax(x, d)  F.log_softmax(x, d)  F.dropout(x, p=0.5, training=true)  F.flatten(x, s, e)
--   F.embedding(indices, w, {padding_idx=})
--   F.cross_entropy(logits, target, {reduction="mean", ignore_index=-100, label_smoothing=0, weight=})
--   F.nll_loss(log_probs, target, {reduction=, ignore_index=, weight=})
--   F.mse_loss(a, b, {reduction="mean"})
local core = require "lt.core"

local F = {}
for name, fn in pairs(core._functional) do F[name] = fn end

local function check_tensor(op, x)
  if not core.is_tensor(x) then
    error(string.format("%s: expected a tensor, got %s", op, type(x)), 3)
  end
end

function F.relu(x, opts)
  check_tensor("relu", x)
  if opts ~= nil then
    if type(opts) ~= "table" then error("relu: expected an options table, got " .. type(opts), 2) end
    for k in pairs(opts) do
      if k ~= "inplace" then error(string.format("relu: unknown option '%s' (expected inplace)", tostring(k)), 2) end
    end
    if opts.inplace then return x:relu_() end
  end
  return x:relu()
end

function F.tanh(x)
  check_tensor("tanh", x)
  return x:tanh()
end

function F.sigmoid(x)
  check_tensor("sigmoid", x)
  return x:sigmoid()
end

-- torch.flatten: from dim s (default 1) to dim e (default -1).
function F.flatten(x, s, e)
  check_tensor("flatten", x)
  return x:flatten(s or 1, e or -1)
end

return F
