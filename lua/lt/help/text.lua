-- lt.help: lt.text, BERT's WordPiece tokenizer (lua/lt/text.lua).
return {
  title = "Text",
  intro = "lt.text tokenizes as BERT does, from a Hugging Face tokenizer.json of the WordPiece kind, and "
    .. "hands out lt's ids: the Python tokenizer's plus one, so they index an nn.Embedding directly. "
    .. "It loads on first use of lt.text. The examples use tok, a tokenizer made from a small "
    .. "tokenizer.json.",
  entries = {
    { "lt.text", "lt.text", "WordPiece tokenizers (lt.text.tokenizer) and id conversions to and from Python's.",
      ex = "local ids = lt.text.from_python_ids({101, 7592, 102})", members = "lt.text." },
    { "lt.text.tokenizer", "lt.text.tokenizer(path, {max_length=})",
      "A tokenizer from a Hugging Face tokenizer.json of the BERT WordPiece kind (BertNormalizer, "
        .. "BertPreTokenizer, WordPiece model, BERT or template post-processor); the same as "
        .. "lt.text.WordPiece.from_file.",
      opts = "max_length (the file's truncation length, else 512)",
      ex = "local bert = lt.text.tokenizer(\"tokenizer.json\")", run = "reads a file",
      see = { "tok:encode", "lt.text.WordPiece" } },
    { "lt.text.from_python_ids", "lt.text.from_python_ids(ids [, vocab_size])",
      "Ids from a Python tokenizer or model (0-based) to lt's (1-based): adds one, checking each is at "
        .. "least 0 (and below vocab_size). ids: an integer, a nested table of integers or an integer tensor.",
      ex = "local ids = lt.text.from_python_ids(lt.tensor({101, 2023, 102}))", see = { "lt.text.to_python_ids" } },
    { "lt.text.to_python_ids", "lt.text.to_python_ids(ids [, vocab_size])",
      "lt's ids (1-based) to Python's (0-based): subtracts one, checking each is at least 1 (and at most "
        .. "vocab_size).",
      ex = "local py = lt.text.to_python_ids({102, 2024, 103})" },
    { "lt.text.WordPiece", "lt.text.WordPiece (tokenizer class)",
      "BERT's tokenizer: normalizer (lower-casing, accent stripping, ...), pre-tokenizer (whitespace and "
        .. "punctuation), WordPiece model, special tokens ([CLS] ... [SEP]), truncation and padding. "
        .. "tok(text) is tok:encode(text), tok({...}) tok:encode_batch({...}).",
      ex = "local enc = tok(\"Hello, world!\")", members = "tok:", see = { "lt.text.tokenizer" } },
    { "lt.text.WordPiece.from_file", "lt.text.WordPiece.from_file(path, {max_length=})",
      "A tokenizer from a tokenizer.json file (lt.text.tokenizer).", opts = "max_length (the file's, else 512)",
      ex = "local bert = lt.text.WordPiece.from_file(\"tokenizer.json\")", run = "reads a file" },
    { "lt.text.WordPiece.from_json", "lt.text.WordPiece.from_json(json_text, {max_length=} [, source])",
      "A tokenizer from tokenizer.json's text; source names it in messages.",
      opts = "max_length (the file's, else 512)",
      ex = "local again = lt.text.WordPiece.from_json(TOKENIZER_JSON)" },
    { "lt.text.WordPiece.new", "lt.text.WordPiece.new(config, {max_length=})",
      "A tokenizer from a decoded tokenizer.json (a Lua table, as lt.json.decode returns it).",
      opts = "max_length (the file's, else 512)",
      ex = "local again = lt.text.WordPiece.new(require(\"lt.json\").decode(TOKENIZER_JSON))" },
    { "tok:encode",
      "tok:encode(text [, pair] [, {max_length=, truncation=true, padding=false, pad_to_multiple_of=, "
        .. "add_special_tokens=true}])",
      "One text (and optionally the second text of a pair) as plain Lua tables: {input_ids =, "
        .. "token_type_ids =, attention_mask =, tokens =}, ids 1-based. padding \"max_length\" pads to it.",
      opts = "max_length (the tokenizer's), truncation=true, padding=false (\"longest\", \"max_length\"), "
        .. "pad_to_multiple_of, add_special_tokens=true",
      ex = "local enc = tok:encode(\"Hello, world!\"); print(table.concat(enc.tokens, \" \"))",
      see = { "tok:encode_batch", "tok:decode" } },
    { "tok:encode_batch",
      "tok:encode_batch(texts [, {padding=\"longest\", max_length=, truncation=true, "
        .. "pad_to_multiple_of=, add_special_tokens=true, device=}])",
      "A list of texts (strings, or {first, second} pairs) as int64 [B, L] tensors: {input_ids =, "
        .. "token_type_ids =, attention_mask =}, padded to the longest (or to max_length).",
      opts = "padding=\"longest\" (or \"max_length\"), max_length, truncation=true, pad_to_multiple_of, "
        .. "add_special_tokens=true, device=\"cpu\"",
      ex = "local batch = tok:encode_batch({\"hello\", \"hello world\"}); print(batch.input_ids)" },
    { "tok:decode", "tok:decode(ids, {skip_special_tokens=true})",
      "The text of 1-based ids (a list or a 1-D integer tensor): \"##\" pieces join the word before, "
        .. "special tokens are left out unless skip_special_tokens is false.",
      opts = "skip_special_tokens=true", ex = "local s = tok:decode(tok:encode(\"hello world\").input_ids)" },
    { "tok:decode_batch", "tok:decode_batch(batch, {skip_special_tokens=true})",
      "tok:decode of each row of a 2-D tensor (or each list of a list): a list of strings.",
      opts = "skip_special_tokens=true",
      ex = "local texts = tok:decode_batch(tok:encode_batch({\"hello\", \"world\"}).input_ids)" },
    { "tok:tokenize", "tok:tokenize(text)", "The WordPiece tokens of a text, without special tokens.",
      ex = "local pieces = tok:tokenize(\"Hello, world!\")" },
    { "tok:normalize_text",
      "tok:normalize_text(text)", "The text after the normalizer (lower-cased, accents stripped, ...).",
      ex = "local s = tok:normalize_text(\"HÉLLO\")" },
    { "tok:pre_tokenize", "tok:pre_tokenize(text)", "The words BERT's pre-tokenizer makes of (normalized) text.",
      ex = "local words = tok:pre_tokenize(\"hello, world!\")" },
    { "tok:sequence_ids", "tok:sequence_ids(text)", "One text's ids before truncation and special tokens.",
      ex = "local ids = tok:sequence_ids(\"hello world\")" },
    { "tok:token_to_id", "tok:token_to_id(token)", "The 1-based id of a token, or nil.",
      ex = "local id = tok:token_to_id(\"hello\")" },
    { "tok:id_to_token", "tok:id_to_token(id)", "The token of a 1-based id, or nil.",
      ex = "local token = tok:id_to_token(5)" },
  },
}
