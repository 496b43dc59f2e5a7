-- The peak memory of one causal attention layer's training step (forward and
-- backward) at T = 256, 1024 and 4096 tokens: batch 1, 4 heads, head dim 64,
-- float32, on the CPU. lt's F.scaled_dot_product_attention (blockwise, saves
-- q, k, v, the output and one log-sum-exp per row) against the plain
-- softmax(q k^T / sqrt(d)) v written with lt ops (which keeps the T x T
-- scores and probabilities of every head). Exact allocator bytes above what
-- q, k and v themselves hold, printed as a markdown table.
--   lt scripts/bench/attention_memory.lua [T ...]
local lt = lt or require "lt"
local F = lt.nn.functional

local HEADS, DIM = 4, 64

local function sdpa(q, k, v)
  return F.scaled_dot_product_attention(q, k, v, { is_causal = true })
end

local function plain(q, k, v)
  local T = q:size(3)
  local future = lt.ones({ T, T }, { dtype = "bool" }):tril():logical_not()
  local scores = (q:matmul(k:transpose(3, 4)) * (1 / math.sqrt(DIM))):masked_fill(future, -math.huge)
  return F.softmax(scores, -1):matmul(v)
end

-- Peak allocated bytes of forward + backward above the leaves, and the
-- time it took (one run).
local function step(T, attention)
  local function leaf() return lt.randn({ 1, HEADS, T, DIM }, { requires_grad = true }) end
  local q, k, v = leaf(), leaf(), leaf()
  lt.gc()
  local base = lt.memory.allocated()
  lt.memory.reset_peak()
  local t0 = os.clock()
  attention(q, k, v):sum():backward()
  local seconds = os.clock() - t0
  local peak = lt.memory.max_allocated() - base
  lt.del(q, k, v)
  lt.gc()
  lt.memory.empty_cache()
  return peak, seconds
end

local sizes = {}
for i = 1, #arg do sizes[#sizes + 1] = assert(math.tointeger(tonumber(arg[i])), "T must be an integer") end
if #sizes == 0 then sizes = { 256, 1024, 4096 } end

local function mib(b) return ("%.1f MiB"):format(b / 2 ^ 20) end
print(("One causal attention layer, forward + backward: batch 1, %d heads, head dim %d, float32, CPU (%d threads)")
  :format(HEADS, DIM, lt.get_num_threads()))
print("")
print("| T | lt SDPA peak (bytes) | plain peak (bytes) | plain / SDPA |")
print("|---:|---:|---:|---:|")
for _, T in ipairs(sizes) do
  local fused = step(T, sdpa)
  local naive = step(T, plain)
  print(("| %d | %d (%s) | %d (%s) | %.1fx |"):format(T, fused, mib(fused), naive, mib(naive), naive / fused))
end
