-- Every memory technique, checked on the figures scripts/memory_tricks.lua
-- prints (lua/lt/recipes/memory_tricks.lua measures both): the direction of each
-- saving, and its size in exact bytes where theory gives it. Figures that
-- depend on when the collector reclaims garbage are checked for direction
-- only; the exact ones take the collector out (lt.gc, del, <close>).
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local tricks = require "lt.recipes.memory_tricks"
local nn, F, optim = lt.nn, lt.nn.functional, lt.optim

local KiB = 1024
-- One activation of the deep MLP: batch 1024 x 512 float32, a multiple of 512.
local MLP_ACTIVATION = tricks.MLP_BATCH * tricks.MLP_WIDTH * 4

local function settled()
  lt.gc()
  return lt.memory.allocated()
end

describe("in-place forms", function()
  local binary = { "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge" }
  local unary = { "neg", "exp", "log", "sqrt", "rsqrt", "abs", "relu", "sigmoid", "tanh", "sin", "cos",
    "reciprocal", "square", "sign", "floor", "ceil", "round", "logical_not" }

  -- Positive values, so that log, sqrt and rsqrt are defined, with ties
  -- against `other` for the comparisons.
  local function operands()
    return lt.tensor { 0.5, 1.25, 2.0, 2.75 }, lt.tensor { 1.0, 1.25, 1.5, 3.0 }
  end

  it("every binary op has its _ form: same values, the same tensor back", function()
    for _, op in ipairs(binary) do
      local a, b = operands()
      local expected = a[op](a, b):float():totable()
      local returned = a[op .. "_"](a, b)
      assert.is_true(rawequal(a, returned), op .. "_ returns its tensor")
      h.near(expected, a:totable())
      local c = operands()
      h.near(operands()[op](operands(), 2):float():totable(), c[op .. "_"](c, 2):totable()) -- a number operand
    end
  end)

  it("every unary op, and clamp, has its _ form: same values, the same tensor back", function()
    for _, op in ipairs(unary) do
      local a = operands()
      local expected = a[op](a):float():totable()
      assert.is_true(rawequal(a, a[op .. "_"](a)), op .. "_ returns its tensor")
      h.near(expected, a:totable())
    end
    local a = operands()
    local expected = a:clamp(1, 2):totable()
    assert.is_true(rawequal(a, a:clamp_(1, 2)))
    h.near(expected, a:totable())
  end)

  it("nn.ReLU{inplace=true} and F.relu{inplace=true} return their input", function()
    local x = lt.randn(4, 5)
    local expected = x:relu():totable()
    assert.is_true(rawequal(x, nn.ReLU { inplace = true }(x)))
    h.near(expected, x:totable())
    local y = lt.randn(3)
    assert.is_true(rawequal(y, F.relu(y, { inplace = true })))
    assert.is_false(rawequal(y, nn.ReLU()(y)))
  end)

  it("writing in place into a tensor saved for backward makes backward fail naming both ops", function()
    local writes = {
      relu_ = function(t) return t:relu_() end, sigmoid_ = function(t) return t:sigmoid_() end,
      tanh_ = function(t) return t:tanh_() end, add_ = function(t) return t:add_(1) end,
      mul_ = function(t) return t:mul_(t) end, clamp_ = function(t) return t:clamp_(0, 1) end,
      maximum_ = function(t) return t:maximum_(lt.zeros(3)) end,
    } -- not a comparison: its gradient is zero, so backward never reaches ExpBackward's check
    for name, write in pairs(writes) do
      local x = lt.randn(3, { requires_grad = true })
      local saved = x:exp() -- ExpBackward keeps its result
      write(saved)
      h.fails(function() saved:sum():backward() end, "ExpBackward", "(" .. name .. ")",
        "modified by an in-place operation")
    end
  end)
end)

describe("in-place activation and residual add", function()
  it("relu_ allocates nothing; relu allocates its result", function()
    local a = lt.randn(1000)
    local before = settled()
    lt.memory.reset_peak()
    lt.no_grad(function() a:relu_() end)
    assert.equal(before, lt.memory.max_allocated())
    local r = a:relu()
    assert.equal(before + 4096, lt.memory.allocated())
    lt.del(r)
  end)

  -- On the deep MLP: the CNN's row is the same mechanism, and its convolutions
  -- are slow under the sanitizer build. An out-of-place ReLU's input (the
  -- pre-activation) is kept by no backward (Linear keeps its input, ReLU its
  -- output either way), so it is a temporary: reference counting frees it at
  -- once, and so does lt, which collects what a script dropped before any new
  -- peak (to within the 1% a collection mark allows). Theory: no saving.
  it("in-place ReLU leaves the training peak where it was, as theory says", function()
    local without, with = tricks.techniques.inplace_relu.measure("mlp")
    assert.is_true(math.abs(without - with) <= without // 100,
      ("without %d, with %d bytes"):format(without, with))
  end)

  it("the in-place residual add leaves the training peak where it was", function()
    -- The sum relu(z + x) is a temporary too: the block saves the same tensors.
    local without, with = tricks.techniques.inplace_residual.measure("mlp")
    assert.is_true(math.abs(without - with) <= without // 100,
      ("without %d, with %d bytes"):format(without, with))
  end)
end)

describe("keeping x0..xn, reusing x, releasing at once", function()
  -- Each forward measured once (the sanitizer build is slow).
  local peaks = {}
  local function forward_peak(model_name, forward)
    local key = model_name .. " " .. forward
    peaks[key] = peaks[key] or tricks.forward_peak(model_name, tricks.forwards[forward])
    return peaks[key]
  end

  it("keeping every intermediate costs their sum; releasing each at once, two at a time", function()
    local keep, close = forward_peak("mlp", "keep_all"), forward_peak("mlp", "close")
    local delete = forward_peak("mlp", "delete")
    assert.equal(delete, close)
    -- 32 hidden outputs and the 1024x10 head's; released at once, two hidden
    -- outputs at most (the input is the caller's and stays).
    local head = tricks.MLP_BATCH * 10 * 4
    assert.equal(32 * MLP_ACTIVATION + head - 2 * MLP_ACTIVATION, keep - close)
  end)

  it("reusing x lies in between: the collector reclaims old x, later", function()
    for _, model_name in ipairs { "cnn", "mlp" } do
      local keep, close = forward_peak(model_name, "keep_all"), forward_peak(model_name, "close")
      local reuse = forward_peak(model_name, "reuse")
      assert.is_true(close <= reuse and reuse <= keep, model_name)
      assert.is_true(close < keep, model_name)
    end
  end)
end)

describe("lt.del and <close>", function()
  it("del of a view gives nothing back while its base lives", function()
    local base = lt.randn(1000)
    local before = settled()
    assert.equal(0, lt.del(base:view(10, 100)))
    assert.equal(0, lt.del(base:narrow(1, 1, 10)))
    assert.equal(before, lt.memory.allocated())
  end)

  it("del of a tensor autograd saved gives nothing back, and backward still works", function()
    local w = lt.randn(100, 100, { requires_grad = true })
    local x = lt.randn(8, 100)
    local y = x:matmul(w):sigmoid() -- MatmulBackward keeps x, SigmoidBackward keeps y
    local before = settled()
    assert.equal(0, lt.del(x))
    assert.equal(before, lt.memory.allocated())
    local loss = y:sum()
    assert.equal(0, lt.del(y))
    loss:backward()
    assert.same({ 100, 100 }, w.grad.shape)
    assert.is_true(w.grad:abs():sum():item() > 0)
  end)

  it("<close> releases at the end of the block what del would", function()
    local before = settled()
    do
      local t <close> = lt.empty(1000)
      assert.equal(before + 4096, lt.memory.allocated())
    end
    assert.equal(before, lt.memory.allocated())
  end)
end)

describe("the epoch loss as a tensor or as loss:item()", function()
  -- Bytes held after each step, garbage collected.
  local function held_per_step(model_name, as_tensor)
    local before = settled()
    local held = {}
    tricks.loss_loop(model_name, as_tensor, 3, function(step)
      held[step] = settled() - before
    end)
    return held
  end

  it("as a tensor, memory grows by at least one graph a step; with item(), it stays flat", function()
    local flat = held_per_step("mlp", false)
    for step = 2, #flat do assert.equal(flat[1], flat[step]) end
    -- One step's graph: what the forward saved, less the batch they share.
    local graph
    do
      local _, saved, _, input_bytes = tricks.inference_peak("mlp", false)
      graph = saved - input_bytes
    end
    local growing = held_per_step("mlp", true)
    for step = 2, #growing do
      assert.is_true(growing[step] - growing[step - 1] >= graph,
        ("step %d grew by %d bytes, a graph is %d"):format(step, growing[step] - growing[step - 1], graph))
    end
  end)

end)

describe("zero_grad", function()
  it("set to nil frees exactly the gradients' bytes (each rounded to 512)", function()
    for _, model_name in ipairs { "cnn", "mlp" } do
      local without, with, d = tricks.techniques.zero_grad.measure(model_name)
      assert.equal(d.gradient_bytes, d.held_without - d.held_with, model_name)
      assert.is_true(with < without, model_name)
    end
  end)

  it("gradient category bytes drop to 0", function()
    settled() -- earlier tests' models and their gradients
    local model, x, target = tricks.setup("mlp")
    tricks.train_step(model, x, target)
    assert.equal(tricks.parameter_bytes(model, true), tricks.category("gradient"))
    model:zero_grad()
    lt.gc()
    assert.equal(0, tricks.category("gradient"))
  end)
end)

describe("no_grad inference", function()
  it("saves no activation, and frees exactly what the graph held", function()
    for _, model_name in ipairs { "cnn", "mlp" } do
      local without, with, d = tricks.techniques.no_grad.measure(model_name)
      assert.is_true(d.saved > 0)
      assert.equal(0, d.saved_no_grad)
      -- The graph's saved tensors are the difference, less the input: it is
      -- counted as an activation once saved, but the caller holds it anyway.
      assert.equal(d.saved - d.input_bytes, d.held - d.held_no_grad, model_name)
      assert.is_true(with < without, model_name)
    end
  end)
end)

describe("micro-batches with gradient accumulation", function()
  local k = tricks.MICRO_BATCHES

  local function assert_same_gradients(a, b)
    assert.equal(#a, #b)
    for i = 1, #a do -- in tensors: 4.2 million numbers as Lua tables would be slow
      local scale = math.max(1, a[i]:abs():max():item())
      local diff = (a[i] - b[i]):abs():max():item()
      assert.is_true(diff <= 1e-5 * scale, ("gradient %d differs by %g"):format(i, diff))
    end
  end

  it("give the full batch's gradients (BatchNorm on running statistics: eval mode)", function()
    local _, full = tricks.accumulation_step("mlp", 1)
    local _, micro = tricks.accumulation_step("mlp", k)
    assert_same_gradients(full, micro)
    local _, full_cnn = tricks.accumulation_step("cnn", 1, { eval = true, batch = 16 })
    local _, micro_cnn = tricks.accumulation_step("cnn", k, { eval = true, batch = 16 })
    assert_same_gradients(full_cnn, micro_cnn)
  end)

  it("hold 1/k of the activations, plus the batch they share", function()
    -- The CNN at batch 16 (micro-batches of 4): its convolutions are slow
    -- under the sanitizer build, and the fraction does not depend on it.
    for model_name, batch in pairs { cnn = 16, mlp = tricks.MLP_BATCH } do
      local opts = { batch = batch }
      local full = tricks.accumulation_step(model_name, 1, opts)
      local micro = tricks.accumulation_step(model_name, k, { batch = batch, collect_between = true })
      -- The batch, saved by the first layer whole through each slice.
      local input = batch * (model_name == "cnn" and 28 * 28 or tricks.MLP_WIDTH) * 4
      local bound = (full - input) / k + input + 8 * KiB -- 512-byte rounding of the small tensors
      assert.is_true(micro <= bound, ("%s: %d bytes, bound %d"):format(model_name, micro, bound))
    end
  end)
end)

describe("empty_cache", function()
  it("reserved drops, allocated does not", function()
    local without, with, d = tricks.techniques.empty_cache.measure("mlp")
    assert.is_true(with < without)
    assert.equal(d.allocated_before, d.allocated_after)
  end)
end)

describe("downsampling", function()
  -- Exact on one layer; the table's CNN rows (full resolution against max
  -- pooling and strided convolutions) are too slow for the sanitizer build.
  it("a stride-2 convolution's and a 2x2 max pool's outputs are a quarter of full resolution", function()
    local x = lt.randn(8, 4, 28, 28)
    local full = nn.Conv2d(4, 16, 3, { padding = 1 })(x)
    local strided = nn.Conv2d(4, 16, 3, { padding = 1, stride = 2 })(x)
    assert.equal(full:nbytes(), 4 * strided:nbytes())
    assert.equal(full:nbytes(), 4 * nn.MaxPool2d(2)(full):nbytes())
  end)

  it("what the graph saves scales with the resolution", function()
    local function saved_by(conv)
      settled()
      local before = tricks.category("activation")
      local x = lt.randn(8, 4, 28, 28)
      local y = conv(x):relu() -- the convolution saves x; relu saves its result
      return tricks.category("activation") - before - tricks.rounded_bytes(x), y
    end
    local full = saved_by(nn.Conv2d(4, 16, 3, { padding = 1 }))
    local strided = saved_by(nn.Conv2d(4, 16, 3, { padding = 1, stride = 2 }))
    assert.equal(full, 4 * strided)
  end)
end)

describe("optimizer state", function()
  it("SGD keeps none, momentum one buffer per parameter, Adam two", function()
    local model = tricks.setup("mlp")
    local params = model:parameters()
    local bytes = tricks.parameter_bytes(model)
    local function state_after_step(opt)
      model:zero_grad()
      for _, p in ipairs(params) do p.grad = lt.zeros(p.shape) end
      opt:step()
      return opt:state_bytes()
    end
    assert.equal(0, state_after_step(optim.SGD(params, { lr = 0.1 })))
    assert.equal(bytes, state_after_step(optim.SGD(params, { lr = 0.1, momentum = 0.9 })))
    assert.equal(2 * bytes, state_after_step(optim.Adam(params)))
    assert.equal(2 * bytes, state_after_step(optim.AdamW(params)))
  end)

  it("on the deep MLP, whose parameters dominate, the peak drops by the state", function()
    local adam_peak, sgd_peak, d = tricks.techniques.sgd.measure("mlp")
    local momentum_peak, momentum_state = tricks.training_peak("mlp", {}, function(params)
      return optim.SGD(params, { lr = 0.01, momentum = 0.9 })
    end)
    assert.equal(0, d.sgd_state)
    assert.equal(d.adam_state, 2 * momentum_state)
    assert.is_true(sgd_peak < momentum_peak and momentum_peak < adam_peak)
  end)
end)

describe("half precision, autocast and checkpointing", function()
  it("a bfloat16 model holds exactly half the parameter bytes, and its step peaks lower", function()
    settled()
    local before = tricks.category("parameter")
    local model = tricks.setup("mlp", nil, 8)
    local float32_bytes, halves = tricks.parameter_bytes(model), 0
    for _, p in ipairs(model:parameters()) do
      halves = halves + math.max(512, (p:nbytes() // 2 + 511) // 512 * 512)
    end
    model:bfloat16()
    settled() -- the float32 originals
    assert.equal(float32_bytes, 2 * tricks.parameter_bytes(model))
    -- The allocator rounds each tensor: the 10-number head bias takes 512 bytes in both dtypes.
    assert.equal(halves, tricks.parameter_bytes(model, true))
    assert.equal(halves, tricks.category("parameter") - before)
    local without, with = tricks.techniques.bfloat16.measure("mlp")
    -- The parameters alone save half their float32 bytes; gradients and activations add to that.
    assert.is_true(without - with >= float32_bytes // 2, ("saved %d bytes"):format(without - with))
  end)

  it("a bfloat16 model saves within 5 points of theory: half of every floating-point byte", function()
    for _, model_name in ipairs { "mlp", "cnn" } do
      local without, with = tricks.techniques.bfloat16.measure(model_name)
      -- Only the CNN's max-pool indices (int64, saved for backward) keep their size.
      local index_bytes = model_name == "cnn" and tricks.BATCH * (32 * 14 * 14 + 64 * 7 * 7) * 8 or 0
      local theory = 50 * (without - index_bytes) / without
      local saving = 100 * (without - with) / without
      assert.is_true(math.abs(saving - theory) <= 5,
        ("%s: saved %.1f%%, theory %.1f%%"):format(model_name, saving, theory))
    end
  end)

  it("autocast keeps float32 gradients for float32 parameters", function()
    local model, x, target = tricks.setup("mlp", nil, 8)
    local loss = tricks.autocast_step(model, x, target)
    assert.equal("float32", loss.dtype) -- the loss runs in float32 under autocast
    for _, p in ipairs(model:parameters()) do
      assert.equal("float32", p.dtype)
      assert.equal("float32", p.grad.dtype)
    end
  end)

  it("autocast lowers the CNN's step peak, where activations outweigh the weights' bfloat16 copies", function()
    local without, with = tricks.techniques.autocast.measure("cnn")
    assert.is_true(with < without, ("%d bytes with, %d without"):format(with, without))
  end)

  it("checkpointing the MLP in 4 segments at least halves its activation peak, with the same gradients", function()
    local plain, plain_grads = tricks.checkpoint_step("mlp", false)
    local checkpointed, grads = tricks.checkpoint_step("mlp", true)
    assert.is_true(checkpointed <= plain / 2, ("%d bytes checkpointed, %d plain"):format(checkpointed, plain))
    assert.equal(#plain_grads, #grads)
    for i = 1, #grads do
      local diff = (plain_grads[i] - grads[i]):abs():max():item()
      assert.is_true(diff <= 1e-6, ("gradient %d differs by %g"):format(i, diff))
    end
  end)

  it("checkpointing lowers the CNN's activation peak with one segment per child", function()
    local plain = tricks.checkpoint_step("cnn", false, 16)
    local checkpointed = tricks.checkpoint_step("cnn", true, 16)
    assert.is_true(checkpointed < plain, ("%d bytes checkpointed, %d plain"):format(checkpointed, plain))
  end)
end)

describe("the table", function()
  it("every row saves (none costs) and has a theory, and saves it within 5 points", function()
    local with_theory, rows = 0, tricks.measure_all()
    for _, row in ipairs(rows) do
      local what = row.technique .. ", " .. row.model
      assert(row.with <= row.without, ("%s: %d bytes with, %d without"):format(what, row.with, row.without))
      if row.theory then
        with_theory = with_theory + 1
        local points = 100 * math.abs((row.without - row.with) - row.theory) / row.without
        assert(points <= 5, ("%s: saved %d bytes, theory %d (%.1f points apart)"):format(
          what, row.without - row.with, row.theory, points))
      end
    end
    assert.equal(#rows, with_theory, "rows with a theory")
  end)

  it("formats rows as aligned text and as Markdown", function()
    local rows = {
      { technique = "a", model = "CNN", without = 4 * 2 ^ 20, with = 2 ^ 20, explain = "why a" },
      { technique = "<close>", model = "deep MLP", without = 2 ^ 20, with = 2 ^ 20, explain = "why b", theory = 0 },
    }
    local text = tricks.format_text(rows)
    assert.is_truthy(text:find("technique", 1, true))
    assert.is_truthy(text:find("4.00 MiB   1.00 MiB  3.00 MiB (75%)", 1, true))
    assert.is_truthy(text:find("    why b", 1, true))
    local md = tricks.format_markdown(rows)
    assert.is_truthy(md:find("| &lt;close> | deep MLP | 1.00 MiB | 1.00 MiB | 0.00 MiB (0%) | 0.00 MiB (0%) | why b |", 1, true))
    assert.is_truthy(md:find("| a | CNN | 4.00 MiB | 1.00 MiB | 3.00 MiB (75%) | - | why a |", 1, true))
  end)
end)
