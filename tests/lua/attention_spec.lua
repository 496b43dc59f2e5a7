-- F.scaled_dot_product_attention and nn.MultiheadAttention: values and
-- gradients against PyTorch 2.15 (tests/fixtures/attention, written by
-- tests/fixtures/gen_attention_fixture.py), finite differences in float64,
-- dropout's statistics and reproducibility, bad inputs, autocast, and exact
-- byte counts: backward keeps q, k, v, the output and the log-sum-exp and
-- nothing of L x S, and a training step's peak grows linearly in T.
local lt = require "lt"
local nn, F = lt.nn, lt.nn.functional
local fixture = dofile("tests/fixtures/attention/cases.lua")

local function tensor(spec)
  if spec == nil then return nil end
  return lt.tensor(spec.values, { dtype = spec.dtype }):view(spec.shape)
end

-- Every element within rel * |expected| + abs (NaN where PyTorch has NaN).
local TOL = { float64 = { 1e-12, 1e-12 }, float32 = { 1e-5, 2e-6 },
  -- bfloat16 keeps 8 bits: an element may round one way in PyTorch's kernel
  -- and the other in lt's (both compute in float32 and round once)
  bfloat16 = { 2e-2, 1e-2 } }

local function assert_close(spec, actual, what, tol)
  assert(actual ~= nil, what .. ": missing")
  local want = table.concat(spec.shape, "x")
  assert(want == table.concat(actual.shape, "x"),
    ("%s: expected shape %s, got %s"):format(what, want, table.concat(actual.shape, "x")))
  assert(actual.dtype == spec.dtype, ("%s: expected %s, got %s"):format(what, spec.dtype, actual.dtype))
  local rel, abs = table.unpack(tol or TOL[spec.dtype])
  local got = actual:reshape(-1):totable()
  for i, e in ipairs(spec.values) do
    local g = got[i]
    local ok = (e ~= e and g ~= g) or e == g or math.abs(e - g) <= rel * math.abs(e) + abs
    if not ok then
      error(("%s[%d] (flat): expected %.17g, got %.17g"):format(what, i, e, g), 2)
    end
  end
end

local function leaf(spec) return tensor(spec):requires_grad_(true) end

-- Bytes the allocator hands out for a tensor of n bytes (512-byte blocks).
local function block(n) return n == 0 and 0 or ((n + 511) // 512) * 512 end
local function bytes(t) return block(t:numel() * (t.dtype == "float64" and 8 or 4)) end

describe("F.scaled_dot_product_attention against PyTorch 2.15", function()
  for _, c in ipairs(fixture.sdpa) do
    it(c.dtype .. ": " .. c.name, function()
      local q, k, v = leaf(c.q), leaf(c.k), leaf(c.v)
      local out
      do
        local region <close> = c.autocast and lt.autocast { dtype = c.autocast } or nil
        out = F.scaled_dot_product_attention(q, k, v,
          { attn_mask = tensor(c.mask), is_causal = c.is_causal, scale = c.scale })
      end
      assert_close(c.out, out, "out")
      ;(out:to(c.dtype) * tensor(c.grad_out)):sum():backward()
      local grad_tol = c.autocast and TOL[c.autocast]
      assert_close(c.gq, q.grad, "grad q", grad_tol)
      assert_close(c.gk, k.grad, "grad k", grad_tol)
      assert_close(c.gv, v.grad, "grad v", grad_tol)
    end)
  end

  it("a query whose mask removes every key gets zeros and zero gradients (PyTorch >= 2.5; NaN before)", function()
    local q, k, v = lt.randn({ 2, 3, 4 }, { requires_grad = true }), lt.randn({ 2, 5, 4 }, { requires_grad = true }),
      lt.randn({ 2, 5, 6 }, { requires_grad = true })
    local mask = lt.ones({ 3, 5 }, { dtype = "bool" })
    mask[2] = false
    local out = F.scaled_dot_product_attention(q, k, v, { attn_mask = mask })
    out:sum():backward()
    assert.equal(0, out:select(2, 2):abs():sum():item())
    assert.is_true(out:select(2, 1):abs():sum():item() > 0)
    assert.equal(0, q.grad:select(2, 2):abs():sum():item())
    assert.equal(0, out:ne(out):sum():item())
    -- the same with an additive mask of -inf, and with no key at all
    local add = lt.zeros(3, 5):masked_fill(mask:logical_not(), -math.huge)
    assert.equal(0, F.scaled_dot_product_attention(q, k, v, { attn_mask = add }):select(2, 2):abs():sum():item())
    local none = F.scaled_dot_product_attention(q, k:narrow(2, 1, 0), v:narrow(2, 1, 0))
    assert.same({ 2, 3, 6 }, none.shape)
    assert.equal(0, none:abs():sum():item())
  end)
end)

describe("nn.MultiheadAttention against PyTorch 2.15", function()
  for _, c in ipairs(fixture.mha) do
    it(c.dtype .. ": " .. c.name, function()
      local opts = { dtype = c.dtype }
      for key, value in pairs(c.opts) do opts[key] = value end
      local m = nn.MultiheadAttention(c.embed_dim, c.num_heads, opts)
      local sd = {}
      for name, spec in pairs(c.state) do sd[name] = tensor(spec) end
      m:load_state_dict(sd, { strict = true })
      m:train(c.train)
      local query = leaf(c.query)
      local key, value = query, query
      if not c.same then key, value = leaf(c.key), leaf(c.value) end
      local fwd = {}
      for name, spec in pairs(c.forward) do fwd[name] = type(spec) == "table" and tensor(spec) or spec end
      local out, weights = m(query, key, value, fwd)
      assert_close(c.out, out, "attn_output")
      local loss = (out * tensor(c.grad_out)):sum()
      if c.weights then
        assert_close(c.weights, weights, "attn_output_weights")
        loss = loss + (weights * tensor(c.grad_weights)):sum()
      else
        assert.is_nil(weights)
      end
      loss:backward()
      assert_close(c.grad_query, query.grad, "grad query")
      if not c.same then
        assert_close(c.grad_key, key.grad, "grad key")
        assert_close(c.grad_value, value.grad, "grad value")
      end
      local params = {}
      for name, p in m:named_parameters() do params[name] = p end
      for name, spec in pairs(c.param_grads) do assert_close(spec, params[name].grad, "grad " .. name) end
    end)
  end

  it("has PyTorch's parameter names and initialisation", function()
    local m = nn.MultiheadAttention(16, 4)
    local names = {}
    for name, p in m:named_parameters() do names[#names + 1] = name .. " " .. table.concat(p.shape, "x") end
    assert.same({ "in_proj_weight 48x16", "in_proj_bias 48", "out_proj.weight 16x16", "out_proj.bias 16" }, names)
    assert.equal(0, m.in_proj_bias:abs():sum():item())
    assert.equal(0, m.out_proj.bias:abs():sum():item())
    -- xavier_uniform_: bound sqrt(6 / (16 + 48)); Linear's: 1 / sqrt(16)
    assert.is_true(m.in_proj_weight:abs():max():item() <= math.sqrt(6 / 64))
    assert.is_true(m.in_proj_weight:abs():max():item() > 0.5 * math.sqrt(6 / 64))
    assert.is_true(m.out_proj.weight:abs():max():item() <= 0.25)
    local sep = nn.MultiheadAttention(8, 2, { kdim = 3, vdim = 5, bias = false, add_bias_kv = true })
    names = {}
    for name, p in sep:named_parameters() do names[#names + 1] = name .. " " .. table.concat(p.shape, "x") end
    assert.same({ "q_proj_weight 8x8", "k_proj_weight 8x3", "v_proj_weight 8x5", "bias_k 1x1x8", "bias_v 1x1x8",
      "out_proj.weight 8x8" }, names)
  end)

  it("need_weights=false gives the output of need_weights=true without the L x S weights", function()
    local m = nn.MultiheadAttention(8, 2, { batch_first = true })
    local x = lt.randn(3, 6, 8)
    local kpm = lt.zeros({ 3, 6 }, { dtype = "bool" })
    kpm[1][6] = true
    local a, w = m(x, x, x, { key_padding_mask = kpm })
    local b, none = m(x, x, x, { key_padding_mask = kpm, need_weights = false })
    assert.same({ 3, 6, 6 }, w.shape)
    assert.is_nil(none)
    assert.is_true((a - b):abs():max():item() < 1e-6)
  end)

  it("refuses bad inputs under its name", function()
    local m = nn.MultiheadAttention(8, 2)
    local x = lt.randn(4, 2, 8)
    local function err(...)
      local ok, e = pcall(m.forward, m, ...)
      assert.is_false(ok)
      return e
    end
    assert.matches("embed_dim 8 must be divisible by num_heads 3", select(2, pcall(nn.MultiheadAttention, 8, 3)))
    assert.matches("expected query with embedding dim 8, got %[4, 2, 6%]", err(lt.randn(4, 2, 6), x, x))
    assert.matches("is_causal is a hint that attn_mask is the causal mask", err(x, x, x, { is_causal = true }))
    assert.matches("the shape of the 2%-D attn_mask is %[3, 4%], but should be %[4, 4%]",
      err(x, x, x, { attn_mask = lt.zeros(3, 4) }))
    assert.matches("expected key_padding_mask of shape %[2, 4%], got %[2, 5%]",
      err(x, x, x, { key_padding_mask = lt.zeros({ 2, 5 }, { dtype = "bool" }) }))
    assert.matches("only bool and floating types of attn_mask", err(x, x, x, { attn_mask = lt.zeros({ 4, 4 }, { dtype = "int64" }) }))
    assert.matches("unknown option 'need_weight'", err(x, x, x, { need_weight = false }))
  end)
end)

describe("gradients by finite differences (float64)", function()
  local function leaves(...)
    local out = {}
    for i, shape in ipairs { ... } do out[i] = lt.randn(shape, { dtype = "float64", requires_grad = true }) end
    return table.unpack(out)
  end

  it("plain, with L != S and Ev != E", function()
    local q, k, v = leaves({ 2, 3, 4 }, { 2, 5, 4 }, { 2, 5, 3 })
    assert.is_true(lt.autograd.gradcheck(function(a, b, c) return F.scaled_dot_product_attention(a, b, c) end,
      { q, k, v }))
  end)

  it("causal, an additive mask broadcast over heads, a custom scale", function()
    local q, k, v = leaves({ 1, 2, 5, 3 }, { 1, 2, 4, 3 }, { 1, 2, 4, 2 })
    assert.is_true(lt.autograd.gradcheck(function(a, b, c)
      return F.scaled_dot_product_attention(a, b, c, { is_causal = true, scale = 0.7 })
    end, { q, k, v }))
    local mask = lt.randn({ 1, 1, 5, 4 }, { dtype = "float64" })
    assert.is_true(lt.autograd.gradcheck(function(a, b, c)
      return F.scaled_dot_product_attention(a, b, c, { attn_mask = mask })
    end, { q, k, v }))
  end)

  it("a bool padding mask with broadcast key and value, across several blocks", function()
    local q, k, v = leaves({ 2, 70, 2 }, { 1, 66, 2 }, { 1, 66, 2 })
    local mask = lt.rand(2, 1, 66):gt(0.3)
    assert.is_true(lt.autograd.gradcheck(function(a, b, c)
      return F.scaled_dot_product_attention(a, b, c, { attn_mask = mask })
    end, { q, k, v }))
  end)

  it("with dropout (the same draw each time: the seed is set inside)", function()
    local q, k, v = leaves({ 2, 4, 3 }, { 2, 6, 3 }, { 2, 6, 2 })
    assert.is_true(lt.autograd.gradcheck(function(a, b, c)
      lt.manual_seed(3)
      return F.scaled_dot_product_attention(a, b, c, { dropout_p = 0.4 })
    end, { q, k, v }))
  end)

  it("nn.MultiheadAttention, need_weights both ways", function()
    local m = nn.MultiheadAttention(4, 2, { dtype = "float64", add_bias_kv = true })
    local x = lt.randn({ 3, 2, 4 }, { dtype = "float64", requires_grad = true })
    local kpm = lt.tensor({ { false, false, true }, { false, false, false } }, { dtype = "bool" })
    for _, need in ipairs { true, false } do
      assert.is_true(lt.autograd.gradcheck(function(a)
        return (m(a, a, a, { key_padding_mask = kpm, need_weights = need }))
      end, { x }))
    end
  end)
end)

describe("strided operands", function()
  -- q, k, v as a GPT's attention makes them: one [B, T, 3C] projection chunked
  -- and split into heads (row stride 3C, head stride hs), a value broadcast
  -- over the batch (stride 0), read where they lie on the CPU; the same as
  -- from contiguous copies, gradients included.
  it("gives what contiguous copies give, forward and backward", function()
    lt.manual_seed(3)
    local B, T, H, hs = 2, 37, 3, 5
    local function run(contiguous)
      lt.manual_seed(4)
      local x = lt.randn({ B, T, 3 * H * hs }, { requires_grad = true })
      local vb = lt.randn({ 1, H, T, hs }, { requires_grad = true })
      local parts = x:chunk(3, -1)
      local function heads(t) return t:view(B, T, H, hs):transpose(2, 3) end
      local q, k, v = heads(parts[1]), heads(parts[2]), vb:expand(B, H, T, hs)
      if contiguous then q, k, v = q:contiguous(), k:contiguous(), v:contiguous() end
      local out = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
      out:backward(lt.randn(out.shape))
      return out, x.grad, vb.grad
    end
    local a, b = { run(false) }, { run(true) }
    for i, what in ipairs { "output", "x.grad", "value grad" } do
      local err = (a[i] - b[i]):abs():max():item()
      assert.is_true(err <= 1e-6, ("%s differs by %g"):format(what, err))
    end
  end)
end)

describe("dropout on the attention probabilities", function()
  -- q = k = 0 makes P uniform (1/S), and v = I reads P times the keep
  -- factors back: out[i, j] = z_ij / (S (1 - p)).
  local L, S, p = 128, 128, 0.3
  local eye = lt.arange(S):view(S, 1):eq(lt.arange(S):view(1, S)):float()
  local function probe()
    return F.scaled_dot_product_attention(lt.zeros(2, L, 4), lt.zeros(2, S, 4), eye:expand(2, S, S),
      { dropout_p = p })
  end

  it("drops a fraction p and scales the rest by 1 / (1 - p)", function()
    lt.manual_seed(123)
    local out = probe()
    local dropped = out:eq(0):sum():item() / out:numel()
    assert.is_true(math.abs(dropped - p) < 0.01, "dropped fraction " .. dropped)
    local kept = 1 / (S * (1 - p))
    assert.is_true((lt.where(out:eq(0), kept, out) - kept):abs():max():item() < 1e-7)
  end)

  it("the same seed gives the same draw, the next call a new one", function()
    lt.manual_seed(5)
    local a, b = probe(), probe()
    lt.manual_seed(5)
    local c = probe()
    assert.equal(0, (a - c):abs():max():item())
    assert.is_true((a - b):abs():max():item() > 0)
  end)

  it("is lt_bernoulli_'s draw of [..., L, S] and moves the generator as far, forward and backward alike", function()
    local q, k, v = lt.randn({ 2, 3, 5, 4 }, { requires_grad = true }), lt.randn({ 2, 3, 7, 4 }, { requires_grad = true }),
      lt.randn({ 2, 3, 7, 6 }, { requires_grad = true })
    lt.manual_seed(9)
    local out = F.scaled_dot_product_attention(q, k, v, { dropout_p = 0.25 })
    local after = lt.rand(4)
    local w = lt.randn(out.shape)
    ;(out * w):sum():backward()
    local g = { q.grad, k.grad, v.grad }
    q.grad, k.grad, v.grad = nil, nil, nil
    lt.manual_seed(9)
    local keep = lt.empty({ 2, 3, 5, 7 }, { dtype = "bool" }):bernoulli_(0.75)
    assert.equal(0, (lt.rand(4) - after):abs():max():item())
    local probs = F.softmax(q:matmul(k:transpose(3, 4)) / 2, -1)
    local want = (probs * keep:float() / 0.75):matmul(v)
    assert.is_true((out - want):abs():max():item() < 1e-6)
    ;(want * w):sum():backward()
    for i, t in ipairs { q, k, v } do assert.is_true((g[i] - t.grad):abs():max():item() < 1e-5) end
  end)

  it("dropout_p 0 draws nothing", function()
    lt.manual_seed(4)
    F.scaled_dot_product_attention(lt.randn(3, 4), lt.randn(5, 4), lt.randn(5, 2), { dropout_p = 0 })
    local a = lt.rand(3)
    lt.manual_seed(4)
    lt.randn(3, 4); lt.randn(5, 4); lt.randn(5, 2)
    assert.equal(0, (lt.rand(3) - a):abs():max():item())
  end)
end)

describe("bad inputs", function()
  local q, k, v = lt.randn(2, 3, 4), lt.randn(2, 5, 4), lt.randn(2, 5, 6)
  local function err(...)
    local before = lt.memory.allocated()
    local ok, e = pcall(F.scaled_dot_product_attention, ...)
    assert.is_false(ok)
    assert.equal(before, lt.memory.allocated()) -- nothing allocated and kept
    return e
  end

  it("names the op and the shapes, at the caller's line", function()
    local e = err(q, lt.randn(2, 5, 3), v)
    assert.matches("attention_spec.lua:%d+: scaled_dot_product_attention: query %[2, 3, 4%] and key %[2, 5, 3%] differ in the last dim %(E: 4 and 3%)", e)
    assert.matches("key %[2, 5, 4%] and value %[2, 6, 6%] differ in the sequence length %(S: 5 and 6%)",
      err(q, k, lt.randn(2, 6, 6)))
    assert.matches("the batch dims of query %[3, 3, 4%], key %[2, 5, 4%] and value %[2, 5, 6%] do not broadcast",
      err(lt.randn(3, 3, 4), k, v))
    assert.matches("attn_mask %[4, 5%] does not broadcast to the scores %[2, 3, 5%]",
      err(q, k, v, { attn_mask = lt.ones({ 4, 5 }, { dtype = "bool" }) }))
    assert.matches("expected query of at least 2 dims %[..., L, E%], got %[4%]", err(lt.randn(4), k, v))
  end)

  it("refuses is_causal with attn_mask, dropout_p outside [0, 1), a mask of another dtype", function()
    assert.matches("attn_mask must not be set when is_causal is true",
      err(q, k, v, { is_causal = true, attn_mask = lt.ones({ 3, 5 }, { dtype = "bool" }) }))
    assert.matches("dropout_p must be in %[0, 1%), got 1", err(q, k, v, { dropout_p = 1 }))
    assert.matches("dropout_p must be in %[0, 1%), got %-0.1", err(q, k, v, { dropout_p = -0.1 }))
    assert.matches("expected attn_mask of dtype bool or floating point, got int64",
      err(q, k, v, { attn_mask = lt.ones({ 3, 5 }, { dtype = "int64" }) }))
    assert.matches("expected query, key and value of one dtype, got float32, float64 and float32",
      err(q, k:double(), v))
    assert.matches("expected a floating point query, got int64", err(q:long(), k, v))
    assert.matches("unknown option 'causal'", err(q, k, v, { causal = true }))
  end)

  it("leaves the generator where it was when it refuses", function()
    lt.manual_seed(8)
    err(q, k, lt.randn(2, 6, 6), { dropout_p = 0.5 })
    local a = lt.rand(2)
    lt.manual_seed(8)
    lt.randn(2, 6, 6)
    assert.equal(0, (lt.rand(2) - a):abs():max():item())
  end)
end)

describe("autocast", function()
  it("runs attention in the region's dtype, as PyTorch's CPU and CUDA lists do, with float32 gradients", function()
    local q, k, v = lt.randn({ 2, 5, 8 }, { requires_grad = true }), lt.randn({ 2, 7, 8 }, { requires_grad = true }),
      lt.randn({ 2, 7, 8 }, { requires_grad = true })
    local out
    do
      local region <close> = lt.autocast { dtype = "bfloat16" }
      out = F.scaled_dot_product_attention(q, k, v, { attn_mask = lt.randn(5, 7) })
    end
    assert.equal("bfloat16", out.dtype)
    out:float():sum():backward()
    assert.equal("float32", q.grad.dtype)
    local want = F.scaled_dot_product_attention(q:bfloat16():float(), k:bfloat16():float(), v:bfloat16():float(),
      { attn_mask = lt.randn(5, 7):zero_() })
    assert.same(want.shape, out.shape)
  end)
end)

describe("memory (exact bytes on the CPU)", function()
  local threads
  setup(function() threads = lt.get_num_threads(); lt.set_num_threads(1) end)
  teardown(function() lt.set_num_threads(threads) end)

  -- One causal attention over T tokens, batch 1, 4 heads of 64, float32.
  local function qkv(T)
    local function x() return lt.randn({ 1, 4, T, 64 }, { requires_grad = true }) end
    return x(), x(), x()
  end

  it("saves q, k, v, the output and the log-sum-exp for backward, nothing of L x S", function()
    local T = 512
    local q, k, v = qkv(T)
    lt.gc()
    local active0, alloc0 = lt.memory.stats().by_category.activation.current, lt.memory.allocated()
    local out = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
    lt.gc()
    local lse = block(4 * T * 4) -- [1, 4, T] float32
    assert.equal(bytes(q) + bytes(k) + bytes(v) + bytes(out) + lse,
      lt.memory.stats().by_category.activation.current - active0)
    -- and all that the call left allocated is its output and the log-sum-exp
    assert.equal(bytes(out) + lse, lt.memory.allocated() - alloc0)
    out:sum():backward()
    lt.gc()
    assert.equal(active0, lt.memory.stats().by_category.activation.current)
  end)

  -- The peak of forward + backward above what the leaves hold.
  local function step_peak(T, attention)
    local q, k, v = qkv(T)
    lt.gc()
    local base = lt.memory.allocated()
    lt.memory.reset_peak()
    attention(q, k, v):sum():backward()
    local peak = lt.memory.max_allocated() - base
    lt.del(q, k, v)
    lt.gc()
    return peak
  end

  local function sdpa(q, k, v) return F.scaled_dot_product_attention(q, k, v, { is_causal = true }) end
  local function plain(q, k, v)
    local T = q:size(3)
    local mask = lt.ones({ T, T }, { dtype = "bool" }):tril():logical_not()
    local scores = q:matmul(k:transpose(3, 4)) * (1 / 8)
    return F.softmax(scores:masked_fill(mask, -math.huge), -1):matmul(v)
  end

  it("the peak of a training step grows linearly in T (and the plain formulation's does not)", function()
    local p = {}
    for i, T in ipairs { 128, 256, 512 } do p[i] = step_peak(T, sdpa) end
    assert.equal(p[3] - p[2], 2 * (p[2] - p[1]))
    local m = {}
    for i, T in ipairs { 128, 256, 512 } do m[i] = step_peak(T, plain) end
    assert.is_true(m[3] - m[2] > 3 * (m[2] - m[1]))
    assert.is_true(p[3] < m[3] / 4, ("lt %d bytes, plain %d"):format(p[3], m[3]))
  end)
end)
