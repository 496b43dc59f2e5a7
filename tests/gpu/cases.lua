-- The CUDA-against-CPU cases (ggml's test-backend-ops idea): every op run on
-- the same inputs on both backends, forward results and input gradients
-- compared within the dtype's tolerance. Used by tests/gpu/compare_backends.lua
-- (a table for scripts/gpu_check.sh) and tests/lua/cuda_spec.lua (the suite,
-- when a device is present).
--   local cases = dofile("tests/gpu/cases.lua")
--   local rows, failures = cases.run({quick = true})
local lt = lt or require "lt"
local F = lt.nn.functional

local cases = {}

-- Half types round each result once to 8 or 11 bits (and reductions add
-- many rounded terms); float32 differs only by summation order and libm.
cases.tol = {float32 = 1e-4, float64 = 1e-10, float16 = 2e-2, bfloat16 = 1e-1, int64 = 0, int32 = 0,
  uint8 = 0, bool = 0}

-- max |a - b| relative to the reference's largest finite magnitude (at
-- least 1). Shapes must match (a wrong shape must not broadcast); a NaN must
-- sit where the reference has one and an infinity where it has the same
-- one: those places count as equal, and the other elements are compared.
local function max_error(a, b)
  if a:dim() ~= b:dim() then return math.huge end
  for d = 1, a:dim() do if a:size(d) ~= b:size(d) then return math.huge end end
  if a:numel() == 0 then return 0 end
  a, b = a:double(), b:double()
  local nan_a, nan_b = a:ne(a), b:ne(b)
  if not nan_a:eq(nan_b):min():item() then return math.huge end -- NaN on one side only
  local d = lt.where(a:eq(b), 0, (a - b):abs()) -- equal infinities: 0, not inf - inf
  d = lt.where(nan_b, 0, d)
  local mag = b:abs()
  local scale = lt.where(mag:lt(math.huge), mag, 0):max():item()
  return d:max():item() / math.max(1, scale)
end
cases.max_error = max_error

local function on(dev, t)
  if not lt.is_tensor(t) then return t end
  local c = t:to(dev)
  if t.requires_grad then c = c:detach():requires_grad_(true) end
  return c
end

-- Runs fn on inputs (tensors or other values) on the CPU and on CUDA;
-- floating inputs marked requires_grad also get their gradients compared,
-- through the sum of the output times a fixed random weight.
local device = "cuda" -- cases.run's opts.device ("cpu" checks the cases themselves)

local function compare(fn, inputs, grads)
  local function run(dev)
    local args = {}
    for i = 1, inputs.n or #inputs do args[i] = on(dev, inputs[i]) end
    local out = fn(table.unpack(args, 1, inputs.n or #inputs))
    local g = {}
    if grads then
      local w = grads.weight or lt.randn(out.shape, {dtype = out.dtype})
      grads.weight = w
      ;(out * w:to(dev)):sum():backward()
      for i = 1, inputs.n or #inputs do
        if lt.is_tensor(args[i]) and args[i].requires_grad then g[#g + 1] = args[i].grad:cpu() end
      end
    end
    return out:cpu(), g
  end
  local want, want_g = run("cpu")
  local got, got_g = run(device)
  local e = max_error(got, want)
  for i, g in ipairs(got_g) do e = math.max(e, max_error(g, want_g[i])) end
  return e
end

-- batch_norm(x, rm, rv, w, b) on the CPU and on CUDA from the same inputs
-- (each run updates its own copy of the running statistics): the output,
-- the gradients of x, w and b (those given) and the updated statistics
-- compared. Every result must keep PyTorch's dtype: out and grad_input x's,
-- the statistics and the weight and bias gradients their own.
local function compare_batch_norm(x, w, b, rm, rv, training)
  local weight = lt.randn(x.shape, {dtype = x.dtype})
  local function check(dev, what, t, want)
    if t.dtype ~= want then
      error(string.format("%s: %s of dtype %s, expected %s", dev, what, t.dtype, want))
    end
  end
  local function run(dev)
    local xd, wd, bd = on(dev, x), w and on(dev, w), b and on(dev, b)
    local m, v = rm and rm:clone():to(dev), rv and rv:clone():to(dev)
    local out = F.batch_norm(xd, m, v, wd, bd, {training = training, momentum = 0.1, eps = 1e-5})
    check(dev, "output", out, x.dtype)
    ;(out * weight:to(dev)):sum():backward()
    local r = {out:cpu(), xd.grad:cpu()}
    check(dev, "grad_input", xd.grad, x.dtype)
    -- the parameters' gradients, then the statistics themselves
    for _, p in ipairs {{"grad_weight", w, wd and wd.grad}, {"grad_bias", b, bd and bd.grad},
      {"running_mean", rm, m}, {"running_var", rv, v}} do
      if p[2] then
        if not p[3] then error(dev .. ": no " .. p[1]) end
        check(dev, p[1], p[3], p[2].dtype)
        r[#r + 1] = p[3]:cpu()
      end
    end
    return r
  end
  local want, got = run("cpu"), run(device)
  local e = 0
  for i = 1, #want do e = math.max(e, max_error(got[i], want[i])) end
  return e
end

-- The rows of one X-macro list of lt/ops.h: each row's name and its columns
-- (LT_UNARY_OPS: name, node, dtype rule, saves, autocast; LT_BINARY_OPS:
-- name, node, kind, autocast).
local function op_rows(list)
  local header = assert(io.open("engine/include/lt/ops.h")):read("a")
  local rows = {}
  local body = assert(header:match("#define " .. list .. "%(X%)(.-)\n\n"), list)
  for cols in body:gmatch("X%(([^)]*)%)") do
    local row = {}
    for c in cols:gmatch("[^,%s]+") do row[#row + 1] = c end
    rows[#rows + 1] = {name = row[2], rule = row[4]}
  end
  return rows
end
local UNARY_ROWS, BINARY_ROWS = op_rows("LT_UNARY_OPS"), op_rows("LT_BINARY_OPS")
local UNARY_OPS = {}
for i, r in ipairs(UNARY_ROWS) do UNARY_OPS[i] = r.name end
local NEEDS_POSITIVE = {log = true, sqrt = true, rsqrt = true, reciprocal = true}

local function add_elementwise(add, dtype, shape)
  local a = lt.randn(shape, {dtype = dtype})
  local b = lt.randn(shape, {dtype = dtype})
  local pos = a:abs() + 0.5
  for _, op in ipairs {"neg", "exp", "abs", "relu", "sigmoid", "tanh", "sqrt"} do
    local x = op == "sqrt" and pos or a
    add(op, function() return compare(function(t) return t[op](t) end, {x}) end)
  end
  -- The whole table, forward and backward, on the small shapes.
  if #shape <= 2 and shape[1] <= 33 then
    for _, op in ipairs(UNARY_OPS) do
      local x = NEEDS_POSITIVE[op] and pos or a
      local differentiable = op ~= "logical_not"
      add("unary " .. op .. (differentiable and " fwd+bwd" or ""), function()
        local leaf = differentiable and x:clone():requires_grad_() or x
        return compare(function(t) return t[op](t) end, {leaf}, differentiable and {} or nil)
      end)
    end
  end
  for _, op in ipairs {"add", "sub", "mul", "div", "remainder", "floor_divide"} do
    add(op, function() return compare(function(x, y) return x[op](x, y) end, {a, pos}) end)
  end
  -- The binary table, forward and backward where PyTorch differentiates
  -- (relu_grad, ReLU's backward kernel, runs in the unary relu's backward).
  if #shape <= 2 and shape[1] <= 33 then
    for _, r in ipairs(BINARY_ROWS) do
      local op = r.name
      local differentiable = r.rule == "ARITH" or r.rule == "DIVIDE" or op == "remainder"
      if r.rule ~= "GRAD" then
        local x = op == "pow" and pos or a
        local y = r.rule == "COMPARE" and b or (op == "pow" and a or pos)
        add("binary " .. op .. (differentiable and " fwd+bwd" or ""), function()
          local lx = differentiable and x:clone():requires_grad_() or x
          local ly = differentiable and y:clone():requires_grad_() or y
          return compare(function(s, t) return s[op](s, t) end, {lx, ly}, differentiable and {} or nil)
        end)
      end
    end
    add("prod", function() return compare(function(x) return (x * 0.5 + 1):prod(-1) end, {a}) end)
    add("where", function()
      return compare(function(c, x, y) return lt.where(c, x, y) end, {a:gt(0), a, b})
    end)
    add("fill_", function() return compare(function(x) return x:clone():fill_(0.25) end, {a}) end)
    add("item", function()
      return compare(function(x) return lt.tensor({x:max():item()}, {dtype = x.dtype}) end, {a})
    end)
    -- A pinned host copy sent to the device without waiting, and back.
    add("to_non_blocking", function()
      return compare(function(x)
        local pinned = x:to("cpu"):pin_memory()
        return pinned:to(x.device, {non_blocking = true}) * 2
      end, {a})
    end)
  end
  local row = lt.randn({shape[#shape]}, {dtype = dtype})
  add("add_bcast", function() return compare(function(x, y) return x + y end, {a, row}) end)
  add("clamp", function() return compare(function(x) return x:clamp(-0.5, 0.5) end, {a}) end)
  add("sum", function() return compare(function(x) return x:sum() end, {a}) end)
  add("sum_last", function() return compare(function(x) return x:sum(-1) end, {a}) end)
  add("mean_first", function() return compare(function(x) return x:mean(1) end, {a}) end)
  add("max_last", function() return compare(function(x) return (x:max(-1)) end, {a}) end)
  add("argmax", function() return compare(function(x) return x:argmax(-1) end, {a}) end)
  -- Over the first dim: rows of 3 to 33 elements (the short-row kernels),
  -- with ties and NaNs, whose winner is the first position.
  local ties = lt.where(a:gt(1.5), lt.full(shape, 0 / 0, {dtype = dtype}), (a * 2):round())
  add("max_first_ties", function() return compare(function(x) return (x:max(1)) end, {ties}) end)
  add("argmin_first_ties", function() return compare(function(x) return x:argmin(1) end, {ties}) end)
  add("transpose", function() return compare(function(x) return x:t():contiguous() end,
    {#shape == 2 and a or a:reshape(-1, shape[#shape])}) end)
end

local function add_matmul(add, dtype, mm)
  local a, b = lt.randn(mm[1], {dtype = dtype}), lt.randn(mm[2], {dtype = dtype})
  add("matmul", function() return compare(function(x, y) return lt.matmul(x, y) end, {a, b}) end)
end

local function grad(t) return t:requires_grad_(true) end

-- The nn ops, forward and backward.
local function add_nn(add, dtype)
  local opts = {dtype = dtype}
  local function rand(...) return grad(lt.randn({...}, opts)) end
  add("linear", function()
    return compare(F.linear, {rand(6, 33), rand(17, 33), rand(17)}, {})
  end)
  add("linear_nobias", function()
    return compare(F.linear, {rand(2, 5, 16), rand(8, 16), n = 3}, {})
  end)
  for _, c in ipairs {
    {"conv2d", {2, 3, 9, 9}, {8, 3, 3, 3}, {padding = 1}},
    {"conv2d_s2", {2, 4, 11, 10}, {6, 4, 3, 3}, {stride = 2}},
    {"conv2d_dil", {1, 2, 12, 12}, {4, 2, 3, 3}, {dilation = 2, padding = 2}},
    {"conv2d_grp", {2, 4, 8, 8}, {6, 2, 3, 3}, {groups = 2, padding = 1}},
  } do
    add(c[1], function()
      return compare(function(x, w, b) return F.conv2d(x, w, b, c[4]) end,
        {rand(table.unpack(c[2])), rand(table.unpack(c[3])), rand(c[3][1])}, {})
    end)
  end
  -- F.pad: the fill and copy kernels on strided views; with a crop, the
  -- backward pads the gradient back with zeros, without one it narrows it
  for _, c in ipairs {{"pad", {1, 2, 0, 3}}, {"pad_crop", {1, -2, -1, 3, 2, 0}}} do
    add(c[1], function()
      return compare(function(x) return F.pad(x, c[2], {value = 0.5}) end, {rand(2, 3, 5, 6)}, {})
    end)
  end
  add("max_pool2d", function()
    return compare(function(x) return F.max_pool2d(x, 2) end, {rand(2, 3, 8, 9)}, {})
  end)
  add("max_pool2d_ovl", function()
    return compare(function(x) return F.max_pool2d(x, 3, {stride = 2, padding = 1, ceil_mode = true}) end,
      {rand(1, 2, 9, 9)}, {})
  end)
  add("avg_pool2d", function()
    return compare(function(x) return F.avg_pool2d(x, 3, {stride = 2, padding = 1}) end,
      {rand(2, 3, 9, 8)}, {})
  end)
  add("avg_pool2d_divisor", function()
    return compare(function(x)
      return F.avg_pool2d(x, 3, {stride = 2, padding = 1, ceil_mode = true, divisor_override = 5})
    end, {rand(2, 3, 9, 8)}, {})
  end)
  -- batch_norm in every dtype, forward and backward (the running statistics
  -- after the call compared too). With float16/bfloat16 input the CUDA
  -- kernels take x as it is (cuDNN's mixed-precision batch norm) while the
  -- CPU converts it to float32: the reference is that conversion.
  local half = dtype == "float16" or dtype == "bfloat16"
  local f32 = {dtype = "float32"}
  for _, training in ipairs {true, false} do
    local mode = training and "train" or "eval"
    -- weight, bias and statistics in the input's dtype
    add("batch_norm_" .. mode, function()
      return compare_batch_norm(rand(4, 5, 3, 3), rand(5), rand(5), lt.randn({5}, opts),
        lt.rand({5}, opts) + 0.5, training)
    end)
    if half then
      -- 16-bit input with float32 weight, bias and statistics: a BatchNorm
      -- module after a lowered conv under autocast, PyTorch's cuDNN case
      for _, shape in ipairs {{4, 5, 3, 3}, {8, 16, 10, 10}} do
        local c = shape[2]
        add("batch_norm_mixed_" .. mode, function()
          return compare_batch_norm(rand(table.unpack(shape)), grad(lt.randn({c}, f32)),
            grad(lt.randn({c}, f32)), lt.randn({c}, f32), lt.rand({c}, f32) + 0.5, training)
        end, table.concat(shape, "x"))
      end
    end
  end
  if half then
    -- no affine parameters and no running statistics (training only)
    add("batch_norm_mixed_bare", function()
      return compare_batch_norm(rand(4, 6, 5), nil, nil, nil, nil, true)
    end)
    -- conv2d then batch_norm under autocast, from float32 leaves: the conv
    -- runs in dtype, batch_norm keeps it with its float32 parameters, and
    -- every gradient reaches its float32 leaf
    add("batch_norm_autocast", function()
      local function fn(x, w, bw, bb, rm, rv)
        local device_type = x.device:match("^cuda") and "cuda" or "cpu"
        return lt.autocast({dtype = dtype, device_type = device_type}, function()
          local y = F.conv2d(x, w, nil, {padding = 1})
          local r = F.batch_norm(y, rm, rv, bw, bb, {training = true, momentum = 0.1, eps = 1e-5})
          if y.dtype ~= dtype or r.dtype ~= dtype then
            error("autocast batch_norm: got " .. y.dtype .. " -> " .. r.dtype .. ", want " .. dtype)
          end
          return r
        end)
      end
      local stats = {lt.randn({6}, f32), lt.rand({6}, f32) + 0.5}
      return compare(function(x, w, bw, bb)
        local rm, rv = stats[1]:clone():to(x.device), stats[2]:clone():to(x.device)
        return fn(x, w, bw, bb, rm, rv)
      end, {grad(lt.randn({2, 3, 8, 8}, f32)), grad(lt.randn({6, 3, 3, 3}, f32)),
        grad(lt.randn({6}, f32)), grad(lt.randn({6}, f32))}, {})
    end)
  end
  add("layer_norm", function()
    return compare(function(x, w, b) return F.layer_norm(x, {40}, w, b) end,
      {rand(6, 40), rand(40), rand(40)}, {})
  end)
  add("layer_norm_wide", function()
    return compare(function(x) return F.layer_norm(x, {1500}) end, {rand(3, 1500)}, {})
  end)
  for _, approx in ipairs {"none", "tanh"} do
    add("gelu_" .. approx, function()
      return compare(function(x) return F.gelu(x, {approximate = approx}) end, {rand(7, 33)}, {})
    end)
  end
  for _, d in ipairs {1, 2, 3} do
    add("softmax_d" .. d, function()
      return compare(function(x) return F.softmax(x, d) end, {rand(5, 37, 6)}, {})
    end)
    add("log_softmax_d" .. d, function()
      return compare(function(x) return F.log_softmax(x, d) end, {rand(5, 37, 6)}, {})
    end)
  end
  add("softmax_long", function()
    return compare(function(x) return F.softmax(x, 2) end, {rand(3, 3000)}, {})
  end)
  -- A long middle dim with inner > 1: the tiled kernel (cuda_nn_softmax.cu).
  add("softmax_tile", function()
    return compare(function(x) return F.softmax(x, 2) end, {rand(2, 100, 40)}, {})
  end)
  add("log_softmax_tile", function()
    return compare(function(x) return F.log_softmax(x, 2) end, {rand(2, 100, 40)}, {})
  end)
  local labels = {}
  for i = 1, 32 do labels[i] = i % 10 + 1 end
  labels[3] = 0 -- ignored below
  local target = lt.tensor(labels, {dtype = "int64"})
  for _, o in ipairs {
    {reduction = "mean"}, {reduction = "sum"}, {reduction = "none"},
    {reduction = "mean", ignore_index = 0, label_smoothing = 0.1},
  } do
    local name = "cross_entropy_" .. o.reduction .. (o.label_smoothing and "_smooth" or "")
    add(name, function()
      local t = o.ignore_index and target or target:clamp(1, 10)
      return compare(function(x, y) return F.cross_entropy(x, y, o) end, {rand(32, 10), t}, {})
    end)
  end
  add("cross_entropy_weight", function()
    local w = lt.rand({10}, opts) + 0.1
    return compare(function(x, y, wt) return F.cross_entropy(x, y, {weight = wt}) end,
      {rand(32, 10), target:clamp(1, 10), w}, {})
  end)
  add("nll_loss", function()
    return compare(function(x, y) return F.nll_loss(x, y) end,
      {grad(F.log_softmax(lt.randn({16, 7}, opts), 2):detach()), lt.randint(1, 7, {16})}, {})
  end)
  add("mse_loss", function()
    return compare(function(a, b) return F.mse_loss(a, b) end, {rand(9, 13), rand(9, 13)}, {})
  end)
  -- The mask comes from lt's generator on the CPU whatever the device (the
  -- same numbers everywhere), so both runs drop the same elements.
  add("dropout", function()
    return compare(function(x)
      lt.manual_seed(11)
      return F.dropout(x, 0.3, true)
    end, {rand(7, 33)}, {})
  end)
  if dtype == "float32" or dtype == "float64" then
    add("embedding", function()
      local idx = lt.tensor({1, 4, 4, 2, 9, 1, 4}, {dtype = "int64"})
      return compare(function(w, i) return F.embedding(i, w, {padding_idx = 2}) end,
        {rand(10, 6), idx}, {})
    end)
  end
end

-- scaled_dot_product_attention (cuda_nn_attention.cu against the CPU's
-- blockwise kernel), forward and the gradients of q, k and v: sizes that are
-- not multiples of the tiles (32 keys or queries, 32 columns a chunk, 8 rows
-- a block), L != S both ways, Ev != E, masks broadcast several ways (one
-- query row with every key removed), broadcast heads, dropout from one seed.
local function add_attention(add, dtype)
  local opts = {dtype = dtype}
  local function rand(...) return grad(lt.randn({...}, opts)) end
  local function sdpa(o)
    return function(q, k, v, mask)
      if o.dropout_p then lt.manual_seed(5) end -- the same draw on both devices
      return F.scaled_dot_product_attention(q, k, v, {attn_mask = mask, is_causal = o.is_causal,
        scale = o.scale, dropout_p = o.dropout_p})
    end
  end
  add("attention", function()
    return compare(sdpa {}, {rand(2, 3, 37, 40), rand(2, 3, 45, 40), rand(2, 3, 45, 24)}, {})
  end)
  for _, ls in ipairs {{50, 37}, {20, 70}} do
    add("attention_causal", function()
      return compare(sdpa {is_causal = true}, {rand(2, ls[1], 16), rand(2, ls[2], 16), rand(2, ls[2], 8)}, {})
    end, ls[1] .. "x" .. ls[2])
  end
  add("attention_bool_mask", function()
    local mask = lt.rand(37, 45):gt(0.3)
    mask[5] = false -- a query that sees no key: zeros, zero gradients
    return compare(sdpa {}, {rand(2, 37, 16), rand(2, 45, 16), rand(2, 45, 16), mask}, {})
  end)
  add("attention_padding_mask", function()
    return compare(sdpa {}, {rand(2, 4, 9, 16), rand(2, 4, 33, 16), rand(2, 4, 33, 16),
      lt.rand(2, 1, 1, 33):gt(0.4)}, {})
  end)
  add("attention_additive_mask", function()
    return compare(sdpa {scale = 0.3}, {rand(2, 3, 21, 12), rand(2, 3, 40, 12), rand(2, 3, 40, 20),
      lt.randn({3, 21, 40}, opts)}, {})
  end)
  add("attention_broadcast_heads", function()
    return compare(sdpa {}, {rand(2, 4, 9, 16), rand(2, 1, 20, 16), rand(1, 4, 20, 16)}, {})
  end)
  add("attention_dropout", function()
    return compare(sdpa {dropout_p = 0.25}, {rand(2, 2, 19, 16), rand(2, 2, 35, 16), rand(2, 2, 35, 16)}, {})
  end)
  add("attention_wide", function()
    return compare(sdpa {is_causal = true}, {rand(1, 40, 70), rand(1, 40, 70), rand(1, 40, 100)}, {})
  end)
end

-- index_select: the device gather (any dtype: it moves bytes) with the index
-- on the device and on the CPU (a data loader's order), along each dim, with
-- repeats; the scatter back in the backward for floating types. Slices of
-- odd byte sizes take the narrow copy units.
local function add_index_select(add, dtype)
  local floating = dtype ~= "int64" and dtype ~= "uint8"
  local function data(...)
    if not floating then return lt.randint(0, 50, {...}, {dtype = dtype}) end
    return grad(lt.randn({...}, {dtype = dtype}))
  end
  local idx = lt.tensor({3, 1, 3, 5, 2}, {dtype = "int64"})
  for _, c in ipairs {{1, {6, 8}}, {2, {4, 6, 3}}, {3, {2, 3, 7}}, {1, {9}}} do
    local dim, shape = c[1], c[2]
    local name = "index_select_d" .. dim .. "_" .. table.concat(shape, "x")
    add(name, function()
      return compare(function(t, i) return t:index_select(dim, i) end, {data(table.unpack(shape)), idx},
        floating and {} or nil)
    end)
    add(name .. "_cpu_index", function()
      return compare(function(t) return t:index_select(dim, idx) end, {data(table.unpack(shape))},
        floating and {} or nil)
    end)
  end
end

-- Runs fn on the CPU and on the device; every result must be the CPU's
-- exactly: a sort's indices and permuted values, and the draws of
-- multinomial (made on the host from one generator), have one right answer.
local function compare_exact(fn, inputs)
  local function run(dev)
    local args = {}
    for i = 1, #inputs do args[i] = on(dev, inputs[i]) end
    local outs = table.pack(fn(table.unpack(args, 1, #inputs)))
    for i = 1, outs.n do outs[i] = outs[i]:cpu() end
    return outs
  end
  local want, got = run("cpu"), run(device)
  if got.n ~= want.n then return math.huge end
  for i = 1, want.n do
    if max_error(got[i], want[i]) ~= 0 then return math.huge end
  end
  return 0
end

-- sort, argsort and topk (the sort kernel: rows in shared memory, and rows
-- past its 2048-element tile in global memory), with ties, NaN and both
-- directions; gather, scatter and scatter_add (repeated targets: the last
-- write wins, adds in index order on both devices), forward and backward;
-- multinomial's draws. Floating dtypes; integer ones in add_integer.
local function add_sort_scatter(add, dtype)
  local function ties(...)
    local a = lt.randn({...}, {dtype = dtype})
    return lt.where(a:gt(1.8), lt.full(a.shape, 0 / 0, {dtype = dtype}), (a * 2):round())
  end
  local x, long = ties(33, 65), ties(3, 3000)
  add("sort_last_ties", function() return compare_exact(function(t) return t:sort() end, {x}) end)
  add("sort_first_descending", function()
    return compare_exact(function(t) return t:sort(1, {descending = true}) end, {x})
  end)
  add("sort_long_rows", function() return compare_exact(function(t) return t:sort(2) end, {long}) end)
  add("sort_3d_middle", function()
    return compare_exact(function(t) return t:sort(2, {descending = true}) end, {ties(4, 37, 5)})
  end)
  add("argsort_descending", function()
    return compare_exact(function(t) return t:argsort(2, {descending = true}) end, {x})
  end)
  add("topk_largest", function() return compare_exact(function(t) return t:topk(5, 2) end, {x}) end)
  add("topk_smallest_dim1", function()
    return compare_exact(function(t) return t:topk(3, 1, {largest = false}) end, {x})
  end)
  local r = lt.randn({6, 9}, {dtype = dtype})
  add("sort fwd+bwd", function()
    return compare(function(t) return (t:sort(2)) end, {grad(r:clone())}, {})
  end)
  add("topk fwd+bwd", function()
    return compare(function(t) return (t:topk(4, 1)) end, {grad(r:clone())}, {})
  end)
  local self = lt.randn({5, 7}, {dtype = dtype})
  local src = lt.randn({4, 7}, {dtype = dtype})
  local rows = lt.tensor({{5, 1, 2, 2, 3, 1, 4}, {1, 1, 2, 5, 3, 3, 4}, {5, 5, 5, 5, 5, 5, 5}})
  local cols = lt.tensor({{7, 1, 7}, {2, 2, 2}, {3, 6, 1}, {4, 4, 7}})
  for _, c in ipairs {{1, rows}, {2, cols}} do
    local dim, index = c[1], c[2]
    add("scatter_d" .. dim .. " fwd+bwd", function()
      return compare(function(t, i, s) return t:scatter(dim, i, s) end, {grad(self:clone()), index, grad(src:clone())}, {})
    end)
    add("scatter_add_d" .. dim .. " fwd+bwd", function()
      return compare(function(t, i, s) return t:scatter_add(dim, i, s) end,
        {grad(self:clone()), index, grad(src:clone())}, {})
    end)
    add("gather_d" .. dim .. " fwd+bwd", function()
      return compare(function(t, i) return t:gather(dim, i) end, {grad(self:clone()), index}, {})
    end)
  end
  add("scatter_value_inplace", function()
    return compare(function(t, i) return t:clone():scatter_(2, i, 0.5) end, {self, cols})
  end)
  add("scatter_add_inplace_strided", function()
    return compare(function(t, i, s) return t:t():clone():t():scatter_add_(1, i, s:t():contiguous():t()) end,
      {self, rows, src})
  end)
  if dtype == "float32" or dtype == "float64" then
    local probs = lt.rand({3, 6}, {dtype = dtype}) * lt.tensor({1, 0, 1, 1, 0, 1}, {dtype = dtype})
    add("multinomial", function()
      return compare_exact(function(p)
        lt.manual_seed(17)
        return p:multinomial(9, {replacement = true}), p:multinomial(4)
      end, {probs})
    end)
  end
end

-- Optimizer steps and the GradScaler's unscale on both backends: parameters
-- after three steps.
local function add_optim(add, dtype)
  -- RMSprop with every buffer (momentum, centered), Adagrad with lr_decay
  -- and weight decay: every branch of their kernels.
  local OPTIONS = {
    SGD = {lr = 0.1, momentum = 0.9, nesterov = true},
    RMSprop = {lr = 0.01, momentum = 0.5, centered = true, weight_decay = 0.01},
    Adagrad = {lr = 0.1, lr_decay = 0.1, weight_decay = 0.01, initial_accumulator_value = 0.1},
  }
  for _, kind in ipairs {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad"} do
    add("optim_" .. kind, function()
      local base = {lt.randn({33, 7}, {dtype = dtype}), lt.randn({5}, {dtype = dtype})}
      local grads = {}
      for s = 1, 3 do
        grads[s] = {}
        for i, p in ipairs(base) do grads[s][i] = lt.randn(p.shape, {dtype = dtype}) end
      end
      local function run(dev)
        local params = {}
        -- A copy on each device: p:to("cpu") is p itself, and the CPU run's
        -- steps would otherwise move the CUDA run's starting point.
        for i, p in ipairs(base) do params[i] = p:clone():to(dev):requires_grad_(true) end
        local o = lt.optim[kind](params, OPTIONS[kind] or {lr = 0.01, weight_decay = 0.01})
        for s = 1, 3 do
          for i, p in ipairs(params) do p.grad = grads[s][i]:to(dev) end
          o:step()
        end
        return params
      end
      local want, got = run("cpu"), run(device)
      local e = 0
      for i = 1, #want do e = math.max(e, max_error(got[i]:detach():cpu(), want[i]:detach())) end
      return e
    end)
  end
end

-- GradScaler's unscale_: gradients divided by the scale in place, the
-- flag of an infinite gradient set (a step with one is skipped).
local function add_grad_scaler(add, dtype)
  local function unscaled(with_inf)
    return function(g1, g2)
      local p1 = lt.zeros(g1.shape, {dtype = dtype, device = g1.device}):requires_grad_(true)
      local p2 = lt.zeros(g2.shape, {dtype = dtype, device = g2.device}):requires_grad_(true)
      p1.grad, p2.grad = g1:clone(), g2:clone()
      if with_inf then p2.grad:fill_(math.huge) end
      local opt = lt.optim.SGD({p1, p2}, {lr = 0.1})
      local scaler = lt.amp.GradScaler({init_scale = 1024})
      scaler:unscale_(opt)
      scaler:step(opt) -- skipped when a gradient is infinite: p stays zero
      return lt.cat({p1.grad:reshape(-1), p2.grad:reshape(-1), p1:detach():reshape(-1)})
    end
  end
  for _, with_inf in ipairs {false, true} do
    add("grad_scaler_unscale" .. (with_inf and "_inf" or ""), function()
      return compare(unscaled(with_inf), {lt.randn({9, 5}, {dtype = dtype}) * 1024,
        lt.randn({7}, {dtype = dtype}) * 1024})
    end)
  end
end

-- clip_grad_norm_: the foreach norm over a list (sizes across the CUDA chunk
-- of 65536 elements, one empty) and the in-place scale by the clamped
-- coefficient, for each norm order; the result is the total and the scaled
-- gradients in one tensor.
local function add_clip_grad_norm(add, dtype)
  local function clipped(norm_type)
    return function(g1, g2, g3)
      local params = {}
      for i, g in ipairs {g1, g2, g3} do
        params[i] = lt.zeros(g.shape, {dtype = dtype, device = g.device}):requires_grad_(true)
        params[i].grad = g:clone()
      end
      local total = lt.nn.utils.clip_grad_norm_(params, 0.5, {norm_type = norm_type})
      local parts = {total:reshape(1):float()}
      for i, p in ipairs(params) do parts[i + 1] = p.grad:reshape(-1):float() end
      return lt.cat(parts)
    end
  end
  for _, norm_type in ipairs {2, 1, 3, math.huge} do
    add("clip_grad_norm_p" .. tostring(norm_type), function()
      return compare(clipped(norm_type), {lt.randn({9, 5}, {dtype = dtype}),
        lt.randn({70001}, {dtype = dtype}), lt.zeros({0}, {dtype = dtype})})
    end)
  end
end

-- Integer and bool tensors: every op of the table that keeps their dtype
-- (float-only ops promote to float32, as the float cases run them), where
-- the CPU takes that dtype at all; second operands from 1 to 4, so that no
-- remainder or floor_divide divides by zero and pow stays small.
local function add_integer(add, dtype)
  local function ints(lo, hi) return lt.randint(lo, hi, {5, 7}):to(dtype) end
  local a = dtype == "bool" and ints(0, 1) or ints(dtype == "uint8" and 0 or -20, 20)
  local b = dtype == "bool" and ints(0, 1) or ints(1, 4)
  local function supported(fn, ...)
    return (pcall(fn, ...))
  end
  for _, r in ipairs(UNARY_ROWS) do
    local op = r.name
    local fn = function(t) return t[op](t) end
    if r.rule == "KEEP" and supported(fn, a) then
      add("unary " .. op, function() return compare(fn, {a}) end)
    end
  end
  for _, r in ipairs(BINARY_ROWS) do
    local op = r.name
    local fn = function(s, t) return s[op](s, t) end
    if r.rule ~= "GRAD" and r.rule ~= "DIVIDE" and supported(fn, a, b) then
      add("binary " .. op, function() return compare(fn, {a, b}) end)
    end
  end
  add("sum", function() return compare(function(x) return x:sum(-1) end, {a}) end)
  add("max_last", function() return compare(function(x) return (x:max(-1)) end, {a}) end)
  add("sort_last_ties", function() return compare_exact(function(x) return x:sort() end, {a}) end)
  add("topk_largest", function() return compare_exact(function(x) return x:topk(3, 1) end, {a}) end)
  local index = lt.tensor({{2, 5, 5}, {1, 1, 3}})
  add("scatter_d1", function()
    return compare(function(x, i, s) return x:scatter(1, i, s) end, {a, index, b:narrow(1, 1, 2)})
  end)
  add("scatter_add_d2", function()
    return compare(function(x, i, s) return x:scatter_add(2, i, s) end, {a, index, b:narrow(1, 1, 2)})
  end)
  add("gather_d2", function() return compare(function(x, i) return x:gather(2, i) end, {a, index}) end)
end

-- run{quick = bool, device = "cuda"}: the rows of the table and the number of failures.
function cases.run(opts)
  opts = opts or {}
  device = opts.device or "cuda"
  lt.manual_seed(0)
  local rows, failures = {}, 0
  local dtypes = opts.quick and {"float32", "float16"} or {"float32", "float64", "float16", "bfloat16"}
  -- The last two reduce many elements into few outputs: the split reductions.
  local shapes = opts.quick and {{33, 65}} or {{7}, {33, 65}, {4, 16, 130}, {300007}, {3, 70001}}
  local function add_row(dtype, name, fn, shape)
    local ok, e = pcall(fn)
    local pass = ok and e <= cases.tol[dtype]
    if not pass then failures = failures + 1 end
    rows[#rows + 1] = {op = name, dtype = dtype, shape = shape or "", error = ok and e or nil,
      pass = pass, message = not ok and tostring(e) or nil}
  end
  for _, dtype in ipairs(dtypes) do
    local function add(name, fn, shape) add_row(dtype, name, fn, shape) end
    for _, shape in ipairs(shapes) do
      add_elementwise(function(n, fn) add(n, fn, table.concat(shape, "x")) end, dtype, shape)
    end
    for _, mm in ipairs {{{8, 16}, {16, 4}}, {{64, 128}, {128, 32}}, {{3, 17, 33}, {3, 33, 9}}} do
      add_matmul(function(n, fn)
        add(n, fn, table.concat(mm[1], "x") .. "@" .. table.concat(mm[2], "x"))
      end, dtype, mm)
    end
    add_nn(add, dtype)
    add_attention(add, dtype)
    add_index_select(add, dtype)
    add_sort_scatter(add, dtype)
    if dtype ~= "float16" then add_optim(add, dtype) end
    if dtype ~= "float16" then add_grad_scaler(add, dtype) end -- PyTorch's refuses float16 gradients
    add_clip_grad_norm(add, dtype)
  end
  for _, dtype in ipairs {"int64", "int32", "uint8", "bool"} do
    add_integer(function(name, fn) add_row(dtype, name, fn) end, dtype)
  end
  -- Integer slices of 8 and 1 bytes: the widest and the narrowest copy units.
  for _, dtype in ipairs {"int64", "uint8"} do
    add_index_select(function(name, fn) add_row(dtype, name, fn) end, dtype)
  end
  return rows, failures
end

-- ---- coverage (ggml's test-backend-ops --show-coverage) ----
-- Every entry of a device's kernel tables, every op of the op table and
-- every reduction must be run by some case: cases.coverage(rows) names those
-- no case of the run reaches, and the suite fails on any.
local KERNEL_HEADERS = {"engine/core/backend.h", "engine/core/nn_backend.h", "engine/core/optim_backend.h"}
-- The cases (patterns on their names) that run each kernel-table entry.
local KERNEL_CASES = {
  binary = {"^binary ", "^add_bcast$"}, unary = {"^unary "}, clamp = {"^clamp$"}, where = {"^where$"},
  copy = {"^transpose$"}, copy_non_blocking = {"^to_non_blocking$"}, fill = {"^fill_$"},
  read_element = {"^item$"}, reduce = {"^sum", "^mean_first$", "^prod$"},
  reduce_index = {"^max_last$", "^argmax$", "_ties$"}, matmul = {"^matmul$"},
  index_select = {"^index_select_"}, sort = {"^sort_", "^argsort_", "^topk_"},
  gather = {"^gather_", "^scatter_d%d fwd%+bwd$", "^scatter_add_d%d fwd%+bwd$"}, scatter = {"^scatter"},
  linear = {"^linear"}, linear_backward = {"^linear"}, conv2d = {"^conv2d"}, conv2d_backward = {"^conv2d"},
  max_pool2d = {"^max_pool2d"}, max_pool2d_backward = {"^max_pool2d"},
  avg_pool2d = {"^avg_pool2d"}, avg_pool2d_backward = {"^avg_pool2d"},
  batch_norm = {"^batch_norm_"}, batch_norm_backward = {"^batch_norm_"},
  layer_norm = {"^layer_norm"}, layer_norm_backward = {"^layer_norm"},
  gelu = {"^gelu_"}, gelu_backward = {"^gelu_"}, masked_scale = {"^dropout$"},
  softmax = {"softmax_"}, softmax_backward = {"softmax_"},
  cross_entropy = {"^cross_entropy_"}, cross_entropy_backward = {"^cross_entropy_"},
  nll_loss = {"^nll_loss$"}, nll_loss_backward = {"^nll_loss$"},
  mse_loss = {"^mse_loss$"}, mse_loss_backward = {"^mse_loss$"},
  embedding = {"^embedding$"}, embedding_backward = {"^embedding$"},
  attention = {"^attention"}, attention_backward = {"^attention"},
  sgd_many = {"^optim_SGD$"}, adam_many = {"^optim_Adam"}, unscale_many = {"^grad_scaler_unscale"},
  rmsprop_many = {"^optim_RMSprop$"}, adagrad_many = {"^optim_Adagrad$"},
  norm_many = {"^clip_grad_norm_"}, scale_many = {"^clip_grad_norm_"},
}
-- The reductions of lt_reduce_op (LT_REDUCE_SUM, ...) and their cases.
local REDUCE_CASES = {SUM = "^sum", MEAN = "^mean_first$", PROD = "^prod$"}

local function kernel_entries()
  local entries, reductions = {}, {}
  for _, path in ipairs(KERNEL_HEADERS) do
    local text = assert(io.open(path)):read("a")
    for name in text:gmatch("lt_status %(%*([%w_]+)%)") do entries[#entries + 1] = name end
    for name in text:gmatch("LT_REDUCE_(%u+)") do reductions[#reductions + 1] = name end
  end
  return entries, reductions
end

function cases.coverage(rows)
  local names = {}
  for _, r in ipairs(rows) do names[r.op] = true end
  local function matched(pattern)
    for name in pairs(names) do if name:match(pattern) then return true end end
    return false
  end
  local missing = {}
  local entries, reductions = kernel_entries()
  for _, entry in ipairs(entries) do
    local found = false
    for _, pattern in ipairs(KERNEL_CASES[entry] or {}) do found = found or matched(pattern) end
    if not found then missing[#missing + 1] = "kernel " .. entry end
  end
  for _, op in ipairs(reductions) do
    if not (REDUCE_CASES[op] and matched(REDUCE_CASES[op])) then missing[#missing + 1] = "reduction " .. op end
  end
  for _, r in ipairs(UNARY_ROWS) do
    if not (names["unary " .. r.name] or names["unary " .. r.name .. " fwd+bwd"]) then
      missing[#missing + 1] = "unary op " .. r.name
    end
  end
  for _, r in ipairs(BINARY_ROWS) do
    if r.rule ~= "GRAD" and not (names["binary " .. r.name] or names["binary " .. r.name .. " fwd+bwd"]) then
      missing[#missing + 1] = "binary op " .. r.name
    end
  end
  return missing
end

function cases.format(row)
  return string.format("%-32s %-9s %-14s %12s %s", row.op, row.dtype, row.shape,
    row.error and string.format("%.3e", row.error) or "-",
    row.pass and "ok" or ("FAIL" .. (row.message and (": " .. row.message) or "")))
end

return cases
