-- Shared by the specs: error checks that also prove the session goes on.
local lt = require "lt"

local helpers = {}

-- Calls fn, which must fail; the message must contain every given string
-- (plain text, not patterns). Returns the message.
function helpers.fails(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error, but the call succeeded")
  err = tostring(err)
  for _, part in ipairs { ... } do
    assert(err:find(part, 1, true), string.format("error message %q does not contain %q", err, part))
  end
  return err
end

-- The keys of t in sorted order (a fixture case's input names), so that
-- specs walk them the same way every run.
function helpers.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- Like fails, and then checks that nothing leaked (allocated bytes are back
-- to their value before the call, once garbage is collected) and that the
-- session still computes.
function helpers.fails_cleanly(fn, ...)
  lt.gc()
  local before = lt.memory.allocated()
  local err = helpers.fails(fn, ...)
  lt.gc()
  assert(lt.memory.allocated() == before,
    string.format("allocated %d bytes after the error, %d before", lt.memory.allocated(), before))
  local t = lt.ones(2, 2) + 1
  assert(t:sum():item() == 8.0, "the session cannot compute after the error")
  return err
end

-- Element-wise comparison of nested tables of numbers within tol.
function helpers.near(expected, actual, tol)
  tol = tol or 1e-5
  if type(expected) == "table" then
    assert(type(actual) == "table", "expected a table, got " .. type(actual))
    assert(#expected == #actual, string.format("expected %d elements, got %d", #expected, #actual))
    for i = 1, #expected do helpers.near(expected[i], actual[i], tol) end
  else
    assert(math.abs(expected - actual) <= tol * math.max(1, math.abs(expected)),
      string.format("expected %s, got %s", tostring(expected), tostring(actual)))
  end
end

-- A fixture's {data =, shape =} (flat, row-major, as the generators write
-- them) as a tensor of dtype (default the spec's, else float32).
function helpers.fixture_tensor(spec, dtype)
  return lt.tensor(spec.data, { dtype = dtype or spec.dtype or "float32" }):view(spec.shape)
end

-- actual against a fixture's {data =, shape =}: the same shape, and every
-- element within rel * |expected| + abs. The error names what and the first
-- element that is off (flat, 1-based).
function helpers.fixture_close(spec, actual, what, rel, abs)
  assert(actual ~= nil, what .. ": missing")
  local shape = actual.shape
  local same = #shape == #spec.shape
  for d = 1, #shape do same = same and shape[d] == spec.shape[d] end
  if not same then
    error(string.format("%s: expected shape {%s}, got {%s}", what, table.concat(spec.shape, ", "),
      table.concat(shape, ", ")), 2)
  end
  local got = actual:reshape(-1):totable()
  for i, e in ipairs(spec.data) do
    if not (math.abs(e - got[i]) <= rel * math.abs(e) + abs) then
      error(string.format("%s[%d] (flat): expected %.17g, got %.17g", what, i, e, got[i]), 2)
    end
  end
end

return helpers
