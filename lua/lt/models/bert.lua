-- BERT encoders as Hugging Face's transformers builds them (BertModel): the same
-- module tree, so the same state_dict names, and a model.safetensors of a
-- BertModel (all-MiniLM-L6-v2, bert-base-uncased, ...) loads strictly:
--
--   embeddings.{word,position,token_type}_embeddings  embeddings.LayerNorm
--   encoder.layer.N.attention.self.{query,key,value}   encoder.layer.N.attention.output.{dense,LayerNorm}
--   encoder.layer.N.intermediate.dense                 encoder.layer.N.output.{dense,LayerNorm}
--   pooler.dense                                       (add_pooling_layer=false: none)
--
--   local m = lt.models.bert{vocab_size=30522, hidden_size=384, num_hidden_layers=6, ...}
--   local m = lt.models.bert.from_pretrained(dir)      -- config.json + model.safetensors, eval mode
--   local hidden, pooled = m(input_ids, {attention_mask=, token_type_ids=})
--   local hidden, pooled = m(tok:encode_batch(texts))  -- the tokenizer's table as it is
--
-- input_ids are lt's (1-based: Python's plus one, as lt.text gives them) [B, L];
-- attention_mask 1/0 (or bool) [B, L], 1 where a token is real; token_type_ids the
-- segment numbers as lt.text (and Python) gives them, 0 for the first sentence and
-- 1 for the second (the model looks up row id + 1). hidden is [B, L, hidden_size],
-- pooled [B, hidden_size] (tanh(dense(hidden[:, 1]))) or nil without a pooler.
-- Attention goes through F.scaled_dot_product_attention with the padding mask as a
-- bool [B, 1, 1, L] (true: attend), so a padded batch gives each sentence the
-- hidden states it has alone. Dropout as configured in training mode, none in eval.
-- The config keys are transformers' BertConfig's, with its defaults (BERT-base).
local core = require "lt.core"
local nn = require "lt.nn"
local options = require "lt.nn.options"
local raise = require "lt.user_error"

local init = nn.init
local F = nn.functional

local DEFAULTS = {
  vocab_size = 30522, hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12,
  intermediate_size = 3072, hidden_act = "gelu", hidden_dropout_prob = 0.1,
  attention_probs_dropout_prob = 0.1, max_position_embeddings = 512, type_vocab_size = 2,
  initializer_range = 0.02, layer_norm_eps = 1e-12, pad_token_id = 0, add_pooling_layer = true,
}

-- config.json keys that describe the checkpoint rather than the network (or that this
-- encoder has no use for): from_pretrained passes them over.
local BOOKKEEPING = {
  _name_or_path = true, architectures = true, model_type = true, transformers_version = true,
  gradient_checkpointing = true, use_cache = true, torch_dtype = true, dtype = true,
  classifier_dropout = true, bos_token_id = true, eos_token_id = true, id2label = true,
  label2id = true, output_past = true, tie_word_embeddings = true,
}

local ACTIVATIONS = {
  gelu = function() return nn.GELU() end,
  gelu_new = function() return nn.GELU { approximate = "tanh" } end,
  gelu_pytorch_tanh = function() return nn.GELU { approximate = "tanh" } end,
  relu = function() return nn.ReLU() end,
  tanh = function() return nn.Tanh() end,
}

local function factory(c) return { dtype = c.dtype, device = c.device } end
local function linear(c, n_in, n_out)
  return nn.Linear(n_in, n_out, { dtype = c.dtype, device = c.device })
end
local function layer_norm(c)
  return nn.LayerNorm(c.hidden_size, { eps = c.layer_norm_eps, dtype = c.dtype, device = c.device })
end

-- ---- modules (transformers' names) ----

local BertEmbeddings = nn.Module:extend("BertEmbeddings")

function BertEmbeddings:init(c)
  local f = factory(c)
  self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size,
    { padding_idx = c.pad_token_id ~= nil and c.pad_token_id + 1 or nil, dtype = f.dtype, device = f.device })
  self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size, f)
  self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size, f)
  self.LayerNorm = layer_norm(c)
  self.dropout = nn.Dropout(c.hidden_dropout_prob)
  self.max_position_embeddings = c.max_position_embeddings
end

function BertEmbeddings:forward(input_ids, token_type_ids)
  local B, L = input_ids.shape[1], input_ids.shape[2]
  if L > self.max_position_embeddings then
    raise(string.format("bert: %d tokens, more than max_position_embeddings (%d); truncate (max_length=)",
      L, self.max_position_embeddings))
  end
  local positions = core.arange(1, L + 1, { dtype = "int64", device = input_ids.device }):view(1, L)
  local types
  if token_type_ids == nil then
    types = core.ones({ B, L }, { dtype = "int64", device = input_ids.device })
  else
    types = token_type_ids:to("int64") + 1 -- segment 0 is row 1
  end
  local x = self.word_embeddings(input_ids) + self.token_type_embeddings(types)
      + self.position_embeddings(positions)
  return self.dropout(self.LayerNorm(x))
end

local BertSelfAttention = nn.Module:extend("BertSelfAttention")

function BertSelfAttention:init(c)
  if c.hidden_size % c.num_attention_heads ~= 0 then
    raise(string.format("bert: hidden_size (%d) is not a multiple of num_attention_heads (%d)",
      c.hidden_size, c.num_attention_heads))
  end
  self.num_attention_heads = c.num_attention_heads
  self.attention_head_size = c.hidden_size // c.num_attention_heads
  self.query = linear(c, c.hidden_size, c.hidden_size)
  self.key = linear(c, c.hidden_size, c.hidden_size)
  self.value = linear(c, c.hidden_size, c.hidden_size)
  self.dropout_p = c.attention_probs_dropout_prob
end

-- h [B, L, E]; mask bool [B, 1, 1, L] (true: attend) or nil.
function BertSelfAttention:forward(h, mask)
  local B, L, E = h.shape[1], h.shape[2], h.shape[3]
  local H, d = self.num_attention_heads, self.attention_head_size
  local function heads(t) return t:view(B, L, H, d):transpose(2, 3) end
  local q, k, v = heads(self.query(h)), heads(self.key(h)), heads(self.value(h))
  local out = F.scaled_dot_product_attention(q, k, v,
    { attn_mask = mask, dropout_p = self.training and self.dropout_p or 0 })
  return out:transpose(2, 3):reshape(B, L, E)
end

-- dense, dropout, then LayerNorm(x + residual): BertSelfOutput and BertOutput.
local BertSelfOutput = nn.Module:extend("BertSelfOutput")

function BertSelfOutput:init(c, n_in)
  self.dense = linear(c, n_in or c.hidden_size, c.hidden_size)
  self.LayerNorm = layer_norm(c)
  self.dropout = nn.Dropout(c.hidden_dropout_prob)
end

function BertSelfOutput:forward(x, residual)
  return self.LayerNorm(self.dropout(self.dense(x)) + residual)
end

local BertOutput = nn.Module:extend("BertOutput")
BertOutput.init = function(self, c) BertSelfOutput.init(self, c, c.intermediate_size) end
BertOutput.forward = BertSelfOutput.forward

local BertAttention = nn.Module:extend("BertAttention")

function BertAttention:init(c)
  self.self = BertSelfAttention(c)
  self.output = BertSelfOutput(c)
end

function BertAttention:forward(h, mask)
  return self.output(self.self(h, mask), h)
end

local BertIntermediate = nn.Module:extend("BertIntermediate")

function BertIntermediate:init(c)
  self.dense = linear(c, c.hidden_size, c.intermediate_size)
  local make = ACTIVATIONS[c.hidden_act]
  if make == nil then
    raise("bert: unknown hidden_act '" .. tostring(c.hidden_act) .. "' (expected gelu, gelu_new, "
      .. "gelu_pytorch_tanh, relu or tanh)")
  end
  self.intermediate_act_fn = make()
end

function BertIntermediate:forward(x) return self.intermediate_act_fn(self.dense(x)) end

local BertLayer = nn.Module:extend("BertLayer")

function BertLayer:init(c)
  self.attention = BertAttention(c)
  self.intermediate = BertIntermediate(c)
  self.output = BertOutput(c)
end

function BertLayer:forward(h, mask)
  local a = self.attention(h, mask)
  return self.output(self.intermediate(a), a)
end

local BertEncoder = nn.Module:extend("BertEncoder")

function BertEncoder:init(c)
  local layers = {}
  for i = 1, c.num_hidden_layers do layers[i] = BertLayer(c) end
  self.layer = nn.ModuleList(layers)
end

function BertEncoder:forward(h, mask)
  for _, layer in ipairs(self.layer) do h = layer(h, mask) end
  return h
end

local BertPooler = nn.Module:extend("BertPooler")

function BertPooler:init(c)
  self.dense = linear(c, c.hidden_size, c.hidden_size)
  self.activation = nn.Tanh()
end

function BertPooler:forward(h)
  return self.activation(self.dense(h:select(2, 1)))
end

local BertModel = nn.Module:extend("BertModel")

function BertModel:init(config)
  local c = options.read("bert", config, DEFAULTS, options.factory_keys)
  for _, key in ipairs { "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "intermediate_size", "max_position_embeddings", "type_vocab_size" } do
    options.integer("bert", key, c[key], 1)
  end
  self.config = c
  self.embeddings = BertEmbeddings(c)
  self.encoder = BertEncoder(c)
  if c.add_pooling_layer then self.pooler = BertPooler(c) end
  self:_init_weights()
end

-- transformers' _init_weights: normal(0, initializer_range) weights, zero biases,
-- the padding row zero, LayerNorms ones and zeros (as made).
function BertModel:_init_weights()
  local std = self.config.initializer_range
  for _, m in ipairs(self:modules()) do
    if m.weight ~= nil and m.num_embeddings ~= nil then -- Embedding
      init.normal_(m.weight, 0, std)
      if m.padding_idx ~= nil then m.weight:detach()[m.padding_idx]:zero_() end
    elseif m.weight ~= nil and m.in_features ~= nil then -- Linear
      init.normal_(m.weight, 0, std)
      if m.bias ~= nil then init.zeros_(m.bias) end
    end
  end
end

-- A batch as the tokenizer gives it, or input_ids and {attention_mask=, token_type_ids=}.
local FORWARD_KEYS = { attention_mask = true, token_type_ids = true }

function BertModel:forward(input_ids, opts)
  if type(input_ids) == "table" and not core.is_tensor(input_ids) then
    opts = { attention_mask = input_ids.attention_mask, token_type_ids = input_ids.token_type_ids }
    input_ids = input_ids.input_ids
  end
  if not core.is_tensor(input_ids) then
    raise("bert: expected input_ids, an int64 [B, L] tensor (or a tokenizer's batch), got " .. type(input_ids))
  end
  opts = options.read("bert", opts, {}, FORWARD_KEYS)
  local unbatched = input_ids:dim() == 1
  if unbatched then input_ids = input_ids:unsqueeze(1) end
  if input_ids:dim() ~= 2 then
    raise("bert: expected input_ids [B, L], got " .. input_ids:dim() .. " dims")
  end
  local B, L = input_ids.shape[1], input_ids.shape[2]
  local function batched(t) return (t ~= nil and unbatched) and t:unsqueeze(1) or t end
  local am, tt = batched(opts.attention_mask), batched(opts.token_type_ids)
  local mask
  if am ~= nil then
    if am.shape[1] ~= B or am.shape[2] ~= L then
      raise(string.format("bert: attention_mask must be [%d, %d] like input_ids, got [%s]", B, L,
        table.concat(am.shape, ", ")))
    end
    mask = (am.dtype == "bool" and am or am:ne(0)):view(B, 1, 1, L)
  end
  local h = self.encoder(self.embeddings(input_ids, tt), mask)
  local pooled = self.pooler ~= nil and self.pooler(h) or nil
  if unbatched then
    h = h:squeeze(1)
    if pooled ~= nil then pooled = pooled:squeeze(1) end
  end
  return h, pooled
end

-- ---- constructors ----

local function bert(config) return BertModel(config) end

-- from_pretrained(dir, {dtype=, device=, add_pooling_layer=}): dir holds config.json
-- and model.safetensors (Hugging Face's layout). The load is strict, except for what
-- a BertModel checkpoint may or may not carry: embeddings.position_ids (a buffer
-- transformers once saved; lt computes the positions) and the pooler (a file without
-- one gives a model without one). What was passed over is printed on stderr (quiet=true:
-- not). Returns the model in eval mode and the config read.
local PRETRAINED_DEFAULTS = { quiet = false }
local function from_pretrained(dir, opts)
  local o = options.read("bert.from_pretrained", opts, PRETRAINED_DEFAULTS,
    { dtype = true, device = true, add_pooling_layer = true })
  if type(dir) ~= "string" then raise("bert.from_pretrained: expected a directory, got " .. type(dir)) end
  local json = require "lt.json"
  local file = io.open(dir .. "/config.json", "rb")
  if file == nil then raise("bert.from_pretrained: no config.json in " .. dir) end
  local raw = json.decode(file:read("a"), dir .. "/config.json")
  file:close()
  if raw.model_type ~= nil and raw.model_type ~= "bert" then
    raise("bert.from_pretrained: config.json is for model_type '" .. tostring(raw.model_type) .. "', not bert")
  end
  if raw.position_embedding_type ~= nil and raw.position_embedding_type ~= "absolute" then
    raise("bert.from_pretrained: only absolute position embeddings, got " .. tostring(raw.position_embedding_type))
  end
  if raw.is_decoder then raise("bert.from_pretrained: a decoder BERT (is_decoder) is not supported") end
  local config = {}
  for k, v in pairs(raw) do
    if DEFAULTS[k] ~= nil and v ~= json.null then config[k] = v end
  end
  for k in pairs(raw) do
    if DEFAULTS[k] == nil and not BOOKKEEPING[k] and k ~= "position_embedding_type" and k ~= "is_decoder"
        and k ~= "chunk_size_feed_forward" and k ~= "output_attentions" and k ~= "output_hidden_states" then
      if not o.quiet then io.stderr:write("bert.from_pretrained: config.json key '", k, "' not used\n") end
    end
  end
  config.dtype, config.device = o.dtype, o.device
  local sd = core.load(dir .. "/model.safetensors")
  -- A checkpoint saved from a task model (BertForMaskedLM, ...) prefixes the encoder's names.
  if sd["embeddings.word_embeddings.weight"] == nil and sd["bert.embeddings.word_embeddings.weight"] ~= nil then
    local inner = {}
    for k, v in pairs(sd) do
      local rest = k:match("^bert%.(.*)$")
      if rest then inner[rest] = v end
    end
    sd = inner
  end
  local skipped = {}
  if sd["embeddings.position_ids"] ~= nil then
    sd["embeddings.position_ids"] = nil
    skipped[#skipped + 1] = "embeddings.position_ids (lt computes the positions)"
  end
  local has_pooler = sd["pooler.dense.weight"] ~= nil
  if o.add_pooling_layer == nil then
    config.add_pooling_layer = has_pooler
    if not has_pooler then skipped[#skipped + 1] = "the pooler (the file has none: the model has none)" end
  else
    config.add_pooling_layer = o.add_pooling_layer
    if has_pooler and not o.add_pooling_layer then
      sd["pooler.dense.weight"], sd["pooler.dense.bias"] = nil, nil
      skipped[#skipped + 1] = "pooler.dense (add_pooling_layer=false)"
    end
  end
  local model = BertModel(config)
  model:load_state_dict(sd)
  model:eval()
  if #skipped > 0 and not o.quiet then
    io.stderr:write("bert.from_pretrained: skipped ", table.concat(skipped, "; "), "\n")
  end
  return model, model.config
end

-- mean_pool(hidden [B, L, E], attention_mask [B, L]) -> [B, E]: the mean of the
-- real tokens' hidden states (sentence-transformers' Pooling, mean mode).
local function mean_pool(hidden, attention_mask)
  local m = attention_mask:to(hidden.dtype):unsqueeze(3)
  return (hidden * m):sum(2) / m:sum(2):clamp(1e-9)
end

-- lt.models.bert: callable (bert(config)), with from_pretrained, mean_pool and the class.
return {
  bert = setmetatable({ from_pretrained = from_pretrained, mean_pool = mean_pool, BertModel = BertModel },
    { __call = function(_, config) return bert(config) end }),
}
