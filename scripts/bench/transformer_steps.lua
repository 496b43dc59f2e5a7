-- One transformer workload, 1 thread: prints "name median_ms best_ms median_cpu_ms" for
-- scripts/bench/transformer_steps.sh, which runs PyTorch's twin (transformer_steps.py).
--   lt scripts/bench/transformer_steps.lua NAME REPEATS [MINILM_DIR]
-- NAME:
--   gpt         one training step of scripts/train_gpt.lua's default GPT (3 layers, 4 heads,
--               96 wide, block 64, batch 32, GPL-3's characters): zero_grad, forward with the
--               loss, backward, clip_grad_norm_ at 1.0, AdamW over nanoGPT's decay groups
--   minilm      all-MiniLM-L6-v2 inference (no_grad) on 32 sentences of 64 tokens: BERT, mean
--               pooling, normalisation (sentence-transformers' modules)
--   minilm_ft   one fine-tune step on 16 pairs of 64 tokens (32 sentences): MultipleNegatives-
--               RankingLoss as scripts/minilm.lua --finetune, backward, AdamW
-- The inputs are random token ids (the shapes are what is timed); every sentence is
-- 64 real tokens (attention mask all ones).
local name, repeats, minilm_dir = arg[1], tonumber(arg[2] or "10"), arg[3]
lt.set_num_threads(1)
lt.manual_seed(0)
local F = lt.nn.functional

-- The distinct characters of the default text of scripts/train_gpt.lua.
local function gpl3_vocab()
  local f = assert(io.open("/usr/share/common-licenses/GPL-3", "rb"))
  local seen, n = {}, 0
  for c in f:read("a"):gmatch(".") do
    if not seen[c] then seen[c], n = true, n + 1 end
  end
  f:close()
  return n
end

local function gpt_step()
  local vocab, B, T = gpl3_vocab(), 32, 64
  local model = lt.models.gpt { vocab_size = vocab, block_size = T, n_layer = 3, n_head = 4, n_embd = 96 }
  model:train()
  local opt = model:configure_optimizers { weight_decay = 0.1, lr = 3e-3, betas = { 0.9, 0.95 } }
  local x, y = lt.randint(1, vocab, { B, T }), lt.randint(1, vocab, { B, T })
  return function()
    opt:zero_grad()
    local _, loss = model(x, y)
    loss:backward()
    local norm = lt.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    if lt.is_tensor(norm) then norm:free() end
    opt:step()
    loss:item()
    loss:free()
  end
end

-- sentence-transformers' pipeline: BERT, mean pooling over the mask, L2 normalisation.
local bert = require("lt.models.bert").bert
local function embed(model, batch)
  local hidden = model(batch)
  return F.normalize(bert.mean_pool(hidden, batch.attention_mask), { dim = 2 })
end

local function minilm_batch(model, n)
  local vocab = model.embeddings.word_embeddings.weight.shape[1]
  return { input_ids = lt.randint(1, vocab, { n, 64 }), token_type_ids = lt.zeros({ n, 64 }, { dtype = "int64" }),
    attention_mask = lt.ones({ n, 64 }, { dtype = "int64" }) }
end

local function minilm_model()
  return bert.from_pretrained(assert(minilm_dir, "minilm needs the model directory"), { quiet = true })
end

local function minilm_inference()
  local model = minilm_model()
  model:eval()
  local batch = minilm_batch(model, 32)
  return function()
    local g <close> = lt.no_grad()
    embed(model, batch):free()
  end
end

local function minilm_finetune()
  local model = minilm_model()
  model:train()
  local anchors, positives = minilm_batch(model, 16), minilm_batch(model, 16)
  local target = lt.arange(1, 17, { dtype = "int64" })
  local opt = lt.optim.AdamW(model:parameters(), { lr = 2e-5, weight_decay = 0.01 })
  return function()
    opt:zero_grad()
    local a, p = embed(model, anchors), embed(model, positives)
    local loss = F.cross_entropy(a:matmul(p:t()) * 20, target)
    loss:backward()
    opt:step()
    loss:item()
    loss:free()
  end
end

local makers = { gpt = gpt_step, minilm = minilm_inference, minilm_ft = minilm_finetune }
local fn = assert(makers[name], "unknown workload " .. tostring(name))()
for _ = 1, 2 do fn() end
-- Wall-clock and CPU time (os.clock: this process's, one thread), each step.
local wall, cpu = {}, {}
for i = 1, repeats do
  local t0, c0 = lt.clock(), os.clock()
  fn()
  wall[i], cpu[i] = (lt.clock() - t0) * 1000, (os.clock() - c0) * 1000
end
local function median(t)
  table.sort(t)
  local mid = (#t + 1) // 2
  return #t % 2 == 1 and t[mid] or (t[mid] + t[mid + 1]) / 2
end
local m = median(wall)
print(name, string.format("%.3f %.3f %.3f", m, wall[1], median(cpu)))
