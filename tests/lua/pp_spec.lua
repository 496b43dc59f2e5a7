-- lt.pp and lt.pp.format: tables shown readably (the REPL prints its results so).
local lt = require "lt"
local h = dofile("tests/lua/helpers.lua")

describe("lt.pp.format", function()
  local format = lt.pp.format

  it("shows a list of numbers (a shape) on one line", function()
    assert.equal("{3, 4}", format(lt.zeros(3, 4).shape))
    assert.equal("{}", format({}))
  end)

  it("puts the list first, then the other keys sorted, strings before the rest", function()
    assert.equal('{"a", lr = 0.1, momentum = 0.9, ["two words"] = true, [false] = 1}',
      format({ "a", momentum = 0.9, lr = 0.1, ["two words"] = true, [false] = 1 }))
    assert.equal('{["end"] = 1}', format({ ["end"] = 1 }))
  end)

  it("summarises tensors and modules inside a table, and marks functions", function()
    local w = lt.zeros(2, 3):requires_grad_(true)
    assert.equal("{<float32 tensor {2, 3}, requires_grad>, <int64 tensor {}>, <ReLU()>}",
      format({ w, lt.tensor(7), lt.nn.ReLU() }))
    assert.equal("{f = <function>}", format({ f = print }))
  end)

  it("cuts a long module's text and goes one entry per line past the width", function()
    local m = lt.nn.Sequential(lt.nn.Linear(4, 3), lt.nn.ReLU())
    assert.equal("{<Sequential( (0): Linear(in_features=4, out_features=3, bi...>, <ReLU()>}",
      format({ m, lt.nn.ReLU() }))
    assert.equal("{\n  <Sequential( (0): Linear(in_features=4, out_features=3, bi...>,\n  <ReLU()>,\n  <ReLU()>\n}",
      format({ m, lt.nn.ReLU(), lt.nn.ReLU() }))
  end)

  it("stops at the depth and marks cycles", function()
    local nested = { a = { b = { c = { d = 1 } } } }
    assert.equal("{a = {b = {c = {...}}}}", format(nested))
    assert.equal("{a = {b = {c = {d = 1}}}}", format(nested, { depth = 4 }))
    local x = {}
    x.self, x.list = x, { x }
    assert.equal("{list = {<cycle>}, self = <cycle>}", format(x))
    local shared = { 1 }
    assert.equal("{{1}, {1}}", format({ shared, shared })) -- repeated, not a cycle
  end)

  it("shows the first 50 entries and counts the rest", function()
    local t = {}
    for i = 1, 53 do t[i] = 0 end
    assert.truthy(format(t):find("... 3 more", 1, true))
  end)

  it("leaves a value with its own text alone", function()
    local t = lt.ones(2)
    assert.equal(tostring(t), format(t))
    assert.equal("5", format(5))
    assert.equal("hi", format("hi"))
  end)

  it("refuses a depth that is not a positive integer", function()
    h.fails_cleanly(function() return format({}, { depth = 0 }) end,
      "lt.pp: depth must be a positive integer, got 0")
  end)
end)

describe("lt.pp", function()
  it("prints its arguments like print, tables shown readably", function()
    local path = os.tmpname()
    local out = assert(io.open(path, "w"))
    local saved = io.output()
    io.output(out)
    lt.pp({ 1, 2 }, "s", 5)
    io.output(saved)
    out:close()
    local text = assert(io.open(path)):read("a")
    os.remove(path)
    assert.equal("{1, 2}\ts\t5\n", text)
  end)
end)
