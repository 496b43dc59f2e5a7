-- lt.help: indexing, joining and sorting (bindings/io.c, bindings/tensor_math.c,
-- bindings/tensor_sort.c, lua/lt/tensor_ops.lua).
return {
  title = "Indexing, joining and sorting",
  intro = "Index tensors are int64 and hold 1-based positions (negative values are not positions "
    .. "here); positions these ops return are 1-based too. Out-of-range indices are errors naming "
    .. "the value. Each op with a trailing _ writes into t and returns t.",
  entries = {
    { "t:index_select", "t:index_select(d, index) / lt.index_select(t, d, index)",
      "The rows of t at the 1-based positions of index (a 1-D integer tensor) along dimension d, "
        .. "in index's order, as torch.index_select. On a GPU the index may be on the device or the CPU.",
      ex = "local picked = t:index_select(1, lt.tensor({3, 1}))", aliases = { "lt.index_select" },
      see = { "t:gather" } },
    { "t:gather", "t:gather(d, index) / lt.gather(t, d, index)",
      "Values of t picked along d by an int64 index of t's rank: out has index's shape and, for d = 2, "
        .. "out[i][j] = t[i][index[i][j]]. index may be smaller than t in the other dimensions. Its "
        .. "gradient adds back into the picked positions.",
      ex = "local g = t:gather(2, lt.tensor({{1, 1}, {4, 2}, {3, 3}}))", aliases = { "lt.gather" },
      see = { "t:scatter", "t:index_select" } },
    { "t:scatter", "t:scatter(d, index, src | value) / lt.scatter(t, d, index, src | value)",
      "A copy of t with the values of src (a tensor of t's dtype) or a number written at the positions "
        .. "index gives along d: for d = 2, out[i][index[i][j]] = src[i][j]. Where index repeats a "
        .. "position the last write in index's order wins (deterministic; PyTorch leaves it open). "
        .. "t:scatter_ writes into t.",
      ex = "local onehot = lt.zeros(3, 4):scatter(2, lt.tensor({{2}, {4}, {1}}), 1)",
      aliases = { "lt.scatter", "t:scatter_" }, see = { "t:scatter_add", "t:gather" } },
    { "t:scatter_add", "t:scatter_add(d, index, src) / lt.scatter_add(t, d, index, src)",
      "A copy of t with src's values added at the positions index gives along d: for d = 2, "
        .. "out[i][index[i][j]] += src[i][j], repeated positions summed in index's order (deterministic "
        .. "on every device). t:scatter_add_ adds into t.",
      ex = "local counts = lt.zeros(1, 3):scatter_add(2, lt.tensor({{1, 3, 3}}), lt.ones(1, 3))",
      aliases = { "lt.scatter_add", "t:scatter_add_" }, see = { "t:scatter" } },
    { "t:masked_fill", "t:masked_fill(mask, value) / lt.masked_fill(t, mask, value)",
      "t with value (a number or a 0-dim tensor) where the bool mask, broadcast to t, is true. "
        .. "t:masked_fill_ writes into t.",
      ex = "local relu_like = t:masked_fill(t:lt(0), 0)", aliases = { "lt.masked_fill", "t:masked_fill_" },
      see = { "lt.where" } },
    { "lt.where", "lt.where(cond, a, b)",
      "a where the bool tensor cond is true, b elsewhere, all broadcast together; a or b may be numbers "
        .. "(they take the other operand's dtype, as PyTorch's scalars).",
      ex = "local clipped = lt.where(t:gt(1), 1, t)", see = { "t:masked_fill" } },
    { "lt.cat", "lt.cat(tensors, d=1)",
      "The tensors of the list joined along dimension d (they agree in every other dimension).",
      ex = "local both = lt.cat({t, t}, 1)", see = { "lt.stack", "t:split" } },
    { "lt.stack", "lt.stack(tensors, d=1)",
      "The tensors of the list (all of one shape) joined along a new dimension d.",
      ex = "local pair = lt.stack({t, t})", see = { "lt.cat" } },
    { "t:tril", "t:tril(k=0) / lt.tril(t, k)",
      "The lower triangle of the last two dimensions: elements with column - row <= k kept, the rest 0 "
        .. "(k = 0 the main diagonal, positive above it). t:tril_ writes into t.",
      ex = "local causal = lt.ones(4, 4):tril()", aliases = { "lt.tril", "t:tril_" }, see = { "t:triu" } },
    { "t:triu", "t:triu(k=0) / lt.triu(t, k)",
      "The upper triangle of the last two dimensions: elements with column - row >= k kept, the rest 0. "
        .. "t:triu_ writes into t.",
      ex = "local above = lt.ones(4, 4):triu(1)", aliases = { "lt.triu", "t:triu_" }, see = { "t:tril" } },
    { "t:sort", "t:sort(d=-1, {descending=false, stable=false}) / lt.sort(t, ...) -> values, indices",
      "The values along d in order and their 1-based positions in t. Always stable (equal values keep "
        .. "their order), so stable is accepted and the result is deterministic; NaN sorts above every "
        .. "number. PyTorch's positional t:sort(d, descending) works too. The gradient flows back to "
        .. "each value's place.",
      opts = "descending=false, stable=false (lt's sort is stable either way)",
      ex = "local values, order = t:sort(2, {descending = true})", aliases = { "lt.sort" },
      see = { "t:argsort", "t:topk" } },
    { "t:argsort", "t:argsort(d=-1, {descending=false, stable=false}) / lt.argsort(t, ...)",
      "The 1-based positions that sort t along d (t:sort's indices alone).",
      opts = "descending=false, stable=false", ex = "local ranks = t:argsort(1)", aliases = { "lt.argsort" },
      see = { "t:sort" } },
    { "t:topk", "t:topk(k, d=-1, {largest=true, sorted=true}) / lt.topk(t, ...) -> values, indices",
      "The k largest (or smallest) values along d, in order, and their 1-based positions; ties keep the "
        .. "earlier position first. PyTorch's positional t:topk(k, d, largest, sorted) works too.",
      opts = "largest=true, sorted=true (the result is always sorted)",
      ex = "local best, where_ = t:topk(2)", aliases = { "lt.topk" }, see = { "t:sort", "t:max" } },
    { "t:multinomial", "t:multinomial(n, {replacement=false, seed=}) / lt.multinomial(probs, n, ...)",
      "n category indices (int64, 1-based) drawn per row of the 1-D or 2-D non-negative weights (they "
        .. "need not sum to 1), as torch.multinomial. Without replacement a row's indices are distinct. "
        .. "With seed, from a private generator (the global one is untouched), the same draws on every "
        .. "device.",
      opts = "replacement=false, seed (none: lt's global generator)",
      ex = "local draws = lt.tensor({0.1, 0.6, 0.3}):multinomial(5, {replacement = true})",
      aliases = { "lt.multinomial" }, see = { "lt.randint" } },
  },
}
