-- One op at the GPT's shapes (issue: transformers' elementwise ops), 1 thread: prints
-- "name best_ms" for scripts/bench/ops.sh, which runs PyTorch's twin (ops_torch.py).
--   lt scripts/bench/ops.lua NAME REPEATS
local name, repeats = arg[1], tonumber(arg[2] or "20")
lt.set_num_threads(1)
lt.manual_seed(0)
local F = lt.nn.functional

local x = lt.randn(16, 64, 512)
local att = lt.randn(16, 4, 64, 64)
local mask = lt.ones(64, 64):tril():eq(0)
local logits, labels = lt.randn(1024, 76), lt.randint(1, 76, {1024})
local ln_x, ln_w, ln_b = lt.randn(16, 64, 128), lt.ones(128), lt.zeros(128)

-- The GPT's 29 parameter tensors (2 blocks of n_embd 128, vocab 76, block 64, and an untied
-- head), each with a gradient, for clip_grad_norm_.
local function gpt_parameters()
  local shapes = { { 76, 128 }, { 64, 128 } }
  for _ = 1, 2 do
    for _, s in ipairs { { 128 }, { 128 }, { 384, 128 }, { 384 }, { 128, 128 }, { 128 }, { 128 }, { 128 },
      { 512, 128 }, { 512 }, { 128, 512 }, { 128 } } do
      shapes[#shapes + 1] = s
    end
  end
  for _, s in ipairs { { 128 }, { 128 }, { 76, 128 } } do shapes[#shapes + 1] = s end
  local params = {}
  for i, s in ipairs(shapes) do
    params[i] = lt.randn(s):requires_grad_(true)
    params[i].grad = lt.randn(s)
  end
  return params
end
local params = name == "clip_grad_norm" and gpt_parameters()

local ops = {
  gelu = function() return F.gelu(x) end,
  gelu_fwd_bwd = function()
    local leaf = x:detach():requires_grad_(true)
    F.gelu(leaf):sum():backward()
  end,
  gelu_tanh = function() return F.gelu(x, {approximate = "tanh"}) end,
  masked_softmax = function() return F.softmax((att * 0.125):masked_fill(mask, -math.huge), 4) end,
  softmax_fwd_bwd = function()
    local leaf = att:detach():requires_grad_(true)
    F.softmax(leaf, 4):sum():backward()
  end,
  cross_entropy = function() return F.cross_entropy(logits, labels) end,
  layer_norm = function() return F.layer_norm(ln_x, {128}, ln_w, ln_b) end,
  layer_norm_fwd_bwd = function()
    local leaf = ln_x:detach():requires_grad_(true)
    local w, b = ln_w:detach():requires_grad_(true), ln_b:detach():requires_grad_(true)
    F.layer_norm(leaf, {128}, w, b):sum():backward()
  end,
  cross_entropy_fwd_bwd = function()
    F.cross_entropy(logits:detach():requires_grad_(true), labels):backward()
  end,
  clip_grad_norm = function() return lt.nn.utils.clip_grad_norm_(params, 1.0) end,
  exp = function() return x:exp() end,
  tanh = function() return x:tanh() end,
}
local fn = assert(ops[name], "unknown op " .. tostring(name))
for _ = 1, 3 do fn() end
local best = math.huge
for _ = 1, repeats do
  local t0 = lt.clock()
  fn()
  best = math.min(best, lt.clock() - t0)
end
print(name, string.format("%.4f", best * 1000))
