-- lt.help: elementwise math, comparisons, filling and matrix products
-- (engine/include/lt/ops.h's op lists, bindings/tensor_math.c, lua/lt/tensor_ops.lua).
local function unary(name, what, ex, extra)
  local e = { "t:" .. name, "t:" .. name .. "()", what .. " t:" .. name .. "_() writes into t.",
    ex = ex or ("local r = t:" .. name .. "()"), aliases = { "t:" .. name .. "_" } }
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

local function binary(name, what, ex, extra)
  local e = { "t:" .. name, "t:" .. name .. "(other) / t:" .. name .. "_(other)",
    what .. " other is a tensor (broadcast) or a number. t:" .. name .. "_ writes into t and returns it.",
    ex = ex, aliases = { "t:" .. name .. "_" } }
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

local function compare(name, op)
  return { "t:" .. name, "t:" .. name .. "(other)",
    "t " .. op .. " other elementwise, as a bool tensor (other a tensor, broadcast, or a number). "
      .. "t:" .. name .. "_ writes 0/1 into t in t's own dtype, as PyTorch's.",
    ex = "local mask = t:" .. name .. "(0)", aliases = { "t:" .. name .. "_" },
    see = { "t:masked_fill", "lt.where" } }
end

return {
  title = "Elementwise math",
  intro = "Elementwise ops broadcast as PyTorch's and promote dtypes as PyTorch does (an integer "
    .. "tensor divided gives float32). Every op has an in-place form with a trailing _ that writes "
    .. "into t and returns it (x:add_(1):mul_(2)); autograd refuses an in-place write to a tensor "
    .. "some graph saved, with a message naming the op.",
  entries = {
    binary("add", "t + other.", "local s = t:add(1)", { see = { "operators" } }),
    binary("sub", "t - other.", "local d = t:sub(t:mean())"),
    binary("mul", "t * other.", "local p = t:mul(2)"),
    binary("div", "t / other (true division: integer tensors give float32).", "local q = t:div(4)"),
    binary("pow", "t ^ other (other a number or a tensor).", "local sq = t:pow(2)"),
    binary("maximum", "The larger of t and other elementwise (NaN propagates). Also lt.maximum(a, b).",
      "local pos = t:maximum(0)", { aliases = { "t:maximum_", "lt.maximum" } }),
    binary("minimum", "The smaller of t and other elementwise (NaN propagates). Also lt.minimum(a, b).",
      "local capped = t:minimum(1)", { aliases = { "t:minimum_", "lt.minimum" } }),
    binary("remainder", "Python's t % other: the remainder with the sign of other (the % operator). "
      .. "Also lt.remainder(a, b).", "local r = lt.arange(-3, 3):remainder(2)",
      { aliases = { "t:remainder_", "lt.remainder" } }),
    binary("floor_divide", "Python's t // other: the quotient rounded down (the // operator). "
      .. "Also lt.floor_divide(a, b).", "local q = lt.arange(-3, 3):floor_divide(2)",
      { aliases = { "t:floor_divide_", "lt.floor_divide" } }),
    compare("eq", "=="), compare("ne", "~="), compare("lt", "<"), compare("le", "<="), compare("gt", ">"),
    compare("ge", ">="),
    unary("neg", "-t."),
    unary("abs", "|t|."),
    unary("exp", "e to the power t."),
    unary("log", "The natural logarithm of t."),
    unary("sqrt", "The square root of t."),
    unary("rsqrt", "1 / sqrt(t)."),
    unary("reciprocal", "1 / t."),
    unary("square", "t * t."),
    unary("sign", "-1, 0 or 1 by the sign of t."),
    unary("floor", "t rounded down."),
    unary("ceil", "t rounded up."),
    unary("round", "t rounded to the nearest integer, halves to even (as PyTorch)."),
    unary("sin", "The sine of t (radians)."),
    unary("cos", "The cosine of t (radians)."),
    unary("erf", "The error function of t."),
    unary("relu", "max(t, 0).", nil, { see = { "F.relu", "nn.ReLU" } }),
    unary("sigmoid", "1 / (1 + exp(-t)).", nil, { see = { "F.sigmoid" } }),
    unary("tanh", "The hyperbolic tangent of t.", nil, { see = { "F.tanh" } }),
    unary("logical_not", "The bool tensor of where t is 0 (false).", "local none = t:gt(0):logical_not()"),
    { "t:softmax", "t:softmax(d)", "F.softmax(t, d) as a method: exp(t) / sum(exp(t)) along d.",
      ex = "local p = t:softmax(2)", see = { "F.softmax" } },
    { "t:log_softmax", "t:log_softmax(d)", "F.log_softmax(t, d) as a method.",
      ex = "local lp = t:log_softmax(2)", see = { "F.log_softmax" } },
    { "t:gelu", "t:gelu({approximate=\"none\"})", "F.gelu(t, opts) as a method.",
      opts = "approximate=\"none\" (or \"tanh\")", ex = "local g = t:gelu()", see = { "F.gelu" } },
    { "t:clamp", "t:clamp(lo, hi) / t:clamp({min=, max=}) / lt.clamp(t, lo, hi)",
      "t limited to [lo, hi]; either bound may be nil (not both). t:clamp_ writes into t.",
      ex = "local c = t:clamp(-1, 1); local nonneg = t:clamp({min = 0})",
      aliases = { "t:clamp_", "lt.clamp" } },
    { "t:fill_", "t:fill_(value)", "Writes value (a number or a boolean) into every element of t; returns t.",
      ex = "local buf = lt.empty(3):fill_(7)", see = { "lt.full" } },
    { "t:zero_", "t:zero_()", "Writes 0 into every element of t; returns t.", ex = "t:zero_()" },
    { "t:copy_", "t:copy_(src)",
      "Writes src's values (broadcast to t's shape, converted to t's dtype and device) into t; returns t. "
        .. "A source overlapping t is read first (x:copy_(x:t()) transposes).",
      ex = "local dst = lt.empty(3, 4):copy_(t)" },
    { "t:uniform_", "t:uniform_(lo=0, hi=1)", "Fills t with samples of the uniform distribution on [lo, hi).",
      ex = "local w = lt.empty(3, 3):uniform_(-0.1, 0.1)", see = { "lt.rand", "nn.init.uniform_" } },
    { "t:normal_", "t:normal_(mean=0, std=1)", "Fills t with samples of N(mean, std^2).",
      ex = "local w = lt.empty(3, 3):normal_(0, 0.02)", see = { "lt.randn", "nn.init.normal_" } },
    { "t:bernoulli_", "t:bernoulli_(p=0.5)", "Fills t with 1 with probability p, else 0.",
      ex = "local coin = lt.empty(10):bernoulli_(0.3)" },
    { "t:matmul", "t:matmul(other) / lt.matmul(a, b)",
      "The matrix product with torch.matmul's rules: 1-D vectors, 2-D matrices, and batches of matrices "
        .. "broadcast in the leading dimensions.",
      ex = "local prod = t:matmul(lt.randn(4, 2))", aliases = { "lt.matmul" }, see = { "t:bmm", "F.linear" } },
    { "t:bmm", "t:bmm(other) / lt.bmm(a, b)",
      "Batched matrix product: [b, n, k] times [b, k, m] is [b, n, m], both 3-D with one batch size.",
      ex = "local r = lt.randn(2, 3, 4):bmm(lt.randn(2, 4, 5))", aliases = { "lt.bmm" }, see = { "t:baddbmm" } },
    { "t:baddbmm", "t:baddbmm(b1, b2, {beta=1, alpha=1}) / lt.baddbmm(t, b1, b2, opts)",
      "beta * t + alpha * (b1 bmm b2), t broadcast to the product (beta = 0 ignores t, NaNs included).",
      opts = "beta=1, alpha=1",
      ex = "local r = lt.zeros(2, 3, 5):baddbmm(lt.randn(2, 3, 4), lt.randn(2, 4, 5), {alpha = 0.5})",
      aliases = { "lt.baddbmm" } },
  },
}
