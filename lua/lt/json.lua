-- lt.json: a strict JSON (RFC 8259) decoder, enough to read the configuration files
-- models come with (tokenizer.json, config.json), and an encoder for the logs lt
-- writes (the recipes' --metrics lines).
--
--   local json = require "lt.json"
--   local value = json.decode(text [, source])
--   local text = json.encode(value [, {order = {"kind", "step"}}])
--
-- Objects and arrays become Lua tables (arrays 1-based), strings stay UTF-8, numbers
-- without a fraction or exponent become Lua integers when they fit in 64 bits (floats
-- otherwise), true/false are booleans and null is the sentinel json.null, so that an
-- array keeps its length and an object its key. Anything outside the grammar is an
-- error that says what was expected and where: "json.decode: invalid JSON: expected
-- ',' or '}' after an object member at line 3, column 14 (byte 52)", with source in
-- place of json.decode when given.
-- Rejected, as the RFC allows a strict parser to: invalid UTF-8, raw control characters
-- in strings, unpaired \u surrogates, leading zeros, trailing commas, duplicate object
-- keys, anything but whitespace after the value, and nesting deeper than MAX_DEPTH.
local raise = require "lt.user_error"
local json = {}

-- A value distinct from everything else, for null: nil would leave holes in arrays.
json.null = setmetatable({}, {
  __name = "lt.json.null",
  __tostring = function() return "json.null" end,
  __newindex = function() raise("json.null is read-only") end,
})

-- Lua functions do not use the C stack, but a bound keeps a hostile "[[[[..." from
-- growing the Lua stack without limit; real files nest a few levels.
local MAX_DEPTH = 512

local byte, sub, find, char = string.byte, string.sub, string.find, string.char
local utf8_char = utf8.char

local B_QUOTE, B_BACKSLASH, B_MINUS, B_ZERO, B_NINE = 34, 92, 45, 48, 57
local B_LBRACKET, B_RBRACKET, B_LBRACE, B_RBRACE = 91, 93, 123, 125
local B_COMMA, B_COLON, B_DOT = 44, 58, 46

local SIMPLE_ESCAPES = {
  [B_QUOTE] = '"', [B_BACKSLASH] = "\\", [47] = "/", [98] = "\b", [102] = "\f",
  [110] = "\n", [114] = "\r", [116] = "\t",
}

-- A decoding pass: the text and its optional name for messages.
local Parser = {}
Parser.__index = Parser

-- Raises "<source>: invalid JSON: <what> at line L, column C (byte N)". Lines and
-- columns are counted only here, on the error path; columns count bytes.
function Parser:fail(pos, what)
  local line, line_start = 1, 1
  for nl in self.text:sub(1, pos - 1):gmatch("()\n") do
    line, line_start = line + 1, nl + 1
  end
  -- No position of Lua's: the message carries the text's own, and a caller
  -- (lt.text) adds its name in front.
  error(string.format("%s: invalid JSON: %s at line %d, column %d (byte %d)", self.source or "json.decode",
    what, line, pos - line_start + 1, pos), 0)
end

-- What stands at pos, for messages: a quoted character or "the end of the text".
function Parser:describe(pos)
  if pos > #self.text then return "the end of the text" end
  local c = self.text:match("^" .. utf8.charpattern, pos) or sub(self.text, pos, pos)
  if c:find("^[%c ]") then return string.format("byte 0x%02X", byte(c)) end
  return "'" .. c .. "'"
end

-- The position of the first non-whitespace byte at or after pos (JSON's whitespace
-- is exactly space, tab, newline and carriage return).
function Parser:skip(pos)
  return find(self.text, "[^ \t\n\r]", pos) or #self.text + 1
end

function Parser:expect_literal(pos, word, value)
  if sub(self.text, pos, pos + #word - 1) ~= word then
    self:fail(pos, "expected '" .. word .. "', found " .. self:describe(pos))
  end
  return value, pos + #word
end

-- Reads four hex digits after "\u" (pos is the first digit).
function Parser:hex4(pos)
  local digits = self.text:match("^%x%x%x%x", pos)
  if not digits then self:fail(pos, "expected four hex digits after \\u") end
  return tonumber(digits, 16)
end

-- A \u escape at pos (the backslash): one code point, joining a surrogate pair.
function Parser:unicode_escape(pos)
  local cp = self:hex4(pos + 2)
  if cp >= 0xD800 and cp <= 0xDBFF then
    if sub(self.text, pos + 6, pos + 7) ~= "\\u" then
      self:fail(pos, string.format("unpaired high surrogate \\u%04X", cp))
    end
    local low = self:hex4(pos + 8)
    if low < 0xDC00 or low > 0xDFFF then
      self:fail(pos + 6, string.format("\\u%04X after the high surrogate \\u%04X is not a low surrogate", low, cp))
    end
    return utf8_char(0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)), pos + 12
  elseif cp >= 0xDC00 and cp <= 0xDFFF then
    self:fail(pos, string.format("unpaired low surrogate \\u%04X", cp))
  end
  return utf8_char(cp), pos + 6
end

-- A string whose opening quote is at pos. Runs of plain bytes are copied with one
-- sub() each and joined once at the end, so long strings cost linear time.
function Parser:string(pos)
  local text = self.text
  local parts, n = {}, 0
  pos = pos + 1
  while true do
    local stop = find(text, '[\0-\31"\\]', pos)
    if not stop then self:fail(pos - 1, "unterminated string") end
    if stop > pos then n = n + 1; parts[n] = sub(text, pos, stop - 1) end
    local b = byte(text, stop)
    if b == B_QUOTE then
      return (n == 1 and parts[1]) or table.concat(parts), stop + 1
    elseif b == B_BACKSLASH then
      local e = byte(text, stop + 1)
      local simple = SIMPLE_ESCAPES[e]
      if simple then
        n = n + 1; parts[n] = simple
        pos = stop + 2
      elseif e == 117 then -- u
        n = n + 1
        parts[n], pos = self:unicode_escape(stop)
      else
        self:fail(stop, "invalid escape " .. (e and ("'\\" .. char(e) .. "'") or "at the end of the text"))
      end
    else
      self:fail(stop, string.format("raw control character 0x%02X in a string (write it as \\u%04X)", b, b))
    end
  end
end

-- Skips a run of digits starting at pos; fails unless there is at least one.
function Parser:digits(pos, after)
  local b = byte(self.text, pos)
  if not b or b < B_ZERO or b > B_NINE then
    self:fail(pos, "expected a digit after " .. after .. ", found " .. self:describe(pos))
  end
  return find(self.text, "[^0-9]", pos) or #self.text + 1
end

-- A number at pos, by the RFC's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
function Parser:number(start)
  local text = self.text
  local pos = start
  if byte(text, pos) == B_MINUS then pos = pos + 1 end
  local b = byte(text, pos)
  if b == B_ZERO then
    pos = pos + 1
    local next_b = byte(text, pos)
    if next_b and next_b >= B_ZERO and next_b <= B_NINE then self:fail(start, "number with a leading zero") end
  else
    pos = self:digits(pos, "'-'")
  end
  local integral = true
  if byte(text, pos) == B_DOT then
    pos = self:digits(pos + 1, "a decimal point")
    integral = false
  end
  b = byte(text, pos)
  if b == 101 or b == 69 then -- e E
    pos = pos + 1
    b = byte(text, pos)
    if b == 43 or b == B_MINUS then pos = pos + 1 end
    pos = self:digits(pos, "an exponent's 'e'")
    integral = false
  end
  local literal = sub(text, start, pos - 1)
  -- tonumber gives an integer for an integral literal that fits in 64 bits and a
  -- float for one that does not, which is the documented rule.
  local value = tonumber(literal)
  if not integral then value = value + 0.0 end
  return value, pos
end

function Parser:array(pos, depth)
  local result, n = {}, 0
  pos = self:skip(pos + 1)
  if byte(self.text, pos) == B_RBRACKET then return result, pos + 1 end
  while true do
    n = n + 1
    result[n], pos = self:value(pos, depth)
    pos = self:skip(pos)
    local b = byte(self.text, pos)
    if b == B_RBRACKET then return result, pos + 1 end
    if b ~= B_COMMA then
      self:fail(pos, "expected ',' or ']' after an array element, found " .. self:describe(pos))
    end
    pos = self:skip(pos + 1)
    if byte(self.text, pos) == B_RBRACKET then self:fail(pos, "trailing comma in an array") end
  end
end

function Parser:object(pos, depth)
  local result = {}
  pos = self:skip(pos + 1)
  if byte(self.text, pos) == B_RBRACE then return result, pos + 1 end
  while true do
    if byte(self.text, pos) ~= B_QUOTE then
      self:fail(pos, "expected a string key in an object, found " .. self:describe(pos))
    end
    local key_pos = pos
    local key
    key, pos = self:string(pos)
    if result[key] ~= nil then self:fail(key_pos, string.format("duplicate object key %q", key)) end
    pos = self:skip(pos)
    if byte(self.text, pos) ~= B_COLON then
      self:fail(pos, "expected ':' after an object key, found " .. self:describe(pos))
    end
    result[key], pos = self:value(self:skip(pos + 1), depth)
    pos = self:skip(pos)
    local b = byte(self.text, pos)
    if b == B_RBRACE then return result, pos + 1 end
    if b ~= B_COMMA then
      self:fail(pos, "expected ',' or '}' after an object member, found " .. self:describe(pos))
    end
    pos = self:skip(pos + 1)
    if byte(self.text, pos) == B_RBRACE then self:fail(pos, "trailing comma in an object") end
  end
end

-- The value starting at pos (whitespace already skipped): the value and the position
-- after it.
function Parser:value(pos, depth)
  local b = byte(self.text, pos)
  if b == B_QUOTE then return self:string(pos) end
  if b == B_LBRACE or b == B_LBRACKET then
    if depth >= MAX_DEPTH then self:fail(pos, "nesting deeper than " .. MAX_DEPTH .. " levels") end
    if b == B_LBRACE then return self:object(pos, depth + 1) end
    return self:array(pos, depth + 1)
  end
  if b == B_MINUS or (b and b >= B_ZERO and b <= B_NINE) then return self:number(pos) end
  if b == 116 then return self:expect_literal(pos, "true", true) end
  if b == 102 then return self:expect_literal(pos, "false", false) end
  if b == 110 then return self:expect_literal(pos, "null", json.null) end
  self:fail(pos, "expected a value, found " .. self:describe(pos))
end

--- Decodes the JSON text; source (a file name, say) prefixes error messages.
function json.decode(text, source)
  if type(text) ~= "string" then
    raise("json.decode: expected a string, got " .. type(text))
  end
  if source ~= nil and type(source) ~= "string" then
    raise("json.decode: source must be a string, got " .. type(source))
  end
  local parser = setmetatable({ text = text, source = source }, Parser)
  -- One C-speed pass proves the whole text is UTF-8 (no surrogates, nothing past
  -- U+10FFFF), so the string scanner can copy bytes unchecked.
  local ok, bad = utf8.len(text)
  if not ok then parser:fail(bad, "invalid UTF-8") end
  if sub(text, 1, 3) == "\239\187\191" then parser:fail(1, "byte order mark (JSON text must not start with one)") end
  local pos = parser:skip(1)
  if pos > #text then parser:fail(pos, "expected a value, found the end of the text") end
  local value
  value, pos = parser:value(pos, 0)
  pos = parser:skip(pos)
  if pos <= #text then parser:fail(pos, "unexpected " .. parser:describe(pos) .. " after the value") end
  return value
end

-- ---- encoding ----

-- Control characters as JSON spells them; the rest of the C0 range as \\u00XX.
local ENCODE_ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
for c = 0, 31 do
  local ch = char(c)
  ENCODE_ESCAPES[ch] = ENCODE_ESCAPES[ch] or string.format("\\u%04x", c)
end

-- The shortest %.Ng that reads back as the same double, so that 0.1 is
-- written "0.1" and not "0.10000000000000001"; a float that prints as an
-- integer gets ".0", so that decode gives a float back.
local function encode_float(v)
  local s
  for digits = 15, 17 do
    s = string.format("%." .. digits .. "g", v)
    if tonumber(s) == v then break end
  end
  if not find(s, "[.eEn]") then s = s .. ".0" end
  return s
end

-- The value at path (as "$.epochs[2].loss") for messages.
local function child_path(path, key)
  if math.type(key) == "integer" then return path .. "[" .. key .. "]" end
  if find(key, "^[%a_][%w_]*$") then return path .. "." .. key end
  return path .. "[" .. string.format("%q", key) .. "]"
end

-- Keys of an object in the output's order: those named in `order` first, in
-- its order, then the others sorted, so that the same table always gives
-- the same text.
local function ordered_keys(t, order, rank)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local ra, rb = rank[a], rank[b]
    if ra and rb then return ra < rb end
    if ra or rb then return ra ~= nil end
    return a < b
  end)
  return keys
end

local Encoder = {}
Encoder.__index = Encoder

function Encoder:fail(path, what) raise("json.encode: " .. what .. " at " .. path) end

function Encoder:value(v, path, depth, out)
  local kind = type(v)
  if v == nil or v == json.null then
    out[#out + 1] = "null"
  elseif kind == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif kind == "number" then
    if math.type(v) == "integer" then
      out[#out + 1] = string.format("%d", v)
    elseif v ~= v or v == math.huge or v == -math.huge then
      -- JSON has no NaN or infinity; null, as JavaScript's JSON.stringify
      -- writes them (a diverged loss should not stop a log).
      out[#out + 1] = "null"
    else
      out[#out + 1] = encode_float(v)
    end
  elseif kind == "string" then
    if not utf8.len(v) then self:fail(path, "string is not valid UTF-8") end
    out[#out + 1] = '"' .. v:gsub('[%c"\\]', ENCODE_ESCAPES) .. '"'
  elseif kind == "table" then
    if depth >= MAX_DEPTH then self:fail(path, "nesting deeper than " .. MAX_DEPTH .. " levels") end
    if self.open[v] then self:fail(path, "a table that contains itself") end
    self.open[v] = true
    -- An array is a table whose keys are exactly 1..n; an empty table is an
    -- object ({}), as lua-cjson writes it.
    local n, count, strings = #v, 0, 0
    for k in pairs(v) do
      count = count + 1
      if type(k) == "string" then strings = strings + 1 end
    end
    if n > 0 and count == n then
      out[#out + 1] = "["
      for i = 1, n do
        if i > 1 then out[#out + 1] = "," end
        self:value(v[i], child_path(path, i), depth + 1, out)
      end
      out[#out + 1] = "]"
    elseif strings == count then
      out[#out + 1] = "{"
      for i, k in ipairs(ordered_keys(v, self.order, self.rank)) do
        if i > 1 then out[#out + 1] = "," end
        self:value(k, path, depth + 1, out)
        out[#out + 1] = ":"
        self:value(v[k], child_path(path, k), depth + 1, out)
      end
      out[#out + 1] = "}"
    else
      self:fail(path, "a table that is neither an array (keys 1..n) nor an object (string keys)")
    end
    self.open[v] = nil
  else
    self:fail(path, "cannot encode a " .. kind)
  end
end

--- Encodes value as one line of JSON text. Tables with keys 1..n become
--- arrays, tables with string keys objects (keys sorted, after those listed
--- in opts.order), nil and json.null null; NaN and infinities become null, as
--- JavaScript writes them; integers stay integers and floats keep a
--- fraction or exponent (1.0, not 1), so json.decode gives the same types
--- back. Anything else (functions, userdata, mixed or sparse tables,
--- cycles, invalid UTF-8) is an error naming where it is: "json.encode:
--- cannot encode a function at $.opts.f".
function json.encode(value, opts)
  if opts ~= nil and type(opts) ~= "table" then
    raise("json.encode: expected an options table, got " .. type(opts))
  end
  local order = {}
  for k, v in pairs(opts or {}) do
    if k ~= "order" then require("lt.nn.options").unknown("json.encode", k, { order = true }) end
    if type(v) ~= "table" then raise("json.encode: order must be a list of keys, got " .. type(v)) end
    order = v
  end
  local rank = {}
  for i, k in ipairs(order) do rank[k] = i end
  local encoder = setmetatable({ open = {}, order = order, rank = rank }, Encoder)
  local out = {}
  encoder:value(value, "$", 0, out)
  return table.concat(out)
end

return json
