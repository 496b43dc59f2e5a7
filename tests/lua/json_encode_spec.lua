-- lt.json.encode: one line of JSON that json.decode reads back to the same
-- values and types (the recipes' --metrics lines), deterministic key order,
-- and an error naming the place of anything JSON cannot hold.
local json = require "lt.json"
local h = dofile("tests/lua/helpers.lua")

describe("lt.json.encode", function()
  it("writes literals, integers and floats so that decode gives the same types back", function()
    assert.equal("null", json.encode(nil))
    assert.equal("null", json.encode(json.null))
    assert.equal("true", json.encode(true))
    assert.equal("-7", json.encode(-7))
    assert.equal("9223372036854775807", json.encode(math.maxinteger))
    assert.equal("1.0", json.encode(1.0))
    assert.equal("-0.0", json.encode(-0.0))
    assert.equal("0.1", json.encode(0.1))
    assert.equal("1e+300", json.encode(1e300))
    for _, v in ipairs {0.1, 1 / 3, 2.5e-8, 123456.789, 2 ^ -1074, 1.0, 1e300, -4.0, math.pi} do
      local back = json.decode(json.encode(v))
      assert.equal(v, back)
      assert.equal("float", math.type(back), json.encode(v))
    end
    assert.equal("integer", math.type(json.decode(json.encode(42))))
  end)

  it("writes NaN and infinities as null, as JavaScript does", function()
    assert.equal("[null,null,null]", json.encode({0 / 0, math.huge, -math.huge}))
  end)

  it("escapes strings and keeps UTF-8 as it is", function()
    assert.equal([["a\"b\\c\n\t\u0001 é"]], json.encode("a\"b\\c\n\t\1 é"))
    local s = "line\r\nnext \u{1F600} \0 end"
    assert.equal(s, json.decode(json.encode(s)))
  end)

  it("writes arrays for keys 1..n, objects with sorted keys, {} for an empty table", function()
    assert.equal("[1,2,[3]]", json.encode({1, 2, {3}}))
    assert.equal([[{"a":1,"b":[true],"c":{"d":"x"}}]], json.encode({c = {d = "x"}, b = {true}, a = 1}))
    assert.equal("{}", json.encode({}))
    local value = {name = "run", values = {1.5, 2, json.null}, nested = {ok = false}}
    assert.same(value, json.decode(json.encode(value)))
  end)

  it("puts opts.order's keys first, in its order", function()
    assert.equal([[{"kind":"step","step":3,"a":1,"z":2}]],
      json.encode({z = 2, step = 3, a = 1, kind = "step"}, {order = {"kind", "step", "epoch"}}))
  end)

  it("refuses what JSON cannot hold, naming where it is", function()
    h.fails(function() json.encode({a = {b = print}}) end, "json.encode: cannot encode a function at $.a.b")
    h.fails(function() json.encode({1, 2, nil, 4}) end, "neither an array (keys 1..n) nor an object (string keys) at $")
    h.fails(function() json.encode({1, x = 2}) end, "neither an array")
    h.fails(function() json.encode({list = {"ok", "\255"}}) end, "json.encode: string is not valid UTF-8 at $.list[2]")
    local t = {}
    t.self = t
    h.fails(function() json.encode(t) end, "json.encode: a table that contains itself at $.self")
    h.fails(function() json.encode({["a b"] = io.stdout}) end, 'cannot encode a userdata at $["a b"]')
    h.fails(function() json.encode(1, {ordr = {}}) end, "json.encode: unknown option 'ordr'")
    h.fails(function() json.encode(1, 5) end, "json.encode: expected an options table, got number")
  end)
end)
