-- Every elementwise, reduction and matmul op on CUDA against the CPU backend
-- (ggml's test-backend-ops idea): same inputs, forward results compared
-- within the dtype's tolerance. Prints one row per case and exits 1 if any
-- case fails. Run by scripts/gpu_check.sh:  lt tests/gpu/compare_backends.lua
local lt = lt or require "lt"

if not lt.cuda.is_available() then
  print("skipped: no CUDA device")
  os.exit(0)
end

lt.manual_seed(0)
-- Half types round each result once to 8 or 11 bits; float32 differs only by
-- summation order and libm accuracy.
local tol = {float32 = 1e-4, float16 = 2e-2, bfloat16 = 1e-1}
local dtypes = {"float32", "float16", "bfloat16"}
local shapes = {{7}, {33, 65}, {4, 16, 130}}

local function max_error(a, b)
  local d = (a:double() - b:double()):abs()
  local scale = b:double():abs():max():item()
  if a:numel() == 0 then return 0 end
  return d:max():item() / math.max(1, scale)
end

local rows, failures = {}, 0
local function check(op, dtype, shape, fn, ...)
  local inputs, dev_inputs = {...}, {}
  for i, t in ipairs(inputs) do dev_inputs[i] = t:cuda() end
  local ok, err = pcall(function()
    local want = fn(table.unpack(inputs))
    local got = fn(table.unpack(dev_inputs)):cpu()
    return max_error(got, want)
  end)
  local e = ok and err or nil
  local pass = ok and e <= tol[dtype]
  if not pass then failures = failures + 1 end
  rows[#rows + 1] = string.format("%-10s %-9s %-14s %12s %s", op, dtype,
    table.concat(shape, "x"), e and string.format("%.3e", e) or "-",
    pass and "ok" or ("FAIL" .. (ok and "" or (": " .. tostring(err)))))
end

local unary = {"neg", "exp", "abs", "relu", "sigmoid", "tanh", "sqrt"}
local binary = {"add", "sub", "mul", "div"}
for _, dtype in ipairs(dtypes) do
  for _, shape in ipairs(shapes) do
    local a = lt.randn(shape, {dtype = dtype})
    local b = lt.randn(shape, {dtype = dtype})
    local pos = a:abs() + 0.5
    for _, op in ipairs(unary) do
      local x = (op == "sqrt") and pos or a
      check(op, dtype, shape, function(t) return t[op](t) end, x)
    end
    for _, op in ipairs(binary) do
      check(op, dtype, shape, function(x, y) return x[op](x, y) end, a, pos)
    end
    -- broadcasting: a row against the whole tensor
    local row = lt.randn({shape[#shape]}, {dtype = dtype})
    check("add_bcast", dtype, shape, function(x, y) return x + y end, a, row)
    check("clamp", dtype, shape, function(x) return x:clamp(-0.5, 0.5) end, a)
    check("sum", dtype, shape, function(x) return x:sum() end, a)
    check("sum_last", dtype, shape, function(x) return x:sum(-1) end, a)
    check("mean_first", dtype, shape, function(x) return x:mean(1) end, a)
    check("max_last", dtype, shape, function(x) return (x:max(-1)) end, a)
    check("argmax", dtype, shape, function(x) return x:argmax(-1) end, a)
  end
  for _, mm in ipairs({{{8, 16}, {16, 4}}, {{64, 128}, {128, 32}}, {{3, 17, 33}, {3, 33, 9}}}) do
    local a, b = lt.randn(mm[1], {dtype = dtype}), lt.randn(mm[2], {dtype = dtype})
    local shape = {table.concat(mm[1], "x") .. "@" .. table.concat(mm[2], "x")}
    check("matmul", dtype, shape, function(x, y) return lt.matmul(x, y) end, a, b)
  end
end

print(string.format("%-10s %-9s %-14s %12s %s", "op", "dtype", "shape", "max error", "ok"))
for _, r in ipairs(rows) do print(r) end
print(string.format("%d cases, %d failed", #rows, failures))
os.exit(failures == 0 and 0 or 1)
