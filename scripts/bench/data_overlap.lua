-- How much of lt.data.ImageFolder's decoding the decode threads hide behind
-- the training step. Writes N JPEG files (SIZE x SIZE, RGB) to a scratch
-- folder, then walks an epoch of DataLoader{batch_size = 16} over them with
-- transform Compose{Resize(64), RandomCrop(56), RandomHorizontalFlip(),
-- ToTensor()}, in four ways:
--   load     num_workers = 0, no step: the decoding alone (L)
--   step     the step alone, once per batch, on the Lua thread (S)
--   serial   num_workers = 0 with the step: about L + S
--   w=k      num_workers = k with the step: at best max(S, L / k + the Lua-side
--            transforms), since the file reads, decodes and resizes of the
--            next batches run on the threads while the step runs
-- The step is a busy loop of STEP_MS milliseconds on the Lua thread, which
-- stands for a step that keeps the Lua thread (but not every core) busy,
-- such as one waiting on a GPU. Wall-clock seconds, median of 3 epochs.
--   lt scripts/bench/data_overlap.lua [N=256] [SIZE=256] [STEP_MS=auto: about L per batch]
local n = tonumber(arg and arg[1]) or 256
local size = tonumber(arg and arg[2]) or 256
local step_ms = tonumber(arg and arg[3])
local T = lt.data.transforms
local batch = 16

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "/a' '" .. dir .. "/b'"))
lt.manual_seed(0)
for i = 1, n do
  local img = (lt.rand(size, size, 3) * 255):to("uint8")
  -- smooth the noise a little so that the JPEGs are photo-sized, not noise-sized
  img = T.Resize({ size, size })(T.Resize({ size // 8, size // 8 })(img))
  lt.data._write_image(string.format("%s/%s/%04d.jpg", dir, i % 2 == 0 and "a" or "b", i), img, "jpg", 90)
end

local transform = T.Compose { T.Resize(64), T.RandomCrop(56), T.RandomHorizontalFlip(), T.ToTensor() }

local function busy(ms)
  local stop = lt.clock() + ms / 1000
  while lt.clock() < stop do end
end

local function median(list)
  table.sort(list)
  return list[(#list + 1) // 2]
end

-- Seconds for one epoch: workers decode threads, step_ms per batch.
local function epoch(workers, ms)
  local ds = lt.data.ImageFolder(dir, { transform = transform })
  local loader = lt.data.DataLoader(ds, { batch_size = batch, shuffle = true, seed = 1, num_workers = workers })
  local times = {}
  for _ = 1, 3 do
    lt.gc()
    local t0 = lt.clock()
    for x, y in loader:iter() do
      if ms > 0 then busy(ms) end
      x:free()
      y:free()
    end
    times[#times + 1] = lt.clock() - t0
  end
  local stats = ds:stats()
  ds:close()
  return median(times), stats
end

local batches = (n + batch - 1) // batch
local load = epoch(0, 0)
step_ms = step_ms or math.floor(load / batches * 1000 + 0.5)
local step = batches * step_ms / 1000
print(string.format("%d JPEGs of %dx%d, %d batches of %d, step %d ms per batch, %d cores", n, size, size, batches,
  batch, step_ms, tonumber(io.popen("nproc"):read("l")) or 0))
print(string.format("%-8s %8.3f s", "load", load))
print(string.format("%-8s %8.3f s", "step", step))
local serial = epoch(0, step_ms)
print(string.format("%-8s %8.3f s   (load + step = %.3f s)", "serial", serial, load + step))
for _, w in ipairs { 1, 2, 4 } do
  local t, s = epoch(w, step_ms)
  local hidden = (load + step - t) / math.min(load, step)
  print(string.format("w=%-6d %8.3f s   %3.0f%% of the shorter part hidden; gets: %d ready, %d waited, %d decoded "
    .. "by the getter", w, t, 100 * hidden, s.ready, s.waited, s.stolen))
end
os.execute("rm -rf '" .. dir .. "'")
