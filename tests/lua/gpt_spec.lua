-- lt.models.gpt against nanoGPT's model in PyTorch (tests/fixtures/gpt,
-- written by tests/fixtures/gen_gpt_fixture.py): the state dict's names and
-- shapes, PyTorch's initial weights loaded strictly, and the first 20
-- training losses of the recipe's optimisation (AdamW over nanoGPT's decay
-- groups, clipping at 1.0, LinearLR warm-up then cosine in a SequentialLR)
-- on the same deterministic batches of GPL-3 text. Also the initialisation,
-- weight tying, generation, gradient checkpointing, and a short run of
-- scripts/train_gpt.lua.
local lt = require "lt"

local DIR = "tests/fixtures/gpt/"
local fx = dofile(DIR .. "first_losses.lua")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- The fixture's text as ids, lt's (PyTorch's + 1): sorted distinct characters.
local function tokens()
  local text = read(DIR .. "text.txt")
  local seen, chars = {}, {}
  for c in text:gmatch(".") do
    if not seen[c] then seen[c] = true; chars[#chars + 1] = c end
  end
  table.sort(chars)
  local stoi = {}
  for i, c in ipairs(chars) do stoi[c] = i end
  local ids = {}
  for c in text:gmatch(".") do ids[#ids + 1] = stoi[c] end
  return ids, #chars
end

-- Step s (0-based), row b (0-based): start = (997 s + 331 b) % (n - T - 1), 0-based.
local function batch(ids, s)
  local T, span = fx.config.block_size, #ids - fx.config.block_size - 1
  local x, y = {}, {}
  for b = 0, fx.batch_size - 1 do
    local start = (997 * s + 331 * b) % span
    local xr, yr = {}, {}
    for t = 1, T do xr[t], yr[t] = ids[start + t], ids[start + t + 1] end
    x[b + 1], y[b + 1] = xr, yr
  end
  return lt.tensor(x, { dtype = "int64" }), lt.tensor(y, { dtype = "int64" })
end

describe("lt.models.gpt", function()
  it("has nanoGPT's state dict: the same names and shapes, the tied weight under both names", function()
    local model = lt.models.gpt(fx.config)
    local sd = model:state_dict()
    local count = 0
    for _ in pairs(sd) do count = count + 1 end
    assert.equal(#fx.keys, count)
    for i, key in ipairs(fx.keys) do
      assert.is_not_nil(sd[key], key)
      assert.same(fx.shapes[i], sd[key].shape, key)
    end
    -- named_parameters: PyTorch's order, the tied weight once (as wte).
    local names = {}
    for name in model:named_parameters() do names[#names + 1] = name end
    local want = {}
    for _, key in ipairs(fx.keys) do
      if key ~= "lm_head.weight" then want[#want + 1] = key end
    end
    assert.same(want, names)
    assert.is_true(rawequal(model.lm_head.weight, model.transformer.wte.weight))
  end)

  it("initialises as nanoGPT: normal(0, 0.02), c_proj scaled by 1/sqrt(2 n_layer), zero biases", function()
    lt.manual_seed(7)
    local model = lt.models.gpt { vocab_size = 300, block_size = 64, n_layer = 4, n_head = 4, n_embd = 128 }
    local std = function(t) return t:detach():std():item() end
    assert.near(0.02, std(model.transformer.wte.weight), 0.001)
    assert.near(0.02, std(model.transformer.h[1].mlp.c_fc.weight), 0.001)
    assert.near(0.02 / math.sqrt(8), std(model.transformer.h[1].mlp.c_proj.weight), 0.0005)
    assert.near(0.02 / math.sqrt(8), std(model.transformer.h[4].attn.c_proj.weight), 0.0005)
    assert.equal(0, model.transformer.h[2].attn.c_attn.bias:abs():sum():item())
    assert.equal(1, model.transformer.ln_f.weight:mean():item())
    local no_bias = lt.models.gpt { vocab_size = 10, block_size = 8, n_layer = 1, n_head = 2, n_embd = 8, bias = false }
    assert.is_nil(no_bias:state_dict()["transformer.h.0.attn.c_attn.bias"])
    assert.is_nil(no_bias:state_dict()["transformer.ln_f.bias"])
  end)

  it("trains as PyTorch's nanoGPT: the first 20 losses of AdamW with clipping and warm-up/cosine", function()
    local ids, vocab = tokens()
    assert.equal(fx.config.vocab_size, vocab)
    local model = lt.models.gpt(fx.config)
    model:load_state_dict(lt.load(DIR .. "init.safetensors")) -- strict
    local opt = model:configure_optimizers { weight_decay = fx.weight_decay, lr = fx.lr, betas = fx.betas }
    local S = lt.optim.lr_scheduler
    local warm = S.LinearLR(opt, { start_factor = 1 / fx.warmup, end_factor = 1, total_iters = fx.warmup })
    local cos = S.CosineAnnealingLR(opt, { T_max = fx.steps - fx.warmup, eta_min = fx.lr / 10 })
    local sched = S.SequentialLR(opt, { schedulers = { warm, cos }, milestones = { fx.warmup } })
    model:train()
    local worst = 0
    for s = 0, fx.steps - 1 do
      local x, y = batch(ids, s)
      assert.near(fx.lrs[s + 1], opt.param_groups[1].lr, 1e-12 * fx.lr)
      local _, loss = model(x, y)
      opt:zero_grad()
      loss:backward()
      local norm = lt.nn.utils.clip_grad_norm_(model:parameters(), fx.clip)
      assert.near(fx.grad_norms[s + 1], norm:item(), 1e-4 * fx.grad_norms[s + 1])
      opt:step()
      sched:step()
      local got, want = loss:item(), fx.losses[s + 1]
      worst = math.max(worst, math.abs(got - want) / math.abs(want))
    end
    io.stderr:write(("gpt_spec: worst relative loss difference over %d steps %.3g\n"):format(fx.steps, worst))
    assert.is_true(worst < 1e-4, "worst relative difference " .. worst)
    assert.is_true(fx.losses[fx.steps] < fx.losses[1])
  end)

  it("gives the same gradients with the blocks checkpointed", function()
    local ids = tokens()
    local x, y = batch(ids, 3)
    local model = lt.models.gpt(fx.config)
    model:load_state_dict(lt.load(DIR .. "init.safetensors"))
    local function grads(segments)
      model.checkpoint_segments = segments
      model:zero_grad()
      local _, loss = model(x, y)
      loss:backward()
      local out = {}
      for name, p in model:named_parameters() do out[name] = p.grad:clone() end
      return out, loss:item()
    end
    local plain, l1 = grads(0)
    local ckpt, l2 = grads(2)
    assert.equal(l1, l2)
    for name, g in pairs(plain) do
      assert.is_true((g - ckpt[name]):abs():max():item() <= 1e-6, name)
    end
  end)

  it("returns the last position's logits without targets, and checks its input", function()
    local model = lt.models.gpt { vocab_size = 12, block_size = 6, n_layer = 1, n_head = 2, n_embd = 8 }
    local idx = lt.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "int64" })
    local logits, loss = model(idx)
    assert.same({ 2, 1, 12 }, logits.shape)
    assert.is_nil(loss)
    local full = model(idx, idx)
    assert.same({ 2, 3, 12 }, full.shape)
    assert.is_true((full:narrow(2, 3, 1) - logits):abs():max():item() < 1e-6)
    assert.has_error(function() model(lt.ones({ 1, 7 }, { dtype = "int64" })) end,
      "GPT: cannot forward a sequence of length 7, block size is only 6")
    assert.has_error(function() lt.models.gpt { vocab_size = 12, block_size = 6, n_layer = 1, n_head = 3, n_embd = 8 } end)
  end)

  it("generates: shape, ids in range, reproducible with a seed, top_k 1 is greedy", function()
    lt.manual_seed(3)
    local model = lt.models.gpt { vocab_size = 20, block_size = 8, n_layer = 1, n_head = 2, n_embd = 16 }
    local start = lt.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "int64" })
    lt.manual_seed(11)
    local a = model:generate(start, 12, { temperature = 0.9, top_k = 5 })
    assert.same({ 2, 14 }, a.shape)
    assert.equal("int64", a.dtype)
    assert.is_true(a:min():item() >= 1 and a:max():item() <= 20)
    assert.same(start:totable(), a:narrow(2, 1, 2):totable())
    lt.manual_seed(11)
    local b = model:generate(start, 12, { temperature = 0.9, top_k = 5 })
    assert.same(a:totable(), b:totable())
    assert.is_true(model.training) -- the mode is restored
    -- top_k = 1: the argmax every time, whatever the seed
    lt.manual_seed(1)
    local g1 = model:generate(start, 5, { top_k = 1 })
    lt.manual_seed(2)
    local g2 = model:generate(start, 5, { top_k = 1 })
    assert.same(g1:totable(), g2:totable())
    local logits = model(g1:narrow(2, 1, 6))
    assert.same(logits:argmax(3):view(2):totable(), g1:select(2, 7):totable())
  end)

  it("configure_optimizers: 2-D parameters decayed, the others not", function()
    local model = lt.models.gpt { vocab_size = 12, block_size = 6, n_layer = 2, n_head = 2, n_embd = 8 }
    local opt = model:configure_optimizers { weight_decay = 0.2, lr = 1e-3 }
    local groups = opt.param_groups
    assert.equal(2, #groups)
    assert.equal(0.2, groups[1].weight_decay)
    assert.equal(0, groups[2].weight_decay)
    -- wte (tied), wpe, and per block c_attn, c_proj, c_fc, mlp.c_proj
    assert.equal(2 + 4 * 2, #groups[1].params)
    for _, p in ipairs(groups[1].params) do assert.equal(2, p:dim()) end
    for _, p in ipairs(groups[2].params) do assert.equal(1, p:dim()) end
    assert.same({ 0.9, 0.95 }, groups[1].betas)
  end)
end)

describe("scripts/train_gpt.lua", function()
  local interpreter = arg and arg[-1]
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function run(options)
    local pipe = assert(io.popen(("%s scripts/train_gpt.lua --data %stext.txt --threads 1 --n_layer 1 --n_head 2"
      .. " --n_embd 32 --block_size 32 --batch_size 8 --warmup 5 --lr 0.01 %s 2>&1"):format(interpreter, DIR, options)))
    local out = pipe:read("a")
    local ok = pipe:close()
    return ok, out
  end

  it("trains a tiny model: exits 0, the validation loss falls, a sample is printed", function()
    if not interpreter then return pending("no interpreter path in arg[-1]") end
    local ckpt = dir .. "/gpt.safetensors"
    local ok, out = run("--steps 40 --sample 40 --checkpoint " .. ckpt)
    assert.is_true(ok, out)
    local before, after = out:match("val loss ([%d.]+) %-> ([%d.]+)")
    assert.is_not_nil(before, out)
    assert.is_true(tonumber(after) < tonumber(before) - 0.3, out)
    assert.is_not_nil(out:find("sample:\n", 1, true), out)
    -- resumed: continues after step 40
    ok, out = run("--steps 45 --sample 0 --resume --checkpoint " .. ckpt)
    assert.is_true(ok, out)
    assert.is_not_nil(out:find("resumed from " .. ckpt .. " after step 40", 1, true), out)
    assert.is_not_nil(out:find("step 45/45", 1, true), out)
  end)

  it("runs with the memory options: --amp bf16 --checkpoint_segments 1 --accum 2", function()
    if not interpreter then return pending("no interpreter path in arg[-1]") end
    local ok, out = run("--steps 6 --sample 5 --amp bf16 --checkpoint_segments 1 --accum 2")
    assert.is_true(ok, out)
    assert.is_not_nil(out:match("val loss [%d.]+ %-> [%d.]+"), out)
  end)

  it("says what is wrong with its options", function()
    if not interpreter then return pending("no interpreter path in arg[-1]") end
    local ok, out = run("--n_head 3")
    assert.is_falsy(ok)
    assert.is_not_nil(out:find("--n_embd 32 must be a multiple of --n_head 3", 1, true), out)
    ok, out = run("--data /nonexistent/file")
    assert.is_falsy(ok)
    assert.is_not_nil(out:find("--data: /nonexistent/file", 1, true), out)
  end)
end)
