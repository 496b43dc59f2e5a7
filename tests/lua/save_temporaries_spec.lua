-- Temporaries of saves: lt.save (and the memory report, and so a training
-- checkpoint) to F removes "F.tmp.<pid>" files whose process is gone, as a
-- save killed with the named fallback leaves them, and keeps a live
-- process's (it may be saving F right now). tests/host/test_save_kill.sh
-- kills real saves; tests/c/test_atomic_file.c covers both temporaries.
local lt = require "lt"

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function touch(path)
  assert(io.open(path, "wb")):close()
end

-- A pid no process has: a shell that has exited (and was reaped).
local function dead_pid()
  local sh = assert(io.popen("sh -c 'echo $$'"))
  local pid = sh:read("l")
  sh:close()
  return pid
end

describe("saving over F", function()
  local dir, live
  before_each(function()
    local p = assert(io.popen("mktemp -d"))
    dir = p:read("l")
    p:close()
    local s = assert(io.popen("sleep 60 >/dev/null 2>&1 & echo $!"))
    live = s:read("l")
    s:close()
  end)
  after_each(function()
    os.execute("kill " .. live .. " 2>/dev/null")
    os.execute("rm -rf '" .. dir .. "'")
  end)

  local function check(save, file)
    local path = dir .. "/" .. file
    local stale, alive = path .. ".tmp." .. dead_pid(), path .. ".tmp." .. live
    local other = dir .. "/other.tmp." .. dead_pid()
    touch(stale)
    touch(alive)
    touch(other)
    save(path)
    assert.is_true(exists(path))
    assert.is_false(exists(stale), "the dead process's temporary stays")
    assert.is_true(exists(alive), "a live process's temporary was removed")
    assert.is_true(exists(other), "another file's temporary was removed")
    -- and no temporary of this save is left
    local ls = assert(io.popen("ls '" .. dir .. "'"))
    local names = {}
    for name in ls:lines() do names[#names + 1] = name end
    ls:close()
    table.sort(names)
    local expected = { file, file .. ".tmp." .. live, "other.tmp." .. (other:match("(%d+)$")) }
    table.sort(expected)
    assert.same(expected, names)
  end

  it("lt.save removes the temporaries of dead processes only", function()
    check(function(path) lt.save(path, { w = lt.ones(1000) }) end, "F.safetensors")
    local back = lt.load(dir .. "/F.safetensors")
    assert.equal(1000, back.w:sum():item())
  end)

  it("a training checkpoint does the same", function()
    local model = lt.nn.Linear(3, 2)
    local opt = lt.optim.SGD(model:parameters(), { lr = 0.1 })
    local training = require "lt.recipes.training"
    check(function(path) training.save_checkpoint(path, { model = model, optimizer = opt, epoch = 1 }) end,
      "ckpt.safetensors")
  end)

  it("the memory report does the same", function()
    lt.memory.record(true)
    local t = lt.ones(10)
    check(function(path) lt.memory.report(path) end, "report.html")
    lt.memory.record(false)
  end)
end)
