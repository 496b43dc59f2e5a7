-- Bad input of every kind: each error names the op and the values, nothing
-- leaks, and the session keeps working afterwards.
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

describe("errors", function()
  it("wrong argument types name the function", function()
    local t = lt.ones(2, 2)
    h.fails_cleanly(function() return lt.zeros("a") end, "zeros: expected sizes")
    h.fails_cleanly(function() return lt.ones({}, "x") end, "ones: expected an options table, got string")
    h.fails_cleanly(function() return t:add({}) end, "add: expected a tensor or a number, got table")
    h.fails_cleanly(function() return t:transpose("a", 1) end, "transpose: expected an integer for a dimension, got string")
    h.fails_cleanly(function() return t:narrow(1, 1.5, 1) end, "narrow: expected an integer for the start, got 1.5")
    h.fails_cleanly(function() return t:view({ 2, "x" }) end, "view: size 2 must be an integer, got string")
    h.fails_cleanly(function() return t:squeeze("x") end, "squeeze: expected an integer for a dimension, got string")
    h.fails_cleanly(function() return lt.Tensor.sum(5) end, "sum: expected a tensor, got number")
    h.fails_cleanly(function() return lt.Tensor.exp("x") end, "exp: expected a tensor, got string")
    h.fails_cleanly(function() return t:requires_grad_("yes") end, "requires_grad_: expected a boolean, got string")
    h.fails_cleanly(function() return lt.where(5, t, t) end, "where: expected a tensor, got number")
  end)

  it("shape, dtype and device mismatches name the op and the values", function()
    h.fails_cleanly(function() return lt.ones(2, 3) + lt.ones(4, 3) end, "add:", "[2, 3]", "[4, 3]")
    h.fails_cleanly(function() return lt.ones(2, 3):matmul(lt.ones(2, 3)) end, "matmul:", "[2, 3]")
    h.fails_cleanly(function() return lt.ones(2):view(3) end, "view: shape [3] is invalid for input of size 2")
    h.fails_cleanly(function() return lt.tensor({ 1, 2 }):log_() end, "log_")
    h.fails_cleanly(function() return lt.cat({ lt.ones(2, 3), lt.ones(2, 4) }) end, "cat:")
  end)

  it("out-of-range dims and indices are reported as the user wrote them (1-based)", function()
    local t = lt.ones(2, 3)
    h.fails_cleanly(function() return t:transpose(1, 3) end, "transpose: dimension 3 out of range (expected 1 to 2")
    h.fails_cleanly(function() return t:sum(-3) end, "sum: dimension -3 out of range")
    h.fails_cleanly(function() return t[3] end, "index 3 is out of bounds for dimension 1 with size 2")
    h.fails_cleanly(function() return t[1][4] end, "index 4 is out of bounds for dimension 1 with size 3")
    h.fails_cleanly(function() return t:select(2, 4) end, "index 4 is out of bounds for dimension 2 with size 3")
    h.fails_cleanly(function() return t:unsqueeze(0) end, "unsqueeze: dimension 0 out of range")
  end)

  -- Found by a random-argument fuzz under ASan + UBSan: each was a signed
  -- overflow or a Lua runtime error instead of the op's own message.
  it("extreme integers are errors, not overflows", function()
    local big, small = math.maxinteger, math.mininteger
    h.fails_cleanly(function() return lt.arange(small, big) end, "arange: too many elements")
    local t = lt.arange(small, big, 1 << 62)
    assert.same({small, -(1 << 62), 0, 1 << 62}, t:totable())
    h.fails_cleanly(function() return lt.ones(6):view(big, 3) end, "view: shape [9223372036854775807, 3] is invalid")
    h.fails_cleanly(function() return lt.ones(6):view(1 << 53, 1 << 53, -1) end, "view: shape")
    assert.same({0, big, 3}, lt.ones(0):view(0, big, 3).shape)
    h.fails_cleanly(function() return lt.nn.functional.max_pool2d(lt.ones(1, 1, 4, 4), big) end,
      "max_pool2d: kernel size must be at most 2147483647")
    h.fails_cleanly(function() return lt.nn.functional.conv2d(lt.ones(1, 1, 4, 4), lt.ones(1, 1, 1, 1), nil, {stride = big}) end,
      "conv2d: stride must be at most 2147483647")
    -- Reported as given, not cut to 32 bits ("got 0 x 0").
    h.fails_cleanly(function() return lt.nn.functional.conv2d(lt.ones(1, 1, 4, 4), lt.ones(1, 1, 1, 1), nil, {stride = -(1 << 32)}) end,
      "conv2d: stride must be positive, got -4294967296 x -4294967296")
    h.fails_cleanly(function() return lt.nn.functional.avg_pool2d(lt.ones(1, 1, 4, 4), 2, {divisor_override = -(1 << 32)}) end,
      "divisor_override must be positive, got -4294967296")
    h.fails_cleanly(function() return lt.nn.Conv2d(1e300, 2, 3) end, "Conv2d: expected an integer for in_channels, got 1e+300")
    h.fails_cleanly(function() return lt.nn.MaxPool2d(math.huge) end, "MaxPool2d: expected an integer for kernel_size, got inf")
    assert.equal(3, lt.nn.Linear(3.0, 2).in_features)
  end)

  -- Sizes whose element count passes int64 once said "empty: a tensor of
  -- that shape has too many elements", whatever the user had called.
  it("sizes too large name the op the user called and the shape", function()
    local n = 1 << 32
    local why = "shape [4294967296, 4294967296] has too many elements (numel: integer multiplication overflow)"
    h.fails_cleanly(function() return lt.ones(n, n) end, "ones: " .. why)
    h.fails_cleanly(function() return lt.zeros({ n, n }) end, "zeros: " .. why)
    h.fails_cleanly(function() return lt.empty(n, n) end, "empty: " .. why)
    h.fails_cleanly(function() return lt.full({ n, n }, 2) end, "full: " .. why)
    h.fails_cleanly(function() return lt.rand(n, n) end, "rand: " .. why)
    h.fails_cleanly(function() return lt.randn(n, n, { dtype = "float64" }) end, "randn: " .. why)
    h.fails_cleanly(function() return lt.randint(0, 9, n, n) end, "randint: " .. why)
    h.fails_cleanly(function() return lt.randperm(1 << 62) end,
      "randperm: shape [4611686018427387904] has too many elements (4611686018427387904; lt's limit is")
    h.fails_cleanly(function() return lt.ones(0, 1 << 62, 1 << 62) end,
      "ones: shape [0, 4611686018427387904, 4611686018427387904] is too large for its strides (Stride calculation overflowed)")
    h.fails_cleanly(function() return lt.ones(0, 1 << 62) end, "ones: shape [0, 4611686018427387904] is too large for its strides")
    assert.same({ 0, 1 << 58 }, lt.ones(0, 1 << 58).shape) -- a stride that fits, also in bytes
    -- results of ops, from operands that each fit
    local e = lt.ones(1, 1)
    h.fails_cleanly(function() return e:expand(n, 1) + e:expand(1, n) end, "add: " .. why)
    h.fails_cleanly(function() return lt.ones(n, 0):matmul(lt.ones(0, n)) end, "matmul: " .. why)
    local wide = lt.ones(0):view(0, 1 << 62)
    h.fails_cleanly(function() return lt.cat({ wide, wide }, 2) end, "cat: the sizes in dimension 2 add up past int64")
    local huge = e:expand(1 << 40, 1 << 18) -- 2^58 elements, the most that fit is just under 2^59
    h.fails_cleanly(function() return lt.stack({ huge, huge, huge, huge }) end,
      "stack: shape [4, 1099511627776, 262144] has too many elements (1152921504606846976; lt's limit is")
    -- module constructors name the module, at the script's line
    local err = h.fails(function()
      local m = lt.nn.Linear(n, n)
      return m
    end, "Linear: " .. why)
    assert.is_truthy(err:find("errors_spec.lua:%d+: Linear: "), err)
    h.fails_cleanly(function() return lt.nn.Conv2d(n, n, 3) end,
      "Conv2d: shape [4294967296, 4294967296, 3, 3] has too many elements (numel: integer multiplication overflow)")
    h.fails_cleanly(function() return lt.nn.Embedding(n, n) end, "Embedding: " .. why)
    h.fails_cleanly(function() return lt.nn.LayerNorm({ n, n }) end, "LayerNorm: " .. why)
    h.fails_cleanly(function() return lt.nn.BatchNorm1d(math.maxinteger) end,
      "BatchNorm1d: shape [9223372036854775807] has too many elements")
  end)

  it("sizes must be integers that int64 holds: not 2^63, inf or NaN", function()
    h.fails_cleanly(function() return lt.ones(2 ^ 63) end, "ones: size 1 must be an integer, got 9.2233720368548e+18")
    h.fails_cleanly(function() return lt.zeros(3, math.huge) end, "zeros: size 2 must be an integer, got inf")
    h.fails_cleanly(function() return lt.empty(0 / 0) end, "empty: size 1 must be an integer, got")
    h.fails_cleanly(function() return lt.full({ -2 ^ 63 }, 1) end, "full: invalid size -9223372036854775808 in dimension 1")
    h.fails_cleanly(function() return lt.randint(0, 2 ^ 63, 2) end, "randint: expected an integer for high, got 9.2233720368548e+18")
    h.fails_cleanly(function() return lt.randperm(2 ^ 64) end, "randperm: expected an integer for n")
    h.fails_cleanly(function() return lt.nn.Linear(2 ^ 63, 1) end, "Linear: expected an integer for in_features")
    assert.same({ 2, 3 }, lt.ones(2.0, 3.0).shape) -- integral floats count
  end)

  it("modules and backward name themselves for arguments of the wrong type", function()
    h.fails_cleanly(function() return lt.nn.BatchNorm2d(3)(5) end, "BatchNorm2d: expected a tensor, got number")
    local y = (lt.ones(2, {requires_grad = true}) * 2):sum()
    h.fails_cleanly(function() return y:backward(nil, "yes") end, "backward: expected an options table, got string")
  end)

  it("errors carry the script position, like any Lua error", function()
    local err = h.fails(function() return lt.ones(2):view(3) end)
    assert.is_truthy(err:find("errors_spec.lua:%d+: view:"))
    -- also when the op is called by lt's own Lua code (F.*, a module's
    -- forward): the position is the script's call, not the library's line
    -- (no tail calls here: they would hide this file's frame)
    err = h.fails(function()
      local loss = lt.nn.functional.cross_entropy(lt.randn(4, 3), lt.tensor({1, 2, 3, 9}, {dtype = "int64"}))
      return loss
    end)
    assert.is_truthy(err:find("errors_spec.lua:%d+: cross_entropy: target 9 is out of bounds"), err)
    err = h.fails(function()
      local y = lt.nn.Linear(5, 2)(lt.randn(4, 3))
      return y
    end)
    assert.is_truthy(err:find("errors_spec.lua:%d+: linear:"), err)
  end)

  it("an error under a forward that ends in a tail call names the forward's line", function()
    -- `return self.fc(h)` leaves no frame of the forward on Lua's stack: the
    -- position comes from the forward's source (the return naming fc).
    local nn = lt.nn
    local Block = nn.Module:extend("TailBlock")
    function Block:init() self.a = nn.Linear(4, 3); self.fc = nn.Linear(5, 2) end
    local return_line = debug.getinfo(1, "l").currentline + 4
    function Block:forward(x, skip)
      local h = self.a(x)
      if skip then return h end
      return self.fc(h)
    end
    local err = h.fails(function() return Block()(lt.randn(2, 4)) end)
    assert.is_truthy(err:find("errors_spec.lua:" .. return_line .. ": linear: input %[2, 3%]"), err)
    -- through an outer user module that tail-calls the block, and for an
    -- error Lua code raises (a freed tensor is reported by the C op, a wrong
    -- argument type by the module's Lua)
    local Outer = nn.Module:extend("TailOuter")
    function Outer:init() self.block = Block() end
    function Outer:forward(x) return self.block(x) end
    err = h.fails(function() return Outer()(lt.randn(2, 4)) end)
    assert.is_truthy(err:find("errors_spec.lua:" .. return_line .. ": linear:"), err)
    local Wrong = nn.Module:extend("TailWrong")
    function Wrong:init() self.norm = nn.BatchNorm1d(3) end
    local wrong_line = debug.getinfo(1, "l").currentline + 1
    function Wrong:forward(x) return self.norm(x:sum()) end
    err = h.fails(function() return Wrong()(lt.randn(2, 3)) end)
    assert.is_truthy(err:find("errors_spec.lua:" .. wrong_line .. ": "), err)
    -- a forward without a tail call keeps its frame: its current line
    local Plain = nn.Module:extend("TailPlain")
    function Plain:init() self.fc = nn.Linear(5, 2) end
    local plain_line = debug.getinfo(1, "l").currentline + 2
    function Plain:forward(x)
      local y = self.fc(x)
      return y
    end
    err = h.fails(function() return Plain()(lt.randn(2, 4)) end)
    assert.is_truthy(err:find("errors_spec.lua:" .. plain_line .. ": linear:"), err)
  end)

  it("many errors in a row leave no garbage behind", function()
    lt.gc()
    local before = lt.memory.allocated()
    for _ = 1, 1000 do
      pcall(function() return lt.ones(2, 3) + lt.ones(4) end)
      pcall(function() return lt.ones(3)[7] end)
    end
    lt.gc()
    assert.equal(before, lt.memory.allocated())
  end)
end)

-- A method called with a dot (m.forward(x), opt.step(), loss.backward())
-- passes the wrong self: the error says so at the script's line instead of
-- failing inside lt's files.
describe("methods called with the wrong self", function()
  local nn, optim = lt.nn, lt.optim
  local here = "errors_spec.lua:"

  it("modules, built in and user-defined, name the class and the method", function()
    local x = lt.randn(2, 2)
    local m = nn.Linear(2, 2)
    local err = h.fails(function() local y = nn.Linear.forward(5, x); return y end,
      "Linear:forward: expected a module as self, got a number; call it with a colon: m:forward(...)")
    assert.truthy(err:find(here, 1, true), err)
    h.fails(function() return m.forward(x) end, "Linear:forward: expected a module as self, got a tensor")
    h.fails(function() return m.parameters() end, "Module:parameters: expected a module as self, got nothing")
    h.fails(function() return nn.Sequential(m).forward(x) end, "Sequential:forward: expected a module as self")
    local Block = nn.Module:extend("Block")
    function Block:forward(v) return v end
    h.fails(function() return Block().forward(1) end, "Block:forward: expected a module as self, got a number")
    assert.equal(x, Block()(x)) -- the colon call still works
    assert.equal(2, #m:parameters())
  end)

  it("optimizers, schedulers, scalers and loaders", function()
    local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})
    local err = h.fails(function() opt.step(5) end,
      "Optimizer:step: expected an optimizer as self, got a number; call it with a colon: opt:step(...)")
    assert.truthy(err:find(here, 1, true), err)
    h.fails(function() return optim.Adam(nn.Linear(2, 2):parameters()).zero_grad() end,
      "Optimizer:zero_grad: expected an optimizer as self, got nothing")
    h.fails(function() return opt.check({}) end, "SGD:check: expected an optimizer as self, got a table")
    local sched = optim.lr_scheduler.StepLR(opt, {step_size = 1})
    h.fails(function() return sched.step() end, "lr_scheduler:step: expected a scheduler as self, got nothing")
    local scaler = lt.amp.GradScaler()
    h.fails(function() return scaler.get_scale() end, "GradScaler:get_scale: expected a GradScaler as self")
    local loader = lt.data.DataLoader({lt.ones(4)}, {batch_size = 2})
    h.fails(function() return loader.iter() end, "DataLoader:iter: expected a DataLoader as self")
    opt:step(); sched:step()
    assert.equal(2, #loader)
  end)

  it("tensor methods say to call them with a colon", function()
    local loss = (lt.randn(2, {requires_grad = true}) * 2):sum()
    local err = h.fails(function() loss.backward() end,
      "backward: expected a tensor, got no value as self (argument #1); call a tensor method with a colon: t:backward(...)")
    assert.truthy(err:find(here, 1, true), err)
    h.fails(function() return loss.add(5, 1) end, "add: expected a tensor, got number as self (argument #1)")
  end)

  it("a freed tensor is named with the op and the argument", function()
    local t, u = lt.ones(2), lt.ones(2)
    u:free()
    h.fails(function() return u:add(1) end, "add: attempt to use a freed tensor (self)")
    h.fails(function() return t:add(u) end, "add: attempt to use a freed tensor (argument #1)")
    h.fails(function() return lt.matmul(lt.ones(2, 2), u) end, "matmul: attempt to use a freed tensor (argument #2)")
    h.fails(function() return lt.cat({t, u}, 1) end, "cat: attempt to use a freed tensor (element 2 of the list)")
    h.fails(function() return u.shape end, "attempt to use a freed tensor (self)")
    h.fails(function() return lt.save(os.tmpname(), {w = u}) end, "save: attempt to use a freed tensor ('w')")
  end)
end)

-- Input that used to be accepted and silently misread.
describe("bad input accepted silently before", function()
  it("lt.tensor refuses keys outside the list of each table", function()
    h.fails_cleanly(function() return lt.tensor({1, 2, x = 3}) end,
      "tensor: the table at the top level has key 'x', which is not part of a list (1..2)")
    h.fails_cleanly(function() return lt.tensor({{1, 2}, {3, 4, y = 1}}) end, "the table at [2] has key 'y'")
    h.fails_cleanly(function() return lt.tensor({[1] = 1, [3] = 2}) end, "has key 3, which is not part of a list (1..1)")
    h.fails_cleanly(function() return lt.tensor({1, 2, [2.5] = 1}) end, "has key 2.5")
    assert.same({{1, 2}, {3, 4}}, lt.tensor({{1, 2}, {3, 4}}):totable())
  end)

  it("a device that does not exist is refused by set_limit", function()
    local expected = lt.cuda.is_available() and "no device cuda:7" or "CUDA is not available"
    h.fails_cleanly(function() return lt.memory.set_limit(1024, "cuda:7") end, "set_limit: " .. expected)
    assert.is_true((pcall(lt.memory.set_limit, nil)))
  end)

  it("module and functional flags must be booleans, as lt.zeros's are", function()
    h.fails_cleanly(function() return lt.nn.Linear(2, 3, {bias = 0}) end, "Linear: bias must be a boolean, got number 0")
    h.fails_cleanly(function() return lt.nn.Conv2d(1, 2, 3, {bias = "no"}) end, "Conv2d: bias must be a boolean, got string")
    h.fails_cleanly(function() return lt.nn.BatchNorm2d(2, {affine = 1}) end, "BatchNorm2d: affine must be a boolean")
    h.fails_cleanly(function() return lt.nn.ReLU({inplace = 1}) end, "ReLU: inplace must be a boolean")
    h.fails_cleanly(function() return lt.nn.functional.relu(lt.ones(1), {inplace = 1}) end, "relu: inplace must be a boolean")
    h.fails_cleanly(function() return lt.zeros(2, {requires_grad = 1}) end, "zeros: option 'requires_grad' must be a boolean")
    assert.is_nil(lt.nn.Linear(2, 3, {bias = false}).bias)
  end)

  it("a path with an embedded NUL is refused, not cut short", function()
    local f = os.tmpname()
    lt.save(f, {a = lt.ones(1)})
    local size = io.open(f, "rb"):seek("end")
    h.fails_cleanly(function() return lt.save(f .. "\0.x", {a = lt.ones(3)}) end, "save: the path contains a NUL character")
    h.fails_cleanly(function() return lt.load(f .. "\0.x") end, "load: the path contains a NUL character")
    h.fails_cleanly(function() return lt.read_idx(f .. "\0.x") end, "read_idx: the path contains a NUL character")
    h.fails_cleanly(function() return lt.memory.report(f .. "\0.html") end, "memory.report: the path contains a NUL character")
    h.fails_cleanly(function() return lt.data.fashion_mnist("test", {dir = "/tmp\0x"}) end, "fashion_mnist: dir contains a NUL character")
    assert.equal(size, io.open(f, "rb"):seek("end")) -- f untouched
    os.remove(f)
  end)

  it("an unknown option has one wording, naming the closest known option or listing them", function()
    local t = lt.ones(2, 2)
    local model = lt.nn.Linear(2, 2)
    h.fails_cleanly(function() return lt.zeros(2, { dtpye = "float64" }) end,
      "zeros: unknown option 'dtpye' (did you mean 'dtype'?)")
    h.fails_cleanly(function() return lt.zeros(2, { foo = 1 }) end,
      "zeros: unknown option 'foo' (expected one of dtype, device, requires_grad)")
    h.fails_cleanly(function() return lt.nn.Linear(2, 2, { bais = false }) end,
      "Linear: unknown option 'bais' (did you mean 'bias'?)")
    h.fails_cleanly(function() return lt.nn.functional.conv2d(lt.ones(1, 1, 3, 3), lt.ones(1, 1, 1, 1), nil, { strid = 1 }) end,
      "conv2d: unknown option 'strid' (did you mean 'stride'?)")
    h.fails_cleanly(function() return lt.optim.Adam(model:parameters(), { lrr = 0.1 }) end,
      "Adam: unknown option 'lrr' (did you mean 'lr'?)")
    h.fails_cleanly(function() return t:clamp({ mni = 0 }) end, "clamp: unknown option 'mni' (did you mean 'min'?)")
    h.fails_cleanly(function() return lt.nn.functional.cross_entropy(t, lt.tensor({ 1, 2 }), { reduciton = "sum" }) end,
      "cross_entropy: unknown option 'reduciton' (did you mean 'reduction'?)")
    h.fails_cleanly(function() return model:to({ dtyp = "float64" }) end, "to: unknown option 'dtyp' (did you mean 'dtype'?)")
  end)
end)
