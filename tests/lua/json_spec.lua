-- lt.json: the strict JSON decoder lt.text reads tokenizer.json with. Values by
-- the RFC 8259 grammar, and every malformed input an error with its position.
local json = require "lt.json"
local h = dofile("tests/lua/helpers.lua")

describe("lt.json.decode", function()
  it("reads literals and keeps null as json.null", function()
    assert.is_true(json.decode("true"))
    assert.is_false(json.decode(" false "))
    assert.equal(json.null, json.decode("null"))
    assert.equal("json.null", tostring(json.null))
    local list = json.decode("[1, null, 3]")
    assert.equal(3, #list)
    assert.equal(json.null, list[2])
    assert.has_error(function() json.null.x = 1 end, "json.null is read-only")
  end)

  it("reads integers as Lua integers and the rest as floats", function()
    local cases = {
      { "0", 0, "integer" }, { "-7", -7, "integer" }, { "-0", 0, "integer" },
      { "9223372036854775807", math.maxinteger, "integer" }, { "-9223372036854775808", math.mininteger, "integer" },
      { "9223372036854775808", 9223372036854775808.0, "float" }, -- past int64: a float
      { "1.5", 1.5, "float" }, { "-0.25", -0.25, "float" }, { "1e3", 1000.0, "float" },
      { "2E-2", 0.02, "float" }, { "1.25e+2", 125.0, "float" }, { "0.0", 0.0, "float" },
    }
    for _, c in ipairs(cases) do
      local v = json.decode(c[1])
      assert.equal(c[2], v, c[1])
      assert.equal(c[3], math.type(v), c[1])
    end
  end)

  it("reads escapes, \\u code points and surrogate pairs", function()
    assert.equal("a\"b\\c/d\b\f\n\r\t", json.decode([["a\"b\\c\/d\b\f\n\r\t"]]))
    assert.equal("é€", json.decode([["\u00e9\u20AC"]]))
    assert.equal("\0", json.decode([["\u0000"]]))
    assert.equal("😀 x", json.decode([["\ud83d\ude00 x"]]))
    assert.equal("raw ünïcödé 中文", json.decode('"raw ünïcödé 中文"'))
    assert.equal("", json.decode('""'))
    local long = string.rep("abc\\n", 10000)
    assert.equal(string.rep("abc\n", 10000), json.decode('"' .. long .. '"'))
  end)

  it("reads nested objects and arrays", function()
    local v = json.decode([==[
      { "model": { "type": "WordPiece", "vocab": { "[PAD]": 0, "a": 1 } },
        "list": [ [], {}, [1, [2, [3]]], { "k": [true, false] } ],
        "empty": "" }
    ]==])
    assert.equal("WordPiece", v.model.type)
    assert.same({ ["[PAD]"] = 0, a = 1 }, v.model.vocab)
    assert.same({ {}, {}, { 1, { 2, { 3 } } }, { k = { true, false } } }, v.list)
    assert.equal("", v.empty)
    local deep = string.rep("[", 512) .. string.rep("]", 512)
    assert.equal("table", type(json.decode(deep)))
  end)

  it("reads the tokenizer file kept in the fixtures", function()
    local f = assert(io.open("tests/fixtures/tokenizer/small_tokenizer.json", "rb"))
    local v = json.decode(f:read("a"), "small_tokenizer.json")
    f:close()
    assert.equal("WordPiece", v.model.type)
    assert.equal(0, v.model.vocab["[PAD]"])
    assert.equal(json.null, v.truncation)
  end)

  it("rejects malformed text, saying what and where", function()
    local cases = {
      { "", "expected a value, found the end of the text at line 1, column 1 (byte 1)" },
      { "[1,]", "trailing comma in an array at line 1, column 4 (byte 4)" },
      { '{"a":1,}', "trailing comma in an object at line 1, column 8 (byte 8)" },
      { "[1 2]", "expected ',' or ']' after an array element, found '2' at line 1, column 4" },
      { '{"a" 1}', "expected ':' after an object key, found '1' at line 1, column 6" },
      { "{a: 1}", "expected a string key in an object, found 'a' at line 1, column 2" },
      { '{"a": 1 "b": 2}', "expected ',' or '}' after an object member, found '\"'" },
      { '{"a": 1, "a": 2}', "duplicate object key \"a\" at line 1, column 10" },
      { "01", "number with a leading zero at line 1, column 1" },
      { "-", "expected a digit after '-', found the end of the text" },
      { "1.", "expected a digit after a decimal point" },
      { "1e+", "expected a digit after an exponent's 'e'" },
      { ".5", "expected a value, found '.'" },
      { "+1", "expected a value, found '+'" },
      { "NaN", "expected a value, found 'N'" },
      { "tru", "expected 'true', found 't'" },
      { "nul", "expected 'null', found 'n'" },
      { "[1] x", "unexpected 'x' after the value at line 1, column 5" },
      { '"abc', "unterminated string at line 1, column 1" },
      { '"a\tb"', "raw control character 0x09 in a string (write it as \\u0009) at line 1, column 3" },
      { '"\\x"', "invalid escape '\\x' at line 1, column 2" },
      { '"\\u12"', "expected four hex digits after \\u at line 1, column 4" },
      { '"\\ud800"', "unpaired high surrogate \\uD800 at line 1, column 2" },
      { '"\\ud800\\u0041"', "\\u0041 after the high surrogate \\uD800 is not a low surrogate at line 1, column 8" },
      { '"\\udc00"', "unpaired low surrogate \\uDC00" },
      { '"\255"', "invalid UTF-8 at line 1, column 2 (byte 2)" },
      { "\239\187\191{}", "byte order mark" },
      { "[\n  1,\n  @\n]", "expected a value, found '@' at line 3, column 3 (byte 10)" },
      -- columns count bytes: é takes two
      { "[\n\n\"é\" ü]", "expected ',' or ']' after an array element, found 'ü' at line 3, column 6 (byte 9)" },
      { string.rep("[", 513) .. string.rep("]", 513), "nesting deeper than 512 levels at line 1, column 513" },
    }
    for _, c in ipairs(cases) do
      h.fails(function() return json.decode(c[1]) end, "json.decode: invalid JSON: " .. c[2])
    end
  end)

  it("names the source in messages, and checks its arguments", function()
    h.fails(function() return json.decode("[1,]", "tokenizer.json") end,
      "tokenizer.json: invalid JSON: trailing comma in an array at line 1, column 4 (byte 4)")
    h.fails(function() return json.decode(nil) end, "json.decode: expected a string, got nil")
    h.fails(function() return json.decode(42) end, "json.decode: expected a string, got number")
    h.fails(function() return json.decode("1", {}) end, "json.decode: source must be a string, got table")
  end)
end)
