-- Torch7's slices: t[{ {}, -1, {2, 4} }] reads a view of t, and
-- t[{ ... }] = v writes through one (v a number, a boolean or a tensor that
-- broadcasts to it). Each entry of the key is one dimension, in order; the
-- dimensions past the key are whole:
--   {}       the whole dimension
--   {a, b}   the inclusive 1-based range a..b (negative counts from the end)
--   {a}      the range a..a: the dimension stays, of size 1
--   n        the index n: the dimension goes, as t[n] does
-- bindings/tensor_handle.c hands a table key to these (core._set_slicing).
local raise = require "lt.user_error"
local is_tensor = require("lt.core").is_tensor

local M = {}

-- A 1-based position in a dimension of size n (negative from the end).
local function position(what, p, n, d)
  if math.type(p) ~= "integer" then
    raise(("index: %s in dimension %d must be an integer, got %s"):format(what, d, tostring(p)))
  end
  return p < 0 and n + 1 + p or p
end

local function view_of(t, key)
  local n = #key
  if n > t.ndim then
    raise(("index: %d slices for a %d-dimensional tensor"):format(n, t.ndim))
  end
  local v, d = t, 1 -- d: the dimension of v that slice i applies to
  for i = 1, n do
    local s, size = key[i], v.shape[d]
    if type(s) == "number" then
      local p = position("index", s, size, i)
      if p < 1 or p > size then
        raise(("index: index %d is out of bounds for dimension %d with size %d"):format(s, i, size))
      end
      v = v:select(d, p) -- the dimension goes
    elseif type(s) == "table" and not is_tensor(s) then
      if #s > 2 then raise(("index: a range in dimension %d is {a, b}, got %d numbers"):format(i, #s)) end
      if #s > 0 then
        local a = position("range start", s[1], size, i)
        local b = position("range end", s[2] == nil and s[1] or s[2], size, i)
        if a < 1 or b > size or b < a - 1 then
          raise(("index: range {%s, %s} is out of bounds for dimension %d with size %d"):format(
            tostring(s[1]), tostring(s[2] == nil and s[1] or s[2]), i, size))
        end
        v = v:narrow(d, a, b - a + 1)
      end
      d = d + 1
    else
      raise(("index: slice %d must be a number, {} or {a, b}, got %s"):format(i, is_tensor(s) and "a tensor" or type(s)))
    end
  end
  return v
end

function M.get(t, key) return view_of(t, key) end

function M.set(t, key, value)
  local v = view_of(t, key)
  if is_tensor(value) then
    v:copy_(value)
  elseif type(value) == "number" or type(value) == "boolean" then
    v:fill_(type(value) == "boolean" and (value and 1 or 0) or value)
  else
    raise(("index assignment: expected a number, a boolean or a tensor, got %s"):format(type(value)))
  end
end

return M
