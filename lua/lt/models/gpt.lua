-- gpt{vocab_size=, block_size=, n_layer=, n_head=, n_embd=, dropout=0,
-- bias=true, dtype=, device=}: a GPT as nanoGPT's model.py builds it
-- (Karpathy's nanoGPT, GPT-2's architecture): token and position embeddings,
-- n_layer pre-norm blocks
--
--   x = x + attn(ln_1(x))    causal self-attention: c_attn Linear(C, 3C), heads through
--                            F.scaled_dot_product_attention{is_causal=true}, c_proj Linear(C, C)
--   x = x + mlp(ln_2(x))     c_fc Linear(C, 4C), GELU, c_proj Linear(4C, C)
--
-- then ln_f and lm_head, a Linear(C, vocab, no bias) whose weight IS
-- transformer.wte.weight (one Parameter, weight tying). The state dict has
-- nanoGPT's names, both tied keys included (transformer.wte.weight,
-- transformer.wpe.weight, transformer.h.0.ln_1.weight,
-- transformer.h.0.attn.c_attn.weight, ..., transformer.ln_f.weight,
-- lm_head.weight), so a nanoGPT checkpoint (as safetensors) loads strictly;
-- model:parameters() lists the tied weight once.
--
--   local logits, loss = model(idx, targets)
--
-- idx [B, T] int64 token ids (1-based), T <= block_size. With targets [B, T]
-- (1-based ids) the logits are [B, T, vocab] and loss is their mean cross entropy; without
-- targets, as nanoGPT at inference, the logits of the last position only,
-- [B, 1, vocab], and no loss.
--
-- nanoGPT's initialisation: every Linear and Embedding weight normal(0, 0.02),
-- each residual projection (c_proj) normal(0, 0.02 / sqrt(2 * n_layer)),
-- biases zero, LayerNorms weight 1 and bias 0.
--
--   model:generate(idx, max_new_tokens, {temperature=1, top_k=})  -> idx [B, T + max_new_tokens]
--   model:optim_groups(weight_decay)   -> nanoGPT's configure_optimizers groups: 2-D+
--                                         parameters decayed, biases and norms not
--   model:configure_optimizers{weight_decay=0.1, lr=6e-4, betas={0.9, 0.95}, eps=1e-8}
--                                       -> an optim.AdamW over those groups
--   model:num_parameters()             -> the count, the tied weight once (nanoGPT's
--                                         get_num_params(non_embedding=false)), as every module's
--   model.checkpoint_segments = N      -> the blocks run in N segments under gradient checkpointing
local core = require "lt.core"
local nn = require "lt.nn"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local Module = nn.Module
local Linear, LayerNorm, Embedding, Dropout = nn.Linear, nn.LayerNorm, nn.Embedding, nn.Dropout

local function F() return require "lt.nn.functional" end

local M = {}

-- ---- CausalSelfAttention ----

local CausalSelfAttention = Module:extend("CausalSelfAttention")

function CausalSelfAttention:init(cfg)
  local lin = { bias = cfg.bias, dtype = cfg.dtype, device = cfg.device }
  self.c_attn = Linear(cfg.n_embd, 3 * cfg.n_embd, lin)
  self.c_proj = Linear(cfg.n_embd, cfg.n_embd, lin)
  self.attn_dropout_p = cfg.dropout
  self.resid_dropout = Dropout(cfg.dropout)
  self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
end

function CausalSelfAttention:forward(x)
  local B, T, C = x:size(1), x:size(2), x:size(3)
  local h = self.n_head
  local qkv = self.c_attn(x):chunk(3, -1)
  -- [B, T, C] -> [B, nh, T, hs]
  local function heads(t) return t:view(B, T, h, C // h):transpose(2, 3) end
  local q, k, v = heads(qkv[1]), heads(qkv[2]), heads(qkv[3])
  local y = F().scaled_dot_product_attention(q, k, v,
    { dropout_p = self.training and self.attn_dropout_p or 0, is_causal = true })
  y = y:transpose(2, 3):contiguous():view(B, T, C)
  return self.resid_dropout(self.c_proj(y))
end

-- ---- MLP ----

local MLP = Module:extend("MLP")

function MLP:init(cfg)
  local lin = { bias = cfg.bias, dtype = cfg.dtype, device = cfg.device }
  self.c_fc = Linear(cfg.n_embd, 4 * cfg.n_embd, lin)
  self.gelu = nn.GELU()
  self.c_proj = Linear(4 * cfg.n_embd, cfg.n_embd, lin)
  self.dropout = Dropout(cfg.dropout)
end

function MLP:forward(x)
  return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))
end

-- ---- Block ----

local Block = Module:extend("Block")

function Block:init(cfg)
  local ln = { bias = cfg.bias, dtype = cfg.dtype, device = cfg.device }
  self.ln_1 = LayerNorm(cfg.n_embd, ln)
  self.attn = CausalSelfAttention(cfg)
  self.ln_2 = LayerNorm(cfg.n_embd, ln)
  self.mlp = MLP(cfg)
end

function Block:forward(x)
  x = x + self.attn(self.ln_1(x))
  return x + self.mlp(self.ln_2(x))
end

-- ---- GPT ----

-- nanoGPT's ModuleDict "transformer" (wte, wpe, drop, h, ln_f): a plain
-- container, its forward is GPT's.
local Transformer = Module:extend("Transformer")
function Transformer:init(cfg)
  local factory = { dtype = cfg.dtype, device = cfg.device }
  self.wte = Embedding(cfg.vocab_size, cfg.n_embd, factory)
  self.wpe = Embedding(cfg.block_size, cfg.n_embd, factory)
  self.drop = Dropout(cfg.dropout)
  local blocks = {}
  for i = 1, cfg.n_layer do blocks[i] = Block(cfg) end
  self.h = nn.ModuleList(blocks)
  self.ln_f = LayerNorm(cfg.n_embd, { bias = cfg.bias, dtype = cfg.dtype, device = cfg.device })
end

local GPT = Module:extend("GPT")

local DEFAULTS = { dropout = 0, bias = true }
local REQUIRED = { "vocab_size", "block_size", "n_layer", "n_head", "n_embd" }

function GPT:init(config)
  local extra = { dtype = true, device = true }
  for _, k in ipairs(REQUIRED) do extra[k] = true end
  local o = options.read("gpt", config, DEFAULTS, extra)
  local cfg = { dropout = o.dropout, bias = o.bias, dtype = o.dtype, device = o.device }
  for _, k in ipairs(REQUIRED) do
    if o[k] == nil then raise("gpt: the config needs " .. k) end
    cfg[k] = options.integer("gpt", k, o[k], 1)
  end
  if cfg.n_embd % cfg.n_head ~= 0 then
    raise(("gpt: n_embd %d must be divisible by n_head %d"):format(cfg.n_embd, cfg.n_head))
  end
  if type(cfg.dropout) ~= "number" or not (cfg.dropout >= 0 and cfg.dropout < 1) then
    raise("gpt: dropout must be a number in [0, 1), got " .. tostring(cfg.dropout))
  end
  self.config = cfg
  self.transformer = Transformer(cfg)
  self.lm_head = Linear(cfg.n_embd, cfg.vocab_size, { bias = false, dtype = cfg.dtype, device = cfg.device })
  -- weight tying: one Parameter under both names
  self.transformer.wte.weight = self.lm_head.weight
  self:_init_weights()
end

-- nanoGPT's _init_weights applied to every module, then the scaled c_proj.
function GPT:_init_weights()
  local init = nn.init
  for _, m in ipairs(self:modules()) do
    local name = getmetatable(m).__name
    if name == "Linear" then
      init.normal_(m.weight, 0, 0.02)
      if m.bias ~= nil then init.zeros_(m.bias) end
    elseif name == "Embedding" then
      init.normal_(m.weight, 0, 0.02)
    end
  end
  local std = 0.02 / math.sqrt(2 * self.config.n_layer)
  for name, p in self:named_parameters() do
    if name:match("c_proj%.weight$") then init.normal_(p, 0, std) end
  end
end

function GPT:forward(idx, targets)
  if not core.is_tensor(idx) or idx:dim() ~= 2 then
    raise("GPT: expected idx, a [B, T] tensor of token ids, got " ..
      (core.is_tensor(idx) and require("lt.shapes").text(idx.shape) or type(idx)))
  end
  local B, T = idx:size(1), idx:size(2)
  if T > self.config.block_size then
    raise(("GPT: cannot forward a sequence of length %d, block size is only %d"):format(T, self.config.block_size))
  end
  local tr = self.transformer
  local pos = core.arange(1, T + 1, { dtype = "int64", device = idx.device })
  local x = tr.drop(tr.wte(idx) + tr.wpe(pos))
  x = self:_blocks(x)
  x = tr.ln_f(x)
  if targets ~= nil then
    local logits = self.lm_head(x)
    local V = logits:size(3)
    local loss = F().cross_entropy(logits:view(B * T, V), targets:reshape(B * T))
    return logits, loss
  end
  return self.lm_head(x:narrow(2, T, 1)), nil
end

-- The blocks over x; with self.checkpoint_segments = N > 0 (and grad mode
-- on), in N segments under gradient checkpointing
-- (nn.checkpoint_sequential): the activations inside a segment are
-- recomputed in backward instead of kept.
function GPT:_blocks(x)
  local list = {}
  for i, b in ipairs(self.transformer.h:children()) do list[i] = b end
  local n = self.checkpoint_segments or 0
  if n > 0 and core.is_grad_enabled() then
    return nn.checkpoint_sequential(list, math.min(n, #list), x)
  end
  for _, b in ipairs(list) do x = b(x) end
  return x
end

-- nanoGPT's generate: max_new_tokens times, the last block_size tokens
-- through the model, the last position's logits / temperature, those below
-- the top_k-th largest dropped, one token drawn from the softmax
-- (lt.multinomial, lt's RNG: lt.manual_seed makes it reproducible).
-- Runs without a graph, in eval mode (the mode is restored after).
function GPT:generate(idx, max_new_tokens, opts)
  local o = options.read("generate", opts, { temperature = 1.0 }, { top_k = true })
  max_new_tokens = options.integer("generate", "max_new_tokens", max_new_tokens, 0)
  if type(o.temperature) ~= "number" or not (o.temperature > 0) then
    raise("generate: temperature must be a positive number, got " .. tostring(o.temperature))
  end
  local top_k = o.top_k ~= nil and options.integer("generate", "top_k", o.top_k, 1) or nil
  local was_training = self.training
  self:eval()
  local ok, result = pcall(core.no_grad, function()
    for _ = 1, max_new_tokens do
      local T = idx:size(2)
      local cond = T <= self.config.block_size and idx
        or idx:narrow(2, T - self.config.block_size + 1, self.config.block_size)
      local logits = self(cond)
      logits = logits:select(2, 1) / o.temperature -- [B, V]
      if top_k then
        local v = logits:topk(math.min(top_k, logits:size(2)))
        local kth = v:narrow(2, v:size(2), 1)
        logits = logits:masked_fill(logits:lt(kth), -math.huge)
      end
      local probs = F().softmax(logits, -1)
      local nxt = probs:multinomial(1)
      idx = core.cat({ idx, nxt }, 2)
    end
    return idx
  end)
  self:train(was_training)
  if not ok then error(result, 0) end
  return result
end

-- nanoGPT's configure_optimizers groups: every parameter of 2 or more dims
-- (matmul weights, embeddings) decayed, the others (biases, LayerNorms) not.
function GPT:optim_groups(weight_decay)
  local decay, no_decay = {}, {}
  for _, p in ipairs(self:parameters()) do
    if p:dim() >= 2 then decay[#decay + 1] = p else no_decay[#no_decay + 1] = p end
  end
  return {
    { params = decay, weight_decay = weight_decay or 0.1 },
    { params = no_decay, weight_decay = 0.0 },
  }
end

function GPT:configure_optimizers(opts)
  local o = options.read("configure_optimizers", opts,
    { weight_decay = 0.1, lr = 6e-4, betas = { 0.9, 0.95 }, eps = 1e-8 })
  return require("lt.optim").AdamW(self:optim_groups(o.weight_decay), { lr = o.lr, betas = o.betas, eps = o.eps })
end

function M.gpt(config) return GPT(config) end

M.GPT = GPT

return M
