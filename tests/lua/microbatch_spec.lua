-- lt.microbatch: slices of the batch whose weighted losses accumulate the
-- full batch's gradients; "auto" retries with twice the chunks on out of
-- memory, putting every gradient back as it was before the failed attempt.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")
local nn, F = lt.nn, lt.nn.functional

local MiB = 2 ^ 20

local function mlp(width, dtype)
  lt.manual_seed(3)
  local m = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 5))
  if dtype == "float64" then m:double() end
  return m
end

local function grads(model)
  local list = {}
  for i, p in ipairs(model:parameters()) do list[i] = p.grad and p.grad:clone() or false end
  return list
end

-- The largest difference relative to the largest magnitude, per tensor.
local function close(expected, actual, tol, what)
  assert.equal(#expected, #actual, what)
  for i = 1, #expected do
    local e, a = expected[i], actual[i]
    assert(e and a, ("%s: gradient %d missing"):format(what, i))
    local scale = math.max(e:abs():max():item(), 1e-30)
    local diff = (e - a):abs():max():item()
    assert(diff <= tol * scale, ("%s: gradient %d differs by %g (scale %g)"):format(what, i, diff, scale))
  end
end

local function identical(expected, actual, what)
  assert.equal(#expected, #actual, what)
  for i = 1, #expected do
    local e, a = expected[i], actual[i]
    if e == false then
      assert(a == false, ("%s: gradient %d appeared"):format(what, i))
    else
      assert(a, ("%s: gradient %d vanished"):format(what, i))
      assert(e:ne(a):sum():item() == 0, ("%s: gradient %d changed"):format(what, i))
    end
  end
end

-- The full batch's gradients by one plain backward.
local function reference(model, x, y)
  model:zero_grad()
  F.cross_entropy(model(x), y):backward()
  local g = grads(model)
  model:zero_grad()
  return g
end

-- Captures what io.stderr gets while fn runs.
local function stderr_of(fn)
  local real, lines = io.stderr, {}
  io.stderr = { write = function(_, ...) for _, s in ipairs { ... } do lines[#lines + 1] = s end end }
  local ok, a, b = pcall(fn)
  io.stderr = real
  if not ok then error(a, 0) end
  return table.concat(lines), a, b
end

describe("lt.microbatch", function()
  after_each(function() lt.memory.set_limit(nil) end)

  it("chunks = k gives the full batch's gradients and loss (k = 1, 2, 4, 7 over 30 rows)", function()
    for _, dtype in ipairs { "float64", "float32" } do
      local model = mlp(16, dtype)
      lt.manual_seed(5)
      local x, y = lt.randn(30, 8):to(dtype), lt.randint(1, 5, { 30 })
      local want = reference(model, x, y)
      local want_loss = F.cross_entropy(model(x), y):item()
      local tol = dtype == "float64" and 1e-12 or 1e-5
      for _, k in ipairs { 1, 2, 4, 7 } do
        model:zero_grad()
        local loss, used = lt.microbatch(function(xb, yb) return F.cross_entropy(model(xb), yb) end, { x, y },
          { chunks = k })
        assert.equal(k, used)
        assert.equal(0, loss:dim())
        assert.is_false(loss.requires_grad)
        assert(math.abs(loss:item() - want_loss) <= tol * want_loss, dtype .. " loss at k = " .. k)
        close(want, grads(model), tol, dtype .. " k = " .. k)
      end
      -- More chunks than rows: one row each.
      model:zero_grad()
      local _, used = lt.microbatch(function(xb, yb) return F.cross_entropy(model(xb), yb) end, { x, y },
        { chunks = 64, params = model })
      assert.equal(30, used)
      close(want, grads(model), tol, dtype .. " one row per chunk")
    end
  end)

  it("adds to gradients already there (accumulation across calls)", function()
    local model = mlp(16, "float64")
    local x, y = lt.randn(12, 8):double(), lt.randint(1, 5, { 12 })
    local once = reference(model, x, y)
    local fn = function(xb, yb) return F.cross_entropy(model(xb), yb) end
    lt.microbatch(fn, { x, y }, { chunks = 3, params = model })
    lt.microbatch(fn, { x, y }, { chunks = 4, params = model })
    local twice = {}
    for i, g in ipairs(once) do twice[i] = g * 2 end
    close(twice, grads(model), 1e-12, "two calls")
  end)

  it("under a limit where the full batch fails, auto succeeds with its gradients and remembers the count", function()
    local model = mlp(256, "float32")
    lt.manual_seed(9)
    local x, y = lt.randn(4096, 8), lt.randint(1, 5, { 4096 })
    local want = reference(model, x, y)
    local fn = function(xb, yb) return F.cross_entropy(model(xb), yb) end
    lt.gc()
    lt.memory.empty_cache()
    lt.memory.set_limit(lt.memory.allocated() + 12 * MiB)
    -- The full batch does not fit.
    h.fails(function() lt.microbatch(fn, { x, y }, { chunks = 1, params = model }) end, "out of memory")
    identical({ false, false, false, false, false, false }, grads(model), "after the failed full batch")
    local ooms = lt.memory.stats().num_ooms
    local said, _, used = stderr_of(function() return lt.microbatch(fn, { x, y }, { chunks = "auto", params = model }) end)
    assert(used > 1, "auto kept the batch whole")
    assert(lt.memory.stats().num_ooms > ooms, "the whole batch did not run out of memory first")
    assert.equal(("lt.microbatch: out of memory at 1 chunk; %d chunks of %d rows worked (kept for the next calls)\n")
      :format(used, 4096 // used), said)
    close(want, grads(model), 1e-5, "auto")
    -- The second call starts from the count that worked: no out of memory, no message.
    model:zero_grad()
    ooms = lt.memory.stats().num_ooms
    local said2, _, used2 = stderr_of(function() return lt.microbatch(fn, { x, y }, { chunks = "auto", params = model }) end)
    assert.equal(used, used2)
    assert.equal(ooms, lt.memory.stats().num_ooms)
    assert.equal("", said2)
    close(want, grads(model), 1e-5, "auto, second call")
    -- Another function (key) starts whole again.
    model:zero_grad()
    local said3 = stderr_of(function()
      return lt.microbatch(function(a, b) return fn(a, b) end, { x, y }, { chunks = "auto", params = model })
    end)
    assert(said3:find("out of memory at 1 chunk", 1, true), said3)
  end)

  it("a failed attempt leaves gradients already there bit for bit, and auto adds to them", function()
    local model = mlp(256, "float32")
    lt.manual_seed(11)
    local x, y = lt.randn(4096, 8), lt.randint(1, 5, { 4096 })
    local want = reference(model, x, y)
    local fn = function(xb, yb) return F.cross_entropy(model(xb), yb) end
    -- Gradients from an earlier small batch (one parameter has none).
    F.cross_entropy(model(x:narrow(1, 1, 64)), y:narrow(1, 1, 64)):backward()
    local params = model:parameters()
    params[2].grad = nil
    local before = grads(model)
    lt.gc()
    lt.memory.empty_cache()
    local baseline = lt.memory.allocated()
    lt.memory.set_limit(baseline + 12 * MiB)
    h.fails(function() lt.microbatch(fn, { x, y }, { chunks = 1, params = model }) end, "out of memory")
    identical(before, grads(model), "after out of memory")
    lt.gc()
    assert.equal(baseline, lt.memory.allocated())
    stderr_of(function() return lt.microbatch(fn, { x, y }, { chunks = "auto", params = model }) end)
    lt.memory.set_limit(nil)
    local expected = {}
    for i, g in ipairs(want) do expected[i] = before[i] and before[i] + g or g end
    close(expected, grads(model), 1e-5, "old + auto")
  end)

  it("a backward that fails halfway leaves no partial sums, and the error is raised unchanged", function()
    local model = mlp(16, "float64")
    local x, y = lt.randn(10, 8):double(), lt.randint(1, 5, { 10 })
    model:zero_grad()
    F.cross_entropy(model(x), y):backward()
    local before = grads(model)
    -- Fails in the backward of the third slice, after the later layers'
    -- gradients of this slice were accumulated.
    local Boom = lt.autograd.Function:extend("Boom")
    local calls = 0
    function Boom.forward(_, t) return t * 1 end
    function Boom.backward(_, g)
      calls = calls + 1
      if calls == 3 then error("boom in backward", 0) end
      return g
    end
    local first = model[1]
    local fn = function(xb, yb)
      local hidden = Boom.apply(first(xb))
      for i = 2, 5 do hidden = model[i](hidden) end
      return F.cross_entropy(hidden, yb)
    end
    lt.gc()
    local baseline = lt.memory.allocated()
    for _, chunks in ipairs { 5, "auto" } do
      calls = chunks == "auto" and 2 or 0
      local err = h.fails(function() lt.microbatch(fn, { x, y }, { chunks = chunks, params = model }) end)
      assert(err:find("boom in backward", 1, true), err)
      identical(before, grads(model), "after the error, chunks = " .. chunks)
      lt.gc()
      assert.equal(baseline, lt.memory.allocated())
    end
    -- A tensor listed twice in params is put back once, not cleared (the
    -- first layer's gradients are reached after Boom's backward: the
    -- error comes before any is accumulated, unguarded ones may not).
    calls = 2
    local w = model[1].weight
    local w_before = w.grad:clone()
    h.fails(function() lt.microbatch(fn, { x, y }, { chunks = 2, params = { w, w } }) end, "boom in backward")
    assert(w.grad and w.grad:ne(w_before):sum():item() == 0, "the twice-listed gradient changed")
    model:zero_grad()
    F.cross_entropy(model(x), y):backward()
    -- An error object other than a string comes back as it was.
    local object = setmetatable({}, { __tostring = function() return "an error object" end })
    local ok, err = pcall(lt.microbatch, function() error(object) end, { x, y }, { chunks = "auto", params = model })
    assert.is_false(ok)
    assert(rawequal(object, err))
    identical(before, grads(model), "after the error object")
  end)

  it("out of memory in a later chunk drops the attempt's gradients and retries with twice the chunks", function()
    local model = mlp(16, "float64")
    local x, y = lt.randn(16, 8):double(), lt.randint(1, 5, { 16 })
    local want = reference(model, x, y)
    F.cross_entropy(model(x), y):backward()
    local before = grads(model)
    local seen = {}
    local fn = function(xb, yb)
      seen[#seen + 1] = xb:size(1)
      -- The whole batch and the second slice of 8 fail as the allocator
      -- would (after the first slice's backward); slices of 4 fit.
      if xb:size(1) == 16 or #seen == 3 then error("chunk.lua:1: out of memory on cpu: tried to allocate 1.0 MiB", 0) end
      return F.cross_entropy(model(xb), yb)
    end
    local key = {}
    local said, _, used = stderr_of(function()
      return lt.microbatch(fn, { x, y }, { chunks = "auto", params = model, key = key })
    end)
    assert.same({ 16, 8, 8, 4, 4, 4, 4 }, seen)
    assert.equal(4, used)
    assert.equal("lt.microbatch: out of memory at 1 chunk; 4 chunks of 4 rows worked (kept for the next calls)\n", said)
    local expected = {}
    for i, g in ipairs(want) do expected[i] = before[i] + g end
    close(expected, grads(model), 1e-12, "old + retried")
  end)

  it("fixed chunks raise out of memory unchanged, after putting the gradients back", function()
    local model = mlp(16, "float64")
    local x, y = lt.randn(8, 8):double(), lt.randint(1, 5, { 8 })
    F.cross_entropy(model(x), y):backward()
    local before = grads(model)
    local n = 0
    local message = "chunk.lua:1: out of memory on cpu: tried to allocate 1.0 MiB"
    local ok, err = pcall(lt.microbatch, function(xb, yb)
      n = n + 1
      local loss = F.cross_entropy(model(xb), yb)
      if n == 2 then error(message, 0) end
      return loss
    end, { x, y }, { chunks = 2, params = model })
    assert.is_false(ok)
    assert.equal(message, err)
    assert.equal(2, n)
    identical(before, grads(model), "after out of memory with fixed chunks")
  end)

  it("rejects bad arguments with clear errors", function()
    local x, y = lt.randn(6, 2), lt.randint(1, 2, { 5 })
    local fn = function() return lt.zeros({}) end
    local model = mlp(4, "float32")
    local function call(...) local args = table.pack(...) return function() lt.microbatch(table.unpack(args, 1, args.n)) end end
    h.fails_cleanly(call(fn, { x }, { chunks = 0 }), "lt.microbatch: chunks must be a positive integer or \"auto\", got 0")
    h.fails_cleanly(call(fn, { x }, { chunks = "x" }), "lt.microbatch: chunks must be a positive integer or \"auto\", got 'x'")
    h.fails_cleanly(call(fn, { x }, { chunks = 1.5 }), "got 1.5")
    h.fails_cleanly(call(fn, { x, y }), "lt.microbatch: inputs must share dimension 1's size: inputs[1] has 6, inputs[2] has 5")
    h.fails_cleanly(call(42, { x }), "lt.microbatch: fn must be a function, got number")
    h.fails_cleanly(call(fn, x), "lt.microbatch: inputs must be a non-empty list of tensors, got")
    h.fails_cleanly(call(fn, {}), "lt.microbatch: inputs must be a non-empty list of tensors, got an empty table")
    h.fails_cleanly(call(fn, { x, 3 }), "lt.microbatch: inputs[2] is not a tensor (number)")
    h.fails_cleanly(call(fn, { lt.tensor(1.0) }), "lt.microbatch: inputs[1] is 0-dim")
    h.fails_cleanly(call(fn, { x }, { chunks = "auto" }), "lt.microbatch: chunks = \"auto\" needs opts.params")
    h.fails_cleanly(call(fn, { x }, { chunk = 2 }), "lt.microbatch: unknown option 'chunk'")
    h.fails_cleanly(call(fn, { x }, { params = { 1 } }), "lt.microbatch: params[1] is not a tensor (number)")
    h.fails_cleanly(call(function() return 1 end, { x }, { params = model }),
      "lt.microbatch: fn must return the slice's loss as a tensor, got number")
    -- The error is placed at the caller's line.
    local err = h.fails(function() lt.microbatch(fn, { x }, { chunks = 0 }) end)
    assert(err:find("microbatch_spec.lua:%d+: lt.microbatch"), err)
  end)
end)
