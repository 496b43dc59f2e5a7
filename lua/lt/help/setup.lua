-- The setup every example of the docs assumes: docs/API.md shows it, and
-- tests/lua/help_spec.lua runs it (fresh, in an environment of its own)
-- before each example. Globals, since each example is a chunk of its own.
return [==[
lt = require "lt"
nn, F, optim = lt.nn, lt.nn.functional, lt.optim
t = lt.randn(3, 4)                  -- a float32 tensor
x = lt.randn(8, 4)                  -- a batch of 8 inputs with 4 features
y = lt.randint(1, 3, {8})           -- their class labels, 1 to 3
m = nn.Linear(4, 3)                 -- a module
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
opt = optim.SGD(model:parameters(), {lr = 0.1})
-- a tiny BERT tokenizer.json (lt.text reads the real ones the same way)
TOKENIZER_JSON = [[{"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[PAD]": 0,
  "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, "world": 5, ",": 6, "!": 7}},
  "normalizer": {"type": "BertNormalizer", "lowercase": true}, "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
  "added_tokens": [{"id": 0, "content": "[PAD]", "special": true}, {"id": 1, "content": "[UNK]", "special": true},
    {"id": 2, "content": "[CLS]", "special": true}, {"id": 3, "content": "[SEP]", "special": true}]}]]
tok = lt.text.WordPiece.from_json(TOKENIZER_JSON)
]==]
