-- A tour of lt's tensors and memory controls: the main job until training lands.
--   lt scripts/demo.lua
local lt = lt or require "lt"

local function mib(bytes) return string.format("%.1f MiB", bytes / 2^20) end

print(("lt %s on %s, %d thread(s), CUDA %s"):format(lt.version or "?", "cpu",
  lt.get_num_threads(), lt.cuda.is_available() and "available" or "not available"))

lt.manual_seed(0)
local a = lt.randn(3, 4)
local b = lt.ones(4, 2)
print("a = " .. tostring(a))
print("a @ b = " .. tostring(a:matmul(b)))
print("sum of ones(2, 3): " .. lt.ones(2, 3):sum():item())
local values, indices = a:max(2)
print("row maxima " .. tostring(values) .. " at columns " .. tostring(indices))

-- Memory: every byte goes through lt's caching allocator.
lt.gc()                                      -- drop the temporaries above first
lt.memory.reset_peak()
local base = lt.memory.allocated()
do
  local big <close> = lt.empty(1024, 1024)   -- 4 MiB, released at the end of this block
  print("after a 4 MiB tensor: allocated " .. mib(lt.memory.allocated() - base))
end
print("after its block closed: allocated " .. mib(lt.memory.allocated() - base) ..
  ", reserved " .. mib(lt.memory.reserved()))
print("empty_cache gave back " .. mib(lt.memory.empty_cache()))

-- A limit makes this machine behave like a small GPU; out of memory is an error
-- that a script can catch and go on from.
lt.memory.set_limit(64 * 2^20)
for _ = 1, 300 do
  local t = lt.empty(2 * 1024 * 1024)        -- 8 MiB, dropped at once: the collector keeps up
  t:fill_(1)
end
local ok, err = pcall(lt.empty, 32 * 1024 * 1024)  -- 128 MiB
print("caught: " .. (ok and "nothing?" or err:match("[^\n]*")))
lt.memory.set_limit(nil)
print(lt.memory.summary())
