-- nn.MultiheadAttention(embed_dim, num_heads, {dropout=0, bias=true,
-- add_bias_kv=false, add_zero_attn=false, kdim=, vdim=, batch_first=false,
-- dtype=, device=}): PyTorch's module with its parameter names, so that its
-- state dicts load strictly: in_proj_weight [3E, E] (or q_proj_weight,
-- k_proj_weight [E, kdim], v_proj_weight [E, vdim] when kdim or vdim differ
-- from E), in_proj_bias [3E], out_proj.weight [E, E], out_proj.bias [E],
-- bias_k and bias_v [1, 1, E] with add_bias_kv. PyTorch's initialisation:
-- xavier_uniform_ projections, zero biases, out_proj's weight as a Linear's,
-- xavier_normal_ bias_k and bias_v.
--
--   local out, weights = mha(query, key, value, {key_padding_mask=, need_weights=true,
--                            attn_mask=, average_attn_weights=true, is_causal=false})
--
-- query [L, N, E] (batch_first: [N, L, E]; unbatched: [L, E]), key [S, N, kdim],
-- value [S, N, vdim]. Masks as PyTorch's module takes them: a bool
-- key_padding_mask [N, S] or attn_mask [L, S] / [N * num_heads, L, S] is
-- true where a query must NOT attend (the opposite of F.scaled_dot_product_attention's
-- bool mask); a floating one is added to the scores.
--
-- Memory: with need_weights=false the heads go through
-- F.scaled_dot_product_attention, which never stores the L x S matrix (PyTorch's
-- fast path does the same). need_weights=true returns that matrix (averaged over
-- the heads unless average_attn_weights=false), so it is computed by the math
-- path, softmax(q k^T / sqrt(d)) v with the weights kept for backward; a query
-- row whose mask removes every key is NaN there, as in PyTorch's math path,
-- and zeros with need_weights=false, as in its SDPA.
local core = require "lt.core"
local raise = require "lt.user_error"
local shapes = require "lt.shapes"
local Module = require "lt.nn.module"
local init = require "lt.nn.initializers"
local options = require "lt.nn.options"
local Linear = require("lt.nn.linear").Linear

local Parameter = Module.Parameter
local is_tensor = core.is_tensor

local function F() return require "lt.nn.functional" end

local NAME = "MultiheadAttention"

local MultiheadAttention = Module:extend(NAME)

function MultiheadAttention:init(embed_dim, num_heads, opts)
  local o = options.read(NAME, opts, { dropout = 0, bias = true, add_bias_kv = false, add_zero_attn = false,
    batch_first = false }, { kdim = true, vdim = true, dtype = true, device = true })
  embed_dim = options.integer(NAME, "embed_dim", embed_dim, 1)
  num_heads = options.integer(NAME, "num_heads", num_heads, 1)
  if embed_dim % num_heads ~= 0 then
    raise(string.format("%s: embed_dim %d must be divisible by num_heads %d", NAME, embed_dim, num_heads))
  end
  if type(o.dropout) ~= "number" or not (o.dropout >= 0 and o.dropout < 1) then
    raise(string.format("%s: dropout must be a number in [0, 1), got %s", NAME, tostring(o.dropout)))
  end
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
  self.kdim = o.kdim ~= nil and options.integer(NAME, "kdim", o.kdim, 1) or embed_dim
  self.vdim = o.vdim ~= nil and options.integer(NAME, "vdim", o.vdim, 1) or embed_dim
  self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
  self.dropout, self.batch_first, self.add_zero_attn = o.dropout, o.batch_first, o.add_zero_attn
  local factory = options.factory(o)
  local function param(shape) return Parameter(options.tensor(NAME, core.empty, shape, factory)) end
  if self._qkv_same_embed_dim then
    self.in_proj_weight = param { 3 * embed_dim, embed_dim }
    self:register_parameter("q_proj_weight", nil)
    self:register_parameter("k_proj_weight", nil)
    self:register_parameter("v_proj_weight", nil)
  else
    self.q_proj_weight = param { embed_dim, embed_dim }
    self.k_proj_weight = param { embed_dim, self.kdim }
    self.v_proj_weight = param { embed_dim, self.vdim }
    self:register_parameter("in_proj_weight", nil)
  end
  if o.bias then
    self.in_proj_bias = param { 3 * embed_dim }
  else
    self:register_parameter("in_proj_bias", nil)
  end
  self.out_proj = Linear(embed_dim, embed_dim, { bias = o.bias, dtype = o.dtype, device = o.device })
  if o.add_bias_kv then
    self.bias_k = param { 1, 1, embed_dim }
    self.bias_v = param { 1, 1, embed_dim }
  else
    self:register_parameter("bias_k", nil)
    self:register_parameter("bias_v", nil)
  end
  self:_reset_parameters()
end

-- PyTorch's _reset_parameters (out_proj's weight keeps Linear's own init).
function MultiheadAttention:_reset_parameters()
  if self._qkv_same_embed_dim then
    init.xavier_uniform_(self.in_proj_weight)
  else
    init.xavier_uniform_(self.q_proj_weight)
    init.xavier_uniform_(self.k_proj_weight)
    init.xavier_uniform_(self.v_proj_weight)
  end
  if self.in_proj_bias ~= nil then
    init.constant_(self.in_proj_bias, 0)
    init.constant_(self.out_proj.bias, 0)
  end
  if self.bias_k ~= nil then init.xavier_normal_(self.bias_k) end
  if self.bias_v ~= nil then init.xavier_normal_(self.bias_v) end
end

local FLOATING = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
local FORWARD_DEFAULTS = { need_weights = true, average_attn_weights = true, is_causal = false }
local FORWARD_TENSORS = { key_padding_mask = true, attn_mask = true }

local function text(t) return shapes.text(t.shape) end

local function check_mask(what, m, want_dims)
  if m == nil then return end
  if not is_tensor(m) then raise(string.format("%s: %s must be a tensor, got %s", NAME, what, type(m))) end
  if m.dtype ~= "bool" and not FLOATING[m.dtype] then
    raise(string.format("%s: only bool and floating types of %s are supported, got %s", NAME, what, m.dtype))
  end
  if not want_dims[m:dim()] then
    local dims = {}
    for d in pairs(want_dims) do dims[#dims + 1] = d end
    table.sort(dims)
    raise(string.format("%s: expected %s with %s dims, got %s", NAME, what, table.concat(dims, " or "), text(m)))
  end
end

-- A mask in PyTorch's module convention (bool true: masked out; floating:
-- added) as F.scaled_dot_product_attention takes it: bool true where a query
-- takes part, or the floating one itself (in dtype).
local function sdpa_mask(m, dtype)
  if m == nil then return nil end
  if m.dtype == "bool" then return m:logical_not() end
  return m:to(dtype)
end

-- Two masks in SDPA's convention combined: both bool, true where both allow;
-- otherwise the sum with bool ones as 0 / -inf.
local function merge(a, b, dtype)
  if a == nil then return b end
  if b == nil then return a end
  if a.dtype == "bool" and b.dtype == "bool" then return a * b end -- and
  local function additive(m)
    if m.dtype ~= "bool" then return m end
    return core.zeros(m.shape, { dtype = dtype, device = m.device }):masked_fill(m:logical_not(), -math.huge)
  end
  return additive(a) + additive(b)
end

-- One column appended to a mask's last dim: a key every query may attend
-- (bias_k, the zero attention).
local function pad_key(m)
  if m == nil then return nil end
  if m.dtype == "bool" then
    local shape = m.shape
    shape[#shape] = 1
    return core.cat({ m, core.ones(shape, { dtype = "bool", device = m.device }) }, -1)
  end
  return F().pad(m, { 0, 1 })
end

-- x [T, N, E] -> [N, H, T, head_dim].
local function heads(x, h, hd)
  local t, n = x:size(1), x:size(2)
  return x:reshape(t, n, h, hd):permute(2, 3, 1, 4)
end

function MultiheadAttention:forward(query, key, value, opts)
  local o = options.read(NAME, opts, FORWARD_DEFAULTS, FORWARD_TENSORS)
  for _, pair in ipairs { { "query", query }, { "key", key }, { "value", value } } do
    if not is_tensor(pair[2]) then raise(string.format("%s: expected a tensor for %s, got %s", NAME, pair[1], type(pair[2]))) end
  end
  local kpm, attn_mask, is_causal = o.key_padding_mask, o.attn_mask, o.is_causal
  local batched = query:dim() == 3
  if not batched and query:dim() ~= 2 then
    raise(string.format("%s: query should be unbatched 2-D or batched 3-D, got %s", NAME, text(query)))
  end
  if key:dim() ~= query:dim() or value:dim() ~= query:dim() then
    raise(string.format("%s: expected key and value with %d dims like query %s, got %s and %s", NAME,
      query:dim(), text(query), text(key), text(value)))
  end
  check_mask("key_padding_mask", kpm, batched and { [2] = true } or { [1] = true })
  check_mask("attn_mask", attn_mask, { [2] = true, [3] = true })
  -- Self-attention (query, key and value one tensor) makes one projection GEMM.
  local self_attention = rawequal(query, key) and rawequal(key, value)
  if batched and self.batch_first then
    query, key, value = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2)
  end
  if not batched then
    query, key, value = query:unsqueeze(2), key:unsqueeze(2), value:unsqueeze(2)
    if kpm ~= nil then kpm = kpm:unsqueeze(1) end
  end
  local tgt_len, bsz, embed_dim = query:size(1), query:size(2), query:size(3)
  local src_len = key:size(1)
  local h, hd, E = self.num_heads, self.head_dim, self.embed_dim
  if embed_dim ~= E then
    raise(string.format("%s: expected query with embedding dim %d, got %s", NAME, E, text(query)))
  end
  if key:size(3) ~= self.kdim or value:size(3) ~= self.vdim then
    raise(string.format("%s: expected key [..., %d] and value [..., %d], got %s and %s", NAME, self.kdim,
      self.vdim, text(key), text(value)))
  end
  if key:size(1) ~= value:size(1) or key:size(2) ~= bsz or value:size(2) ~= bsz then
    raise(string.format("%s: key %s and value %s do not match query %s in sequence length or batch", NAME,
      text(key), text(value), text(query)))
  end
  if is_causal and attn_mask == nil then
    raise(NAME .. ": is_causal is a hint that attn_mask is the causal mask: pass attn_mask too")
  end
  if attn_mask ~= nil then
    local want = attn_mask:dim() == 2 and { tgt_len, src_len } or { bsz * h, tgt_len, src_len }
    if not shapes.equal(attn_mask.shape, want) then
      raise(string.format("%s: the shape of the %d-D attn_mask is %s, but should be %s", NAME, attn_mask:dim(),
        text(attn_mask), shapes.text(want)))
    end
  end
  if kpm ~= nil and (kpm:size(1) ~= bsz or kpm:size(2) ~= src_len) then
    raise(string.format("%s: expected key_padding_mask of shape %s, got %s", NAME,
      shapes.text { bsz, src_len }, shapes.text(batched and kpm.shape or { kpm:size(2) })))
  end

  -- PyTorch: with the causal hint, no padding mask and no weights wanted, the
  -- mask is dropped for SDPA's own causal mask; otherwise the mask is used.
  local causal = is_causal and kpm == nil and not o.need_weights
  if causal then attn_mask = nil end

  -- in-projection
  local F = F()
  local b_q, b_k, b_v
  if self.in_proj_bias ~= nil then
    local b = self.in_proj_bias:chunk(3)
    b_q, b_k, b_v = b[1], b[2], b[3]
  end
  local q, k, v
  if self._qkv_same_embed_dim then
    local w = self.in_proj_weight:chunk(3)
    if self_attention then
      local proj = F.linear(query, self.in_proj_weight, self.in_proj_bias):chunk(3, -1)
      q, k, v = proj[1], proj[2], proj[3]
    else
      q, k, v = F.linear(query, w[1], b_q), F.linear(key, w[2], b_k), F.linear(value, w[3], b_v)
    end
  else
    q = F.linear(query, self.q_proj_weight, b_q)
    k = F.linear(key, self.k_proj_weight, b_k)
    v = F.linear(value, self.v_proj_weight, b_v)
  end

  -- masks in SDPA's convention, as [N or 1, H or 1, L or 1, S]
  local mask = sdpa_mask(attn_mask, q.dtype)
  if mask ~= nil then
    mask = mask:dim() == 2 and mask:view(1, 1, tgt_len, src_len) or mask:view(bsz, h, tgt_len, src_len)
  end
  local pad = kpm ~= nil and sdpa_mask(kpm, q.dtype):view(bsz, 1, 1, src_len) or nil
  if self.bias_k ~= nil then
    k = core.cat({ k, self.bias_k:expand(1, bsz, E) }, 1)
    v = core.cat({ v, self.bias_v:expand(1, bsz, E) }, 1)
    mask, pad = pad_key(mask), pad_key(pad)
  end
  if self.add_zero_attn then
    k = core.cat({ k, core.zeros({ 1, bsz, E }, { dtype = k.dtype, device = k.device }) }, 1)
    v = core.cat({ v, core.zeros({ 1, bsz, E }, { dtype = v.dtype, device = v.device }) }, 1)
    mask, pad = pad_key(mask), pad_key(pad)
  end
  mask = merge(mask, pad, q.dtype)
  q, k, v = heads(q, h, hd), heads(k, h, hd), heads(v, h, hd)
  local p = self.training and self.dropout or 0

  local out, weights
  if o.need_weights then
    -- The math path: the weights are the result, so they are made and kept.
    local scores = (q * math.sqrt(1 / hd)):matmul(k:transpose(3, 4))
    if mask ~= nil then
      if mask.dtype == "bool" then
        scores = scores:masked_fill(mask:logical_not(), -math.huge)
      else
        scores = scores + mask
      end
    end
    weights = F.softmax(scores, -1)
    if p > 0 then weights = F.dropout(weights, p, true) end
    out = weights:matmul(v)
    if o.average_attn_weights then weights = weights:mean(2) end
  else
    out = F.scaled_dot_product_attention(q, k, v, { attn_mask = mask, dropout_p = p, is_causal = causal })
  end
  -- [N, H, L, hd] -> [L, N, E], then the out-projection
  out = out:permute(3, 1, 2, 4):reshape(tgt_len, bsz, E)
  out = self.out_proj(out)
  if not batched then
    out = out:squeeze(2)
    if weights ~= nil then weights = weights:squeeze(1) end
  elseif self.batch_first then
    out = out:transpose(1, 2)
  end
  return out, weights
end


return { MultiheadAttention = MultiheadAttention }
