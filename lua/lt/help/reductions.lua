-- lt.help: reductions (bindings/tensor_reduce.c, lua/lt/tensor_ops.lua).
local DIMS = "dims is one dimension, a list of them ({1, 3}), or nothing for all; keepdim=true keeps "
  .. "each reduced dimension with size 1."

return {
  title = "Reductions",
  intro = "Reductions over one dimension, a list of them, or all; dimensions are 1-based (-1 the last) "
    .. "and positions they return are 1-based. A reduction over everything is a 0-dim tensor: "
    .. ":item() gives the number.",
  entries = {
    { "t:sum", "t:sum([dims] [, keepdim])",
      "The sum over dims. " .. DIMS .. " Integer and bool tensors sum as int64, as PyTorch's.",
      ex = "local total = t:sum(); local per_row = t:sum(2, true)", see = { "t:mean", "t:cumsum" } },
    { "t:mean", "t:mean([dims] [, keepdim])", "The mean over dims (floating tensors). " .. DIMS,
      ex = "local avg = t:mean({1, 2})", see = { "t:sum", "t:var" } },
    { "t:prod", "t:prod([dims] [, keepdim])", "The product over dims. " .. DIMS,
      ex = "local p = lt.tensor({1, 2, 3}):prod()" },
    { "t:max", "t:max() / t:max(d [, keepdim]) -> values, indices / t:max(other)",
      "With no argument, the largest element (0-dim). With a dimension, the largest values along it and "
        .. "their 1-based positions. With a tensor, the elementwise maximum (as torch.max(a, b)). "
        .. "A NaN is taken over any number, as in PyTorch.",
      ex = "local best, where_ = t:max(2)", see = { "t:argmax", "t:topk", "t:maximum" } },
    { "t:min", "t:min() / t:min(d [, keepdim]) -> values, indices / t:min(other)",
      "As t:max, for the smallest.", ex = "local low = t:min():item()", see = { "t:argmin", "t:minimum" } },
    { "t:argmax", "t:argmax([d] [, keepdim])",
      "The 1-based position of the largest value along d, or in the flattened tensor when d is not "
        .. "given (a 0-dim int64 tensor).",
      ex = "local predicted = lt.randn(4, 10):argmax(2)", see = { "t:max" } },
    { "t:argmin", "t:argmin([d] [, keepdim])", "As t:argmax, for the smallest.", ex = "local i = t:argmin()" },
    { "t:var", "t:var([dims] [, {correction=1, keepdim=false}]) / lt.var(t, ...)",
      "The variance over dims (all when not given): sum((t - mean)^2) / (N - correction); correction=0 "
        .. "is the population variance. Floating tensors.",
      opts = "correction=1, keepdim=false", ex = "local v = t:var(2, {correction = 0})",
      aliases = { "lt.var" }, see = { "t:std" } },
    { "t:std", "t:std([dims] [, {correction=1, keepdim=false}]) / lt.std(t, ...)",
      "The standard deviation over dims: the square root of t:var.",
      opts = "correction=1, keepdim=false", ex = "local s = t:std()", aliases = { "lt.std" } },
    { "t:norm", "t:norm(p=2, [dims], {keepdim=false}) / lt.norm(t, ...)",
      "The p-norm over dims (all when not given), as torch.linalg.vector_norm: p = 2, 1, math.huge "
        .. "(the largest magnitude) or any positive number. The 2-norm's gradient at 0 is 0, as PyTorch's.",
      opts = "keepdim=false", ex = "local row_norms = t:norm(2, 2)", aliases = { "lt.norm" },
      see = { "F.normalize", "nn.utils.clip_grad_norm_" } },
    { "t:cumsum", "t:cumsum(d) / lt.cumsum(t, d)",
      "Running sums along d: out[i] = t[1] + ... + t[i]. Integer and bool tensors give int64.",
      ex = "local running = lt.arange(1, 5):cumsum(1)", aliases = { "lt.cumsum" }, see = { "t:sum" } },
  },
}
