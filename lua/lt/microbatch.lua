-- lt.microbatch(fn, inputs, opts): one step's forward and backward over
-- slices of the batch, with the full batch's gradients.
--
-- The contract: inputs is a list of tensors that share the size n of
-- dimension 1 (the batch); fn(slice_1, ..., slice_m) gets the same rows of
-- each (views, narrow along dimension 1) and returns that slice's loss, a
-- 0-dim tensor mean-reduced over the slice as a script writes it. Each
-- slice's loss is weighted by its share of the batch (rows / n) before its
-- backward, so the accumulated gradients are the gradients of the full
-- batch's mean loss (slices differ by at most one row when k does not divide
-- n). Returns the full batch's loss (the weighted sum, a 0-dim tensor of the
-- loss's dtype without a graph) and the number of chunks used.
--
-- opts.chunks: k (a positive integer, default 1) or "auto": start from the
-- count that last worked for this key (whole the first time); on out of
-- memory drop the attempt (its graph is collected, its gradients dropped,
-- every gradient put back as it was before it), double the count and retry,
-- up to one row per chunk; the count that worked is remembered for the key
-- (opts.key, default fn) and said once on io.stderr. Other errors are raised
-- unchanged, after the gradients are put back.
-- opts.params: the tensors whose gradients are guarded (a list, or a module:
-- its parameters); needed with "auto". Leaves outside it (an input that
-- requires grad) are not put back.
-- opts.scaler: a GradScaler; each weighted loss goes through scaler:scale.
--
-- Putting gradients back needs no copy: before an attempt each guarded
-- .grad is set aside by reference and the attempt's backward makes fresh
-- ones (the engine accumulates into .grad in place, so a backward that
-- fails halfway would leave partial sums in the old ones); a failure drops
-- the fresh ones and restores the old, a success adds the old into the
-- fresh. Only gradients that existed before the call cost memory twice.
local raise = require "lt.user_error"
local core = require "lt.core"

local grad_of, set_grad = core._grad, core._set_grad

-- key -> chunk count that last worked (the key's own lifetime).
local remembered = setmetatable({}, { __mode = "k" })

local function fail(fmt, ...)
  raise("lt.microbatch: " .. fmt:format(...))
end

-- Whether err is the allocator's out of memory ("chunk:line: out of memory
-- on cpu: ..."; nothing else, not Lua's own "not enough memory").
local function is_oom(err)
  if type(err) ~= "string" then return false end
  local first = err:match("^[^\n]*")
  return first:sub(1, 13) == "out of memory" or first:find("^[^:]*:%d+: out of memory") ~= nil
end

local function param_list(params)
  if params == nil then return nil end
  if type(params) == "table" and type(params.parameters) == "function" then params = params:parameters() end
  if type(params) ~= "table" then fail("params must be a list of tensors or a module, got %s", type(params)) end
  -- Each tensor once: a second entry would put nil back over the first's.
  local list, seen = {}, {}
  for i, p in ipairs(params) do
    if not core.is_tensor(p) then fail("params[%d] is not a tensor (%s)", i, type(p)) end
    if not seen[p] then
      seen[p] = true
      list[#list + 1] = p
    end
  end
  return list
end

-- Sets the guarded gradients aside (by reference) and clears them.
local function set_aside(params)
  local saved = {}
  for i, p in ipairs(params) do
    local g = grad_of(p)
    if g then
      saved[i] = g
      set_grad(p, nil)
    end
  end
  return saved
end

-- After a failed attempt: the attempt's gradients dropped, the old back.
local function restore(params, saved)
  for i, p in ipairs(params) do
    set_grad(p, saved[i])
    if saved[i] then saved[i]:free() end
  end
end

-- After a good attempt: old + new in the old tensor where it can be written
-- in place (as backward accumulates), else a new sum.
local function merge(params, saved)
  for i, p in ipairs(params) do
    local old = saved[i]
    if old then
      local new = grad_of(p)
      if new then
        local ok = pcall(old.add_, old, new)
        if ok then
          set_grad(p, old)
        else
          local sum = old + new
          set_grad(p, sum)
          sum:free()
        end
        new:free()
      else
        set_grad(p, old)
      end
      old:free()
    end
  end
end

-- One attempt in k chunks: the full batch's loss, detached.
local function attempt(fn, inputs, n, k, scaler)
  local total, first = nil, 1
  local slices = {}
  for c = 1, k do
    local rows = n * c // k - n * (c - 1) // k
    for i, t in ipairs(inputs) do slices[i] = k == 1 and t or t:narrow(1, first, rows) end
    first = first + rows
    local loss = fn(table.unpack(slices, 1, #inputs))
    if not core.is_tensor(loss) then
      error(("lt.microbatch: fn must return the slice's loss as a tensor, got %s"):format(type(loss)), 0)
    end
    local weighted = k == 1 and loss or loss * (rows / n)
    local scaled = scaler and scaler:scale(weighted) or weighted
    scaled:backward()
    local share = weighted:detach()
    if not rawequal(scaled, weighted) then scaled:free() end
    if not rawequal(weighted, loss) then weighted:free() end
    if total then
      local sum = total + share
      total:free()
      share:free()
      total = sum
    else
      total = share
    end
    if k > 1 then
      for i = 1, #inputs do slices[i]:free() end
    end
  end
  return total
end

local function say(k, n, from)
  local rows = -(-n // k)
  io.stderr:write(("lt.microbatch: out of memory at %d chunk%s; %d chunks of %s%d rows worked (kept for the next calls)\n")
    :format(from, from == 1 and "" or "s", k, n % k == 0 and "" or "up to ", rows))
end

return function(fn, inputs, opts)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    fail("fn must be a function, got %s", type(fn))
  end
  if type(inputs) ~= "table" or #inputs == 0 then
    fail("inputs must be a non-empty list of tensors, got %s", type(inputs) == "table" and "an empty table" or type(inputs))
  end
  local n
  for i, t in ipairs(inputs) do
    if not core.is_tensor(t) then fail("inputs[%d] is not a tensor (%s)", i, type(t)) end
    if t:dim() == 0 then fail("inputs[%d] is 0-dim: slices are taken along dimension 1", i) end
    local size = t:size(1)
    if n == nil then
      n = size
    elseif size ~= n then
      fail("inputs must share dimension 1's size: inputs[1] has %d, inputs[%d] has %d", n, i, size)
    end
  end
  if n == 0 then fail("the batch is empty (dimension 1 has size 0)") end
  opts = opts or {}
  if type(opts) ~= "table" then fail("opts must be a table, got %s", type(opts)) end
  for key in pairs(opts) do
    if key ~= "chunks" and key ~= "params" and key ~= "key" and key ~= "scaler" then
      fail("unknown option '%s'", tostring(key))
    end
  end
  local chunks = opts.chunks == nil and 1 or opts.chunks
  local auto = chunks == "auto"
  if not auto and (math.type(chunks) ~= "integer" or chunks < 1) then
    fail("chunks must be a positive integer or \"auto\", got %s", type(chunks) == "string" and ("'" .. chunks .. "'") or tostring(chunks))
  end
  local params = param_list(opts.params)
  if auto and not params then fail("chunks = \"auto\" needs opts.params (the tensors whose gradients it puts back)") end
  local key = opts.key == nil and fn or opts.key
  local k = math.min(auto and (remembered[key] or 1) or chunks, n)
  local from = k
  while true do
    local saved = params and set_aside(params)
    local ok, result = pcall(attempt, fn, inputs, n, k, opts.scaler)
    if ok then
      if saved then merge(params, saved) end
      -- Said once per increase: the next calls start from k.
      if k > from then say(k, n, from) end
      if auto then remembered[key] = math.max(k, remembered[key] or 1) end
      return result, k
    end
    if saved then restore(params, saved) end
    -- The failed attempt's graph and slices are garbage now: give their
    -- memory back before the next one.
    core.gc()
    if not (auto and is_oom(result)) or k >= n then error(result, 0) end
    k = math.min(2 * k, n)
  end
end
