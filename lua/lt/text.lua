-- lt.text: text to token ids in lt's convention. Every tokenizer on the Python side
-- numbers its vocabulary from 0, and lt's indices (nn.Embedding's rows included)
-- start at 1, so the ids this module hands out are the Python tokenizer's plus one:
-- they go into an lt embedding as they are.
--
--   local text = require "lt.text"
--   local tok = text.WordPiece.from_file("tokenizer.json")   -- or text.tokenizer(path)
--   local one = tok:encode("Hello, world!")     -- plain tables: input_ids, token_type_ids,
--                                               --   attention_mask, tokens
--   local batch = tok:encode_batch({"a", "b c"}, {padding = "longest", max_length = 128})
--   batch.input_ids, batch.token_type_ids, batch.attention_mask  -- int64 [B, L] tensors
--   tok:decode(one.input_ids)                   -- "hello, world!"
--   text.from_python_ids(t) / text.to_python_ids(t)   -- +1 / -1, checked
--
-- WordPiece reads a Hugging Face tokenizer.json of the BERT kind: normalizer
-- BertNormalizer, pre-tokenizer BertPreTokenizer, model WordPiece, post-processor
-- TemplateProcessing or BertProcessing, decoder WordPiece. The Unicode it knows is
-- stated in lt/text/unicode.lua: accent stripping decomposes the Latin letters
-- (Latin-1 to Latin Extended Additional), Greek, Cyrillic U+0400..U+045F and Hangul;
-- other precomposed characters keep their accents.
local json = require "lt.json"
local raise = require "lt.user_error"
local unicode = require "lt.text.unicode"

local text = {}

local byte, sub, find, format = string.byte, string.sub, string.find, string.format
local concat = table.concat

-- ---- argument checks ---------------------------------------------------------

-- Raises "fname: message" at the caller's line (lt.user_error: the first frame
-- outside lt's library, however deep inside it the check ran).
local function fail(fname, fmt, ...)
  raise(fname .. ": " .. format(fmt, ...))
end

-- A short printable rendering of a value for messages.
local function show(v)
  if type(v) == "string" then
    if #v > 40 then v = sub(v, 1, 37) .. "..." end
    return format("%q", v)
  end
  return tostring(v)
end

local function check_text(fname, s, what)
  if type(s) ~= "string" then
    fail(fname, "%s must be a string, got %s", what, type(s) == "nil" and "nil" or (type(s) .. " " .. show(s)))
  end
  local ok, bad = utf8.len(s)
  if not ok then fail(fname, "%s is not valid UTF-8 (byte %d)", what, bad) end
end

local function check_options(fname, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail(fname, "expected an options table, got %s", type(opts)) end
  for key in pairs(opts) do
    if not allowed[key] then fail(fname, "unknown option '%s'", tostring(key)) end
  end
  return opts
end

-- ---- ids from and to Python ------------------------------------------------------

local function is_tensor(v)
  local mt = getmetatable(v)
  return type(v) == "userdata" and mt and mt.__name == "lt.Tensor" or false
end

local INTEGER_DTYPES = { int64 = true, int32 = true, uint8 = true }

-- Shifts ids by delta (+1 or -1) after checking each against the convention's
-- range, low .. low + vocab_size - 1 (no upper bound without vocab_size): Lua tables
-- (nested to any depth) come back as new tables, tensors as new tensors, numbers as
-- numbers.
local function shift_ids(fname, ids, delta, low, vocab_size, convention)
  if vocab_size ~= nil and (math.type(vocab_size) ~= "integer" or vocab_size < 1) then
    fail(fname, "the vocabulary size must be a positive integer, got %s", show(vocab_size))
  end
  local high = vocab_size and low + vocab_size - 1
  local function out_of_range(value, where)
    if value < low then fail(fname, "id %d%s is below %d (%s start at %d)", value, where, low, convention, low) end
    fail(fname, "id %d%s is past a vocabulary of %d (%s are %d..%d)", value, where, vocab_size, convention, low, high)
  end
  if is_tensor(ids) then
    if not INTEGER_DTYPES[ids.dtype] then fail(fname, "expected an integer tensor of ids, got %s", ids.dtype) end
    if ids:numel() > 0 then
      local flat = ids:reshape(-1)
      local position = ids:dim() == 1 and " at position %d" or " at position %d of the flattened tensor"
      local min, at_min = flat:min(1)
      if min:item() < low then out_of_range(min:item(), format(position, at_min:item())) end
      local max, at_max = flat:max(1)
      if high and max:item() > high then out_of_range(max:item(), format(position, at_max:item())) end
    end
    -- uint8 and int32 ids widen first: 255 + 1 must not wrap.
    return (ids.dtype == "int64" and ids or ids:long()) + delta
  end
  local function walk(v, where)
    if math.type(v) ~= "integer" then
      if math.type(v) == "float" and v == math.floor(v) and v >= math.mininteger and v <= math.maxinteger then
        v = math.tointeger(v)
      else
        fail(fname, "expected integer ids, got %s%s", type(v) == "number" and show(v) or type(v), where)
      end
    end
    if v < low or (high and v > high) then out_of_range(v, where) end
    return v + delta
  end
  if type(ids) == "number" then return walk(ids, "") end
  if type(ids) ~= "table" then fail(fname, "expected ids as a table, tensor or integer, got %s", type(ids)) end
  local function walk_table(t, path)
    local out = {}
    for i, v in ipairs(t) do
      local where = path .. "[" .. i .. "]"
      if type(v) == "table" then out[i] = walk_table(v, where) else out[i] = walk(v, " at " .. where) end
    end
    return out
  end
  return walk_table(ids, "ids")
end

--- Ids from a Python tokenizer or model (0-based) to lt's (1-based): adds one.
--- ids: an integer, a (nested) table of integers or an integer tensor. With
--- vocab_size, ids at or above it are errors as well.
function text.from_python_ids(ids, vocab_size)
  return shift_ids("lt.text.from_python_ids", ids, 1, 0, vocab_size, "Python ids")
end

--- lt's ids (1-based) to Python's (0-based): subtracts one, checking the range
--- (1..vocab_size when vocab_size is given).
function text.to_python_ids(ids, vocab_size)
  return shift_ids("lt.text.to_python_ids", ids, -1, 1, vocab_size, "lt ids")
end

-- ---- reading tokenizer.json -----------------------------------------------------

local FROM_FILE = "lt.text.WordPiece.from_file"

-- json.null and absent keys alike read as nil.
local function field(t, key)
  local v = t[key]
  if v == json.null then return nil end
  return v
end

-- A section of the file that must be an object when present.
local function section(fname, t, key)
  local v = field(t, key)
  if v ~= nil and type(v) ~= "table" then fail(fname, "'%s' must be an object, got %s", key, show(v)) end
  return v
end

local function flag(t, key, default)
  local v = field(t, key)
  if v == nil then return default end
  return v
end

-- The BERT normalizer's flags; strip_accents left null follows lowercase, as in
-- Hugging Face's BertNormalizer.
local function read_normalizer(fname, cfg)
  if cfg == nil then return nil end
  if cfg.type ~= "BertNormalizer" then
    fail(fname, "unsupported normalizer '%s' (lt.text reads BertNormalizer)", tostring(cfg.type))
  end
  local lowercase = flag(cfg, "lowercase", true)
  local flags = {
    clean_text = flag(cfg, "clean_text", true),
    handle_chinese_chars = flag(cfg, "handle_chinese_chars", true),
    strip_accents = flag(cfg, "strip_accents", lowercase),
    lowercase = lowercase,
  }
  return unicode.bert_normalizer(flags), flags
end

-- A post-processor as a template per arity: lists of items, each either
-- { sequence = 1 | 2, type_id = n } or { ids = {...}, tokens = {...}, type_id = n }
-- (ids already 1-based).
local function read_post_processor(fname, cfg)
  local function special(token, id0)
    if math.type(id0) ~= "integer" then fail(fname, "special token '%s' has no integer id", tostring(token)) end
    return { ids = { id0 + 1 }, tokens = { token } }
  end
  if cfg == nil then
    return { single = { { sequence = 1, type_id = 0 } },
      pair = { { sequence = 1, type_id = 0 }, { sequence = 2, type_id = 1 } } }
  end
  if cfg.type == "BertProcessing" then
    if type(cfg.cls) ~= "table" or type(cfg.sep) ~= "table" then
      fail(fname, "BertProcessing needs cls and sep as [token, id] pairs")
    end
    local cls, sep = special(cfg.cls[1], cfg.cls[2]), special(cfg.sep[1], cfg.sep[2])
    local function item(s, type_id) return { ids = s.ids, tokens = s.tokens, type_id = type_id } end
    return {
      single = { item(cls, 0), { sequence = 1, type_id = 0 }, item(sep, 0) },
      pair = { item(cls, 0), { sequence = 1, type_id = 0 }, item(sep, 0), { sequence = 2, type_id = 1 }, item(sep, 1) },
    }
  end
  if cfg.type ~= "TemplateProcessing" then
    fail(fname, "unsupported post_processor '%s' (lt.text reads TemplateProcessing and BertProcessing)",
      tostring(cfg.type))
  end
  local specials = field(cfg, "special_tokens") or {}
  local function template(items)
    local out = {}
    for i, entry in ipairs(items) do
      if entry.Sequence then
        local which = ({ A = 1, B = 2 })[entry.Sequence.id]
        if not which then fail(fname, "template sequence '%s' is neither A nor B", tostring(entry.Sequence.id)) end
        out[i] = { sequence = which, type_id = entry.Sequence.type_id }
      elseif entry.SpecialToken then
        local name = entry.SpecialToken.id
        local spec = specials[name]
        if not spec then fail(fname, "template names special token '%s' that special_tokens lacks", tostring(name)) end
        local ids = {}
        for k, id0 in ipairs(spec.ids) do ids[k] = id0 + 1 end
        out[i] = { ids = ids, tokens = spec.tokens, type_id = entry.SpecialToken.type_id }
      else
        fail(fname, "template item %d is neither a Sequence nor a SpecialToken", i)
      end
    end
    return out
  end
  return { single = template(cfg.single), pair = template(cfg.pair) }
end

-- Added tokens (the [CLS] and [MASK] kind): matched in the text before anything
-- else, longest first, so "[MASK]" in a sentence stays one token.
local function read_added_tokens(fname, list, tok)
  local raw, normalized = {}, {}
  for i, entry in ipairs(list or {}) do
    local content, id0 = entry.content, entry.id
    if type(content) ~= "string" or content == "" or math.type(id0) ~= "integer" then
      fail(fname, "added_tokens[%d] needs a non-empty content and an integer id", i)
    end
    if field(entry, "single_word") then
      fail(fname, "added token %s has single_word = true, which lt.text does not support", show(content))
    end
    local id = id0 + 1
    tok.ids[content] = id
    tok.tokens[id] = content
    if field(entry, "special") then tok.special[id] = true end
    local matcher = { content = content, id = id, lstrip = field(entry, "lstrip"), rstrip = field(entry, "rstrip") }
    local into = field(entry, "normalized") and normalized or raw
    into[#into + 1] = matcher
  end
  -- Longest first: at one position "[MASK]X" beats "[MASK]".
  local function longest_first(a, b) return #a.content > #b.content end
  table.sort(raw, longest_first)
  table.sort(normalized, longest_first)
  -- An added token whose content the normalizer changes is matched in normalized text.
  if tok.normalize then
    for _, m in ipairs(normalized) do m.content = tok.normalize(m.content) end
  end
  tok.added_raw, tok.added_normalized = raw, normalized
end

local function read_truncation(fname, cfg)
  if cfg == nil then return { max_length = 512, strategy = "LongestFirst", direction = "Right" } end
  local strategy = field(cfg, "strategy") or "LongestFirst"
  local direction = field(cfg, "direction") or "Right"
  if strategy ~= "LongestFirst" and strategy ~= "OnlyFirst" and strategy ~= "OnlySecond" then
    fail(fname, "unsupported truncation strategy '%s'", tostring(strategy))
  end
  if direction ~= "Right" and direction ~= "Left" then
    fail(fname, "unsupported truncation direction '%s'", tostring(direction))
  end
  return { max_length = cfg.max_length, strategy = strategy, direction = direction }
end

-- ---- the tokenizer ---------------------------------------------------------------

local WordPiece = {}
WordPiece.__index = WordPiece
WordPiece.__name = "lt.text.WordPiece"
text.WordPiece = WordPiece

function WordPiece.__tostring(self)
  return format("lt.text.WordPiece(vocab_size = %d, max_length = %d)", self.vocab_size, self.max_length)
end

--- A tokenizer from the decoded contents of a tokenizer.json (a Lua table, as
--- lt.json.decode returns it). from_file and from_json call this.
function WordPiece.new(config, opts, fname)
  fname = fname or "lt.text.WordPiece.new"
  if type(config) ~= "table" then fail(fname, "expected a decoded tokenizer.json table, got %s", type(config)) end
  opts = check_options(fname, opts, { max_length = true })
  local model = section(fname, config, "model")
  if type(model) ~= "table" or model.type ~= "WordPiece" then
    fail(fname, "the model is %s, not WordPiece", type(model) == "table" and show(model.type) or "missing")
  end
  if type(model.vocab) ~= "table" then fail(fname, "the WordPiece model has no vocab") end

  -- vocab: the model's pieces, which WordPiece matches; ids: those and the added
  -- tokens, for token_to_id.
  local self = setmetatable({ vocab = {}, ids = {}, tokens = {}, special = {}, max_piece_bytes = 0 }, WordPiece)
  for token, id0 in pairs(model.vocab) do
    if math.type(id0) ~= "integer" or id0 < 0 then
      fail(fname, "vocab entry %s has id %s, expected an integer >= 0", show(token), show(id0))
    end
    self.vocab[token] = id0 + 1
    self.ids[token] = id0 + 1
    self.tokens[id0 + 1] = token
    if #token > self.max_piece_bytes then self.max_piece_bytes = #token end
  end
  self.prefix = field(model, "continuing_subword_prefix") or "##"
  self.max_input_chars_per_word = field(model, "max_input_chars_per_word") or 100
  self.unk_token = field(model, "unk_token") or "[UNK]"
  self.unk_id = self.vocab[self.unk_token]
  if not self.unk_id then fail(fname, "the unk_token %s is not in the vocab", show(self.unk_token)) end

  self.normalize, self.normalizer_flags = read_normalizer(fname, section(fname, config, "normalizer"))
  local pre = section(fname, config, "pre_tokenizer")
  if pre ~= nil and pre.type ~= "BertPreTokenizer" then
    fail(fname, "unsupported pre_tokenizer '%s' (lt.text reads BertPreTokenizer)", tostring(pre.type))
  end
  -- Without a pre-tokenizer the model sees each piece of text as one word.
  self.pre_tokenize_words = pre and unicode.bert_pre_tokenize or function(s) return { s } end
  read_added_tokens(fname, section(fname, config, "added_tokens"), self)
  self.template = read_post_processor(fname, section(fname, config, "post_processor"))

  local decoder = section(fname, config, "decoder")
  if decoder ~= nil and decoder.type ~= "WordPiece" then
    fail(fname, "unsupported decoder '%s' (lt.text reads the WordPiece decoder)", tostring(decoder.type))
  end
  self.decode_prefix = decoder and field(decoder, "prefix") or self.prefix
  self.decode_cleanup = flag(decoder or {}, "cleanup", true)

  local truncation = read_truncation(fname, section(fname, config, "truncation"))
  self.truncation = truncation
  self.max_length = opts.max_length or truncation.max_length
  if math.type(self.max_length) ~= "integer" or self.max_length < 1 then
    fail(fname, "max_length must be a positive integer, got %s", show(self.max_length))
  end

  local padding = section(fname, config, "padding") or {}
  self.pad_token = field(padding, "pad_token") or "[PAD]"
  local pad_id0 = field(padding, "pad_id")
  self.pad_id = pad_id0 and pad_id0 + 1 or self.ids[self.pad_token]
  if not self.pad_id then fail(fname, "the pad token %s is not in the vocab", show(self.pad_token)) end
  self.pad_type_id = field(padding, "pad_type_id") or 0
  self.pad_left = field(padding, "direction") == "Left"

  -- The vocab's size counts every id up to the largest, as Python's
  -- get_vocab_size(with_added_tokens=True) does.
  local n = 0
  for id in pairs(self.tokens) do if id > n then n = id end end
  self.vocab_size = n
  self.word_cache, self.word_cache_size = {}, 0
  return self
end

--- A tokenizer from tokenizer.json's text; source names it in messages.
function WordPiece.from_json(json_text, opts, source)
  local fname = "lt.text.WordPiece.from_json"
  if type(json_text) ~= "string" then fail(fname, "expected the JSON text as a string, got %s", type(json_text)) end
  local ok, config = pcall(json.decode, json_text, source)
  if not ok then fail(fname, "%s", config) end
  return WordPiece.new(config, opts, fname)
end

--- A tokenizer from a Hugging Face tokenizer.json of the BERT WordPiece kind.
--- opts.max_length overrides the file's truncation length (512 when it has none).
function WordPiece.from_file(path, opts)
  if type(path) ~= "string" then fail(FROM_FILE, "path must be a string, got %s", type(path)) end
  local file, err = io.open(path, "rb")
  if not file then fail(FROM_FILE, "cannot open the tokenizer file: %s", err) end
  local contents = file:read("a")
  file:close()
  local ok, config = pcall(json.decode, contents, path)
  if not ok then fail(FROM_FILE, "%s", config) end
  return WordPiece.new(config, opts, FROM_FILE)
end

--- The same as WordPiece.from_file(path, opts).
function text.tokenizer(path, opts)
  return WordPiece.from_file(path, opts)
end

-- ---- encoding ---------------------------------------------------------------------

-- Bytes 0x80..0xBF continue a UTF-8 character; a piece may not end before one.
local function continues(b) return b and b >= 0x80 and b < 0xC0 end

-- A word's WordPiece ids (greedy longest match from the left; a word with any
-- unmatched rest is one [UNK]), appended to ids. Pieces longer than the longest
-- vocab entry are never tried, so a word costs O(length x longest entry).
function WordPiece:word_ids(word, ids, n)
  local cached = self.word_cache[word]
  if not cached then
    cached = {}
    if utf8.len(word) > self.max_input_chars_per_word then
      cached[1] = self.unk_id
    else
      local vocab, prefix, limit, len = self.vocab, self.prefix, self.max_piece_bytes, #word
      local start = 1
      while start <= len do
        local stop = math.min(len, start + limit - 1)
        while continues(byte(word, stop + 1)) do stop = stop - 1 end
        local found
        while stop >= start do
          local piece = sub(word, start, stop)
          if start > 1 then piece = prefix .. piece end
          found = vocab[piece]
          if found then break end
          stop = stop - 1
          while stop >= start and continues(byte(word, stop + 1)) do stop = stop - 1 end
        end
        if not found then
          cached = { self.unk_id }
          break
        end
        cached[#cached + 1] = found
        start = stop + 1
      end
    end
    -- Words repeat across a corpus; the cache is dropped when it grows large.
    if self.word_cache_size >= 50000 then self.word_cache, self.word_cache_size = {}, 0 end
    self.word_cache[word] = cached
    self.word_cache_size = self.word_cache_size + 1
  end
  for i = 1, #cached do ids[n + i] = cached[i] end
  return n + #cached
end

-- Splits s at the added tokens in matchers: a list of strings (the pieces between)
-- and {added = id} entries, in order. lstrip/rstrip tokens also swallow the
-- whitespace beside them.
local function split_added(s, matchers)
  if #matchers == 0 then return { s } end
  local parts, pos = {}, 1
  while true do
    local best_start, best_stop, best
    for _, m in ipairs(matchers) do -- longest first, so ties at a start keep the longest
      local a, b = find(s, m.content, pos, true)
      if a and (not best_start or a < best_start) then best_start, best_stop, best = a, b, m end
    end
    if not best then break end
    local before_stop, after_start = best_start - 1, best_stop + 1
    if best.lstrip then before_stop = (find(sub(s, pos, before_stop), "%s*$") or 1) + pos - 2 end
    if best.rstrip then after_start = find(s, "[^%s]", after_start) or #s + 1 end
    if before_stop >= pos then parts[#parts + 1] = sub(s, pos, before_stop) end
    parts[#parts + 1] = { added = best.id }
    pos = after_start
  end
  if pos <= #s then parts[#parts + 1] = sub(s, pos) end
  return parts
end

-- One text's ids before truncation and special tokens.
function WordPiece:sequence_ids(s)
  local ids, n = {}, 0
  for _, part in ipairs(split_added(s, self.added_raw)) do
    if type(part) == "table" then
      n = n + 1
      ids[n] = part.added
    else
      local normalized = self.normalize and self.normalize(part) or part
      for _, piece in ipairs(split_added(normalized, self.added_normalized)) do
        if type(piece) == "table" then
          n = n + 1
          ids[n] = piece.added
        else
          for _, word in ipairs(self.pre_tokenize_words(piece)) do n = self:word_ids(word, ids, n) end
        end
      end
    end
  end
  return ids
end

--- The text after the normalizer (lower-cased, accents stripped, ... per the file).
function WordPiece:normalize_text(s)
  check_text("lt.text.WordPiece:normalize_text", s, "the text")
  return self.normalize and self.normalize(s) or s
end

--- The words BERT's pre-tokenizer makes of (normalized) text.
function WordPiece:pre_tokenize(s)
  check_text("lt.text.WordPiece:pre_tokenize", s, "the text")
  return self.pre_tokenize_words(s)
end

--- The WordPiece tokens of a text, without special tokens: {"hello", ",", "wo", "##rld"}.
function WordPiece:tokenize(s)
  check_text("lt.text.WordPiece:tokenize", s, "the text")
  local out = {}
  for i, id in ipairs(self:sequence_ids(s)) do out[i] = self.tokens[id] end
  return out
end

-- Keeps the first (or, truncating from the left, the last) n ids.
local function keep(ids, n, from_left)
  if #ids <= n then return ids end
  local out = {}
  local offset = from_left and #ids - n or 0
  for i = 1, n do out[i] = ids[offset + i] end
  return out
end

-- How many ids of each sequence fit in budget, by the truncation strategy.
-- LongestFirst, as tokenizers does it: a sequence within half the budget stays
-- whole and the other gets the rest; otherwise both are cut to half, the odd id
-- going to the longer one (to the second on a tie). Checked against tokenizers for
-- every n1, n2 < 12 and budget < 17.
local function pair_lengths(strategy, n1, n2, budget)
  if n1 + n2 <= budget then return n1, n2 end
  if strategy == "OnlyFirst" then return math.max(budget - n2, 0), n2 end
  if strategy == "OnlySecond" then return n1, math.max(budget - n1, 0) end
  local half = budget // 2
  if n1 <= half then return n1, budget - n1 end
  if n2 <= half then return budget - n2, n2 end
  if n1 > n2 then return budget - half, half end
  return half, budget - half
end

-- Without special tokens a pair is still told apart by its type ids.
local PLAIN_TEMPLATE = {
  single = { { sequence = 1, type_id = 0 } },
  pair = { { sequence = 1, type_id = 0 }, { sequence = 2, type_id = 1 } },
}

-- Truncates to max_length, then wraps in the template's special tokens.
function WordPiece:assemble(fname, first, second, o)
  local max_length, truncate = o.max_length, o.truncate
  local templates = o.add_special_tokens and self.template or PLAIN_TEMPLATE
  local template = second and templates.pair or templates.single
  local added = 0
  for _, item in ipairs(template) do if item.ids then added = added + #item.ids end end
  if truncate then
    local budget = max_length - added
    if budget < 0 then
      fail(fname, "max_length %d is less than the %d special tokens it must hold", max_length, added)
    end
    local from_left = self.truncation.direction == "Left"
    if second then
      local strategy = self.truncation.strategy
      local n1, n2 = pair_lengths(strategy, #first, #second, budget)
      if n1 + n2 > budget then
        fail(fname, "the %s sequence alone is longer than max_length %d allows (truncation strategy %s)",
          strategy == "OnlyFirst" and "second" or "first", max_length, strategy)
      end
      first, second = keep(first, n1, from_left), keep(second, n2, from_left)
    else
      first = keep(first, budget, from_left)
    end
  end
  local ids, type_ids, n = {}, {}, 0
  local sequences = { first, second }
  for _, item in ipairs(template) do
    local source = item.ids or sequences[item.sequence]
    for i = 1, #source do
      n = n + 1
      ids[n], type_ids[n] = source[i], item.type_id
    end
  end
  return ids, type_ids
end

-- Pads ids/type ids to length in place and returns the attention mask.
function WordPiece:pad(ids, type_ids, length)
  local n = #ids
  local mask = {}
  for i = 1, n do mask[i] = 1 end
  if length <= n then return mask end
  local missing = length - n
  if self.pad_left then
    table.move(ids, 1, n, missing + 1)
    table.move(type_ids, 1, n, missing + 1)
    table.move(mask, 1, n, missing + 1)
    for i = 1, missing do ids[i], type_ids[i], mask[i] = self.pad_id, self.pad_type_id, 0 end
  else
    for i = n + 1, length do ids[i], type_ids[i], mask[i] = self.pad_id, self.pad_type_id, 0 end
  end
  return mask
end

local ENCODE_OPTIONS = {
  max_length = true, truncation = true, padding = true, pad_to_multiple_of = true, add_special_tokens = true,
  device = true,
}

-- Validated {max_length, truncate, padding, multiple} from an options table.
function WordPiece:encode_options(fname, opts, default_padding)
  opts = check_options(fname, opts, ENCODE_OPTIONS)
  local max_length = opts.max_length or self.max_length
  if math.type(max_length) ~= "integer" or max_length < 1 then
    fail(fname, "max_length must be a positive integer, got %s", show(max_length))
  end
  local truncate = opts.truncation
  if truncate == nil then truncate = true end
  if type(truncate) ~= "boolean" then fail(fname, "truncation must be true or false, got %s", show(truncate)) end
  local padding = opts.padding
  if padding == nil then padding = default_padding end
  if padding == true then padding = "longest" end
  if padding ~= false and padding ~= "longest" and padding ~= "max_length" then
    fail(fname, "padding must be \"longest\", \"max_length\" or false, got %s", show(padding))
  end
  local multiple = opts.pad_to_multiple_of
  if multiple ~= nil and (math.type(multiple) ~= "integer" or multiple < 1) then
    fail(fname, "pad_to_multiple_of must be a positive integer, got %s", show(multiple))
  end
  local add_special_tokens = opts.add_special_tokens
  if add_special_tokens == nil then add_special_tokens = true end
  if type(add_special_tokens) ~= "boolean" then
    fail(fname, "add_special_tokens must be true or false, got %s", show(add_special_tokens))
  end
  return { max_length = max_length, truncate = truncate, padding = padding, multiple = multiple,
    add_special_tokens = add_special_tokens, device = opts.device }
end

local function padded_length(o, longest, fname)
  local length = o.padding == "max_length" and o.max_length or longest
  if o.padding == "max_length" and longest > length then
    fail(fname, "a sequence has %d tokens, more than max_length %d, with truncation off", longest, length)
  end
  if o.multiple then length = (length + o.multiple - 1) // o.multiple * o.multiple end
  return length
end

--- One text (and optionally the second text of a pair) as plain Lua tables:
--- { input_ids = {...}, token_type_ids = {...}, attention_mask = {...}, tokens = {...} }
--- with 1-based ids. opts: max_length (default the file's truncation length),
--- truncation (default true), padding (default false; "max_length" pads to it),
--- pad_to_multiple_of, add_special_tokens (default true: [CLS] ... [SEP]).
function WordPiece:encode(s, pair, opts)
  local fname = "lt.text.WordPiece:encode"
  if type(pair) == "table" and opts == nil then pair, opts = nil, pair end
  check_text(fname, s, "the text")
  if pair ~= nil then check_text(fname, pair, "the pair's second text") end
  local o = self:encode_options(fname, opts, false)
  local ids, type_ids = self:assemble(fname, self:sequence_ids(s), pair and self:sequence_ids(pair), o)
  local mask = self:pad(ids, type_ids, o.padding and padded_length(o, #ids, fname) or 0)
  local tokens = {}
  for i, id in ipairs(ids) do tokens[i] = self.tokens[id] end
  return { input_ids = ids, token_type_ids = type_ids, attention_mask = mask, tokens = tokens }
end

--- A batch of texts (strings, or {first, second} pairs) as int64 tensors [B, L]:
--- { input_ids =, token_type_ids =, attention_mask = }. opts as for encode, with
--- padding "longest" (the default) or "max_length", and device for the tensors.
function WordPiece:encode_batch(texts, opts)
  local fname = "lt.text.WordPiece:encode_batch"
  if type(texts) ~= "table" or is_tensor(texts) then
    fail(fname, "expected a list of strings, got %s", type(texts))
  end
  local o = self:encode_options(fname, opts, "longest")
  if o.padding == false then fail(fname, "a batch needs padding (\"longest\" or \"max_length\") to be a tensor") end
  if #texts == 0 then fail(fname, "the list of texts is empty") end
  local all_ids, all_types, longest = {}, {}, 0
  for i, entry in ipairs(texts) do
    local first, second = entry, nil
    if type(entry) == "table" then first, second = entry[1], entry[2] end
    if type(first) ~= "string" or (second ~= nil and type(second) ~= "string") then
      fail(fname, "texts[%d] is %s, expected a string or a {text, pair} table of strings", i,
        type(entry) == "table" and "a table that is not a pair of strings" or (type(entry) .. " " .. show(entry)))
    end
    check_text(fname, first, "texts[" .. i .. "]")
    if second then check_text(fname, second, "texts[" .. i .. "][2]") end
    local ids, type_ids = self:assemble(fname, self:sequence_ids(first), second and self:sequence_ids(second), o)
    all_ids[i], all_types[i] = ids, type_ids
    if #ids > longest then longest = #ids end
  end
  local length = padded_length(o, longest, fname)
  local masks = {}
  for i = 1, #all_ids do masks[i] = self:pad(all_ids[i], all_types[i], length) end
  local core = require "lt.core"
  local topts = { dtype = "int64", device = o.device }
  return {
    input_ids = core.tensor(all_ids, topts),
    token_type_ids = core.tensor(all_types, topts),
    attention_mask = core.tensor(masks, topts),
  }
end

--- tok(text) is tok:encode(text); tok({...}) is tok:encode_batch({...}).
function WordPiece.__call(self, input, ...)
  if type(input) == "table" then return self:encode_batch(input, ...) end
  return self:encode(input, ...)
end

-- ---- ids and tokens --------------------------------------------------------------

--- The 1-based id of a token, or nil.
function WordPiece:token_to_id(token) return self.ids[token] end

--- The token of a 1-based id, or nil.
function WordPiece:id_to_token(id) return self.tokens[id] end

-- Decoding cleans the spaces English punctuation does not take, token by token
-- (so " ," and " ." only, in practice), as Hugging Face's WordPiece decoder does.
local CLEANUP = {
  { " .", "." }, { " ?", "?" }, { " !", "!" }, { " ,", "," }, { " ' ", "'" }, { " n't", "n't" },
  { " 'm", "'m" }, { " do not", " don't" }, { " 's", "'s" }, { " 've", "'ve" }, { " 're", "'re" },
}
local function cleanup(token)
  for _, rule in ipairs(CLEANUP) do
    local from, to = rule[1], rule[2]
    if find(token, from, 1, true) then
      token = token:gsub(from:gsub("%p", "%%%0"), (to:gsub("%%", "%%%%")))
    end
  end
  return token
end

--- Text from 1-based ids (a Lua list or a 1-D integer tensor): pieces after the first
--- that start with "##" join the word before, the others get a space. Special tokens
--- ([CLS], [PAD], ...) are left out unless opts.skip_special_tokens is false.
function WordPiece:decode(ids, opts)
  local fname = "lt.text.WordPiece:decode"
  opts = check_options(fname, opts, { skip_special_tokens = true })
  if is_tensor(ids) then
    if ids:dim() ~= 1 then
      fail(fname, "expected a 1-D tensor of ids, got %d dimensions (decode_batch takes 2)", ids:dim())
    end
    if not INTEGER_DTYPES[ids.dtype] then fail(fname, "expected an integer tensor of ids, got %s", ids.dtype) end
    ids = ids:totable()
  elseif type(ids) ~= "table" then
    fail(fname, "expected a list of ids or a tensor, got %s", type(ids))
  end
  local skip = opts.skip_special_tokens ~= false
  local prefix, tidy = self.decode_prefix, self.decode_cleanup
  local out, n = {}, 0
  for i, id in ipairs(ids) do
    local token = self.tokens[id]
    if not token then
      if math.type(id) ~= "integer" then fail(fname, "ids[%d] is %s, not an integer id", i, show(id)) end
      fail(fname, "ids[%d] = %d is outside the vocabulary (ids are 1..%d)", i, id, self.vocab_size)
    end
    if not (skip and self.special[id]) then
      if n > 0 then
        if sub(token, 1, #prefix) == prefix then token = sub(token, #prefix + 1) else token = " " .. token end
      end
      if tidy then token = cleanup(token) end
      n = n + 1
      out[n] = token
    end
  end
  return concat(out)
end

--- decode for each row of a 2-D tensor (or each list in a list): a list of strings.
function WordPiece:decode_batch(batch, opts)
  local fname = "lt.text.WordPiece:decode_batch"
  if is_tensor(batch) then
    if batch:dim() ~= 2 then fail(fname, "expected a 2-D tensor of ids, got %d dimensions", batch:dim()) end
    batch = batch:totable()
  elseif type(batch) ~= "table" then
    fail(fname, "expected a list of id lists or a 2-D tensor, got %s", type(batch))
  end
  local out = {}
  for i, ids in ipairs(batch) do out[i] = self:decode(ids, opts) end
  return out
end

return text
