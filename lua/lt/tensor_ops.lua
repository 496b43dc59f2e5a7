-- Tensor ops written with the engine's own ops, so that each has its
-- backward through theirs: split and chunk (views), masked_fill, tril and
-- triu (a where over a position mask), bmm and baddbmm (matmul), var and std,
-- norm (the 2-norm with PyTorch's backward at zero), and F.normalize and
-- F.cosine_similarity on them. PyTorch's semantics with 1-based dims.
local core = require "lt.core"
local raise = require "lt.user_error"
local options_reader = require "lt.nn.options"
local autograd = require "lt.autograd"
local F_pad = core._pad -- F.pad

local Tensor = core.Tensor
local is_tensor = core.is_tensor

local function check_self(op, t)
  if not is_tensor(t) then raise(("%s: expected a tensor as self, got %s; call it as t:%s(...)"):format(op, type(t), op)) end
end

-- A 1-based dim (negative from the end) as a positive one.
local function resolve_dim(op, t, dim)
  if math.type(dim) ~= "integer" then raise(("%s: expected an integer dim, got %s"):format(op, tostring(dim))) end
  local n = t.ndim
  local d = dim < 0 and n + 1 + dim or dim
  if d < 1 or d > n then
    raise(("%s: dimension %d out of range for a %d-dimensional tensor"):format(op, dim, n))
  end
  return d
end

-- t:split(size, dim): pieces of size rows along dim (the last one smaller);
-- t:split({s1, s2, ...}, dim): pieces of those sizes, which must add up to
-- dim's size. Views of t, as PyTorch's.
function Tensor.split(t, sizes, dim)
  check_self("split", t)
  dim = resolve_dim("split", t, dim or 1)
  local n = t.shape[dim]
  local pieces, start = {}, 1
  if type(sizes) == "table" then
    local total = 0
    for i, s in ipairs(sizes) do
      if math.type(s) ~= "integer" or s < 0 then raise(("split: size %d must be a non-negative integer, got %s"):format(i, tostring(s))) end
      total = total + s
    end
    if total ~= n then
      raise(("split: sizes add up to %d, but dimension %d has size %d"):format(total, dim, n))
    end
    for i, s in ipairs(sizes) do
      pieces[i] = t:narrow(dim, start, s)
      start = start + s
    end
    return pieces
  end
  if math.type(sizes) ~= "integer" or sizes < 1 then
    raise(("split: expected a positive split size or a list of sizes, got %s"):format(tostring(sizes)))
  end
  repeat
    local s = math.min(sizes, n - start + 1)
    pieces[#pieces + 1] = t:narrow(dim, start, s)
    start = start + s
  until start > n
  return pieces
end

-- t:chunk(k, dim): at most k pieces of ceil(size / k) rows along dim.
function Tensor.chunk(t, k, dim)
  check_self("chunk", t)
  if math.type(k) ~= "integer" or k < 1 then raise(("chunk: expected a positive number of chunks, got %s"):format(tostring(k))) end
  local d = resolve_dim("chunk", t, dim or 1)
  local n = t.shape[d]
  if n == 0 then return { t } end
  return t:split((n + k - 1) // k, d)
end

-- t:masked_fill(mask, value): value where the bool mask (broadcast to t) is
-- true, t elsewhere; value a number or a 0-dim tensor. t's dtype.
local function check_mask(op, mask)
  if not is_tensor(mask) or mask.dtype ~= "bool" then
    raise(("%s: expected a bool mask tensor, got %s"):format(op, is_tensor(mask) and mask.dtype or type(mask)))
  end
end

function Tensor.masked_fill(t, mask, value)
  check_self("masked_fill", t)
  check_mask("masked_fill", mask)
  if is_tensor(value) then
    if value.ndim ~= 0 then raise(("masked_fill: value must be a number or a 0-dim tensor, got %d dimensions"):format(value.ndim)) end
    value = value:to(t.dtype)
  elseif type(value) ~= "number" and type(value) ~= "boolean" then
    raise(("masked_fill: expected a number for value, got %s"):format(type(value)))
  end
  local filled = core.where(mask, value, t)
  if filled.dtype ~= t.dtype then filled = filled:to(t.dtype) end
  return filled
end

function Tensor.masked_fill_(t, mask, value)
  return t:copy_(Tensor.masked_fill(t, mask, value))
end

-- tril / triu over the last two dims: keep where col - row <= k (tril) or
-- >= k (triu), k the diagonal (0 the main one, positive above it).
local function triangle(op, keep_lower)
  return function(t, k)
    check_self(op, t)
    k = k or 0
    if math.type(k) ~= "integer" then raise(("%s: expected an integer diagonal, got %s"):format(op, tostring(k))) end
    if t.ndim < 2 then raise(("%s: expected a tensor of 2 or more dimensions, got %d"):format(op, t.ndim)) end
    local rows, cols = t.shape[t.ndim - 1], t.shape[t.ndim]
    local offset = core.arange(cols):view(1, cols) - core.arange(rows):view(rows, 1)
    local mask = keep_lower and offset:le(k) or offset:ge(k)
    local zero = t.dtype == "bool" and false or 0
    local r = core.where(mask:to(t.device), t, zero)
    if r.dtype ~= t.dtype then r = r:to(t.dtype) end
    return r
  end
end

Tensor.tril, Tensor.triu = triangle("tril", true), triangle("triu", false)
function Tensor.tril_(t, k) return t:copy_(Tensor.tril(t, k)) end
function Tensor.triu_(t, k) return t:copy_(Tensor.triu(t, k)) end

-- bmm: [b, n, k] @ [b, k, m], both 3-D with one batch size.
function Tensor.bmm(a, b)
  check_self("bmm", a)
  if not is_tensor(b) then raise(("bmm: expected a tensor, got %s"):format(type(b))) end
  if a.ndim ~= 3 or b.ndim ~= 3 then
    raise(("bmm: expected 3-D tensors, got %d-D and %d-D"):format(a.ndim, b.ndim))
  end
  if a.shape[1] ~= b.shape[1] then
    raise(("bmm: batch sizes differ: %d and %d"):format(a.shape[1], b.shape[1]))
  end
  return a:matmul(b)
end

-- baddbmm: beta input + alpha (b1 @ b2), opts {beta = 1, alpha = 1}.
function Tensor.baddbmm(input, b1, b2, opts)
  check_self("baddbmm", input)
  local beta, alpha = 1, 1
  if opts ~= nil then
    if type(opts) ~= "table" then raise(("baddbmm: expected an options table, got %s"):format(type(opts))) end
    for key, v in pairs(opts) do
      if key ~= "beta" and key ~= "alpha" then options_reader.unknown("baddbmm", key, { alpha = true, beta = true }) end
      if type(v) ~= "number" then raise(("baddbmm: %s must be a number, got %s"):format(key, type(v))) end
    end
    beta, alpha = opts.beta or 1, opts.alpha or 1
  end
  local product = Tensor.bmm(b1, b2)
  if alpha ~= 1 then product = product * alpha end
  if beta == 0 then return product end -- PyTorch: input ignored, its NaNs too
  return (beta == 1 and input or input * beta) + product
end

-- var / std over dims (nil: all; a number or a list), opts {correction = 1,
-- keepdim = false}: sum((x - mean)^2) / (N - correction), floating dtypes.
local function variance(op, t, dims, opts)
  check_self(op, t)
  local correction, keepdim = 1, false
  if type(dims) == "table" and dims[1] == nil and opts == nil then dims, opts = nil, dims end
  if opts ~= nil then
    if type(opts) ~= "table" then raise(("%s: expected an options table, got %s"):format(op, type(opts))) end
    for key in pairs(opts) do
      if key ~= "correction" and key ~= "keepdim" then raise(("%s: unknown option '%s'"):format(op, tostring(key))) end
    end
    if opts.correction ~= nil then correction = opts.correction end
    if opts.keepdim ~= nil then keepdim = opts.keepdim end
  end
  if type(correction) ~= "number" then raise(("%s: correction must be a number, got %s"):format(op, type(correction))) end
  local list = dims == nil and {} or (type(dims) == "table" and dims or { dims })
  local count = 1
  if dims == nil then
    count = t:numel()
  else
    for _, d in ipairs(list) do count = count * t.shape[resolve_dim(op, t, d)] end
  end
  local mean = dims == nil and t:mean() or t:mean(dims, true)
  local centred = t - mean
  local squares = centred * centred
  local total = dims == nil and squares:sum() or squares:sum(dims, keepdim)
  if dims == nil and keepdim then
    local ones = {}
    for i = 1, t.ndim do ones[i] = 1 end
    total = total:view(ones)
  end
  return total / math.max(count - correction, 0)
end

function Tensor.var(t, dims, opts) return variance("var", t, dims, opts) end
function Tensor.std(t, dims, opts) return variance("std", t, dims, opts):sqrt() end

-- dims (nil: every dim; a number; a list) as a list of positive dims.
local function dim_list(op, t, dims)
  local list = {}
  if dims == nil then
    for d = 1, t.ndim do list[d] = d end
  else
    for i, d in ipairs(type(dims) == "table" and dims or { dims }) do list[i] = resolve_dim(op, t, d) end
  end
  return list
end

-- The shape with the dims of list removed (keepdim false).
local function reduced_shape(t, list)
  local drop, shape = {}, {}
  for _, d in ipairs(list) do drop[d] = true end
  for d = 1, t.ndim do
    if not drop[d] then shape[#shape + 1] = t.shape[d] end
  end
  return shape
end

-- The 2-norm as one node: backward x g / norm, and 0 where the norm is 0
-- (PyTorch's; through sqrt it would be 0 / 0).
local Norm2 = autograd.Function:extend("NormBackward")

function Norm2.forward(ctx, x, list)
  local n = (x * x):sum(list, true):sqrt()
  ctx:save_for_backward(x, n)
  return n
end

function Norm2.backward(ctx, g)
  local x, n = ctx:saved_tensors()
  local scale = core.where(n:eq(0), 0, g / n)
  return x * scale
end

-- t:norm(p, dims, {keepdim = false}): p = 2 (default), 1, math.huge, or any
-- other positive number, over dims (nil: all), as torch.linalg.vector_norm.
function Tensor.norm(t, p, dims, opts)
  check_self("norm", t)
  p = p or 2
  if type(p) ~= "number" or p <= 0 then raise(("norm: p must be a positive number, got %s"):format(tostring(p))) end
  if not t.dtype:match("^float") and t.dtype ~= "bfloat16" then
    raise(("norm: expected a floating tensor, got %s"):format(t.dtype))
  end
  local keepdim = false
  if opts ~= nil then
    if type(opts) ~= "table" then raise(("norm: expected an options table, got %s"):format(type(opts))) end
    for key in pairs(opts) do
      if key ~= "keepdim" then raise(("norm: unknown option '%s'"):format(tostring(key))) end
    end
    keepdim = opts.keepdim == true
  end
  local list = dim_list("norm", t, dims)
  local n
  if p == 2 then
    n = Norm2.apply(t, list)
  elseif p == 1 then
    n = t:abs():sum(list, true)
  elseif p == math.huge then
    n = t:abs()
    for _, d in ipairs(list) do n = n:max(d, true) end
  else
    n = t:abs():pow(p):sum(list, true):pow(1 / p)
  end
  if keepdim then return n end
  return n:view(reduced_shape(t, list))
end

-- t:cumsum(dim): running sums along dim (integers and bool give int64, as
-- PyTorch). A Hillis-Steele scan: log2(n) rounds, each adding the sums so
-- far shifted by 1, 2, 4, ... places (a narrow padded with zeros), so the
-- backward is that of pad, narrow and add; no round saves a tensor.
function Tensor.cumsum(t, dim)
  check_self("cumsum", t)
  dim = resolve_dim("cumsum", t, dim)
  local x = t
  if not (t.dtype:match("^float") or t.dtype == "bfloat16") then x = t:to("int64") end
  local n = x.shape[dim]
  local pad = {}
  for i = 1, 2 * (x.ndim - dim + 1) do pad[i] = 0 end
  local front = 2 * (x.ndim - dim) + 1 -- pad's slot for the start of dim (last dims first)
  local shift = 1
  while shift < n do
    pad[front] = shift
    x = x + F_pad(x:narrow(dim, 1, n - shift), pad)
    shift = shift * 2
  end
  if rawequal(x, t) then x = t:clone() end -- a new tensor, as for every other length
  return x
end

-- F.normalize(x, {p = 2, dim = 2, eps = 1e-12}): x / max(norm(x), eps) along dim.
local function normalize(x, opts)
  check_self("normalize", x)
  local p, dim, eps = 2, 2, 1e-12
  if opts ~= nil then
    if type(opts) ~= "table" then raise(("normalize: expected an options table, got %s"):format(type(opts))) end
    for key in pairs(opts) do
      if key ~= "p" and key ~= "dim" and key ~= "eps" then raise(("normalize: unknown option '%s'"):format(tostring(key))) end
    end
    p, dim, eps = opts.p or p, opts.dim or dim, opts.eps or eps
  end
  if x.ndim == 1 and opts == nil then dim = 1 end
  local n = x:norm(p, dim, { keepdim = true }):clamp(eps)
  return x / n
end

-- F.cosine_similarity(x1, x2, {dim = 2, eps = 1e-8}): the cosine along dim,
-- x1 and x2 broadcast, each norm kept from below eps (PyTorch's).
local function cosine_similarity(x1, x2, opts)
  check_self("cosine_similarity", x1)
  if not is_tensor(x2) then raise(("cosine_similarity: expected a tensor, got %s"):format(type(x2))) end
  local dim, eps = 2, 1e-8
  if opts ~= nil then
    if type(opts) ~= "table" then raise(("cosine_similarity: expected an options table, got %s"):format(type(opts))) end
    for key in pairs(opts) do
      if key ~= "dim" and key ~= "eps" then raise(("cosine_similarity: unknown option '%s'"):format(tostring(key))) end
    end
    dim, eps = opts.dim or dim, opts.eps or eps
  end
  if x1.ndim == 1 and x2.ndim == 1 and (opts == nil or opts.dim == nil) then dim = 1 end
  local n1 = x1:norm(2, dim, { keepdim = true }):clamp(eps)
  local n2 = x2:norm(2, dim, { keepdim = true }):clamp(eps)
  return ((x1 / n1) * (x2 / n2)):sum(dim)
end

return { normalize = normalize, cosine_similarity = cosine_similarity }
