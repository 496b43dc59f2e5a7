-- The training steps the memory benchmarks measure (scripts/bench/eager.lua,
-- scripts/bench/memory_step.lua; scripts/bench/memory_torch.py builds the same
-- in PyTorch): the benchmark's MLP and CNN (scripts/bench/step.lua) and a
-- pre-norm transformer block.
local lt = lt or require "lt"
local nn, F, optim = lt.nn, lt.nn.functional, lt.optim


-- A pre-norm transformer block (one head of attention over T tokens of width
-- D, then a 4D MLP with GELU), written with the functional ops; the loss
-- is the mean square of its output.
local Block = nn.Module:extend("Block")
function Block:init(d)
  self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
  self.q, self.k, self.v, self.o = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
  self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
  self.scale = 1 / math.sqrt(d)
end
function Block:forward(x)
  local h = self.ln1(x)
  local scores = self.q(h):matmul(self.k(h):transpose(2, 3)) * self.scale
  local attended = F.softmax(scores, -1):matmul(self.v(h))
  x = x + self.o(attended)
  return x + self.down(F.gelu(self.up(self.ln2(x))))
end

local function mlp()
  return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
    nn.Linear(128, 10))
end

local function cnn()
  return nn.Sequential(
    nn.Conv2d(1, 32, 3, {padding = 1}), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, {padding = 1}), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
end

-- fn() (a forward and its loss) under bfloat16 autocast when amp is set;
-- the backward runs outside the region, as PyTorch recommends.
local function forward(amp, fn)
  if not amp then return fn() end
  local region <close> = lt.autocast {dtype = "bfloat16"}
  return fn()
end

-- A Fashion-MNIST-shaped classifier's step: a random batch of images and
-- labels, cross-entropy.
local function classifier_step(model, opt, batch, amp)
  local x, y = lt.randn(batch, 1, 28, 28), lt.randint(1, 10, {batch})
  local function loss() return F.cross_entropy(model(x), y) end
  return function()
    opt:zero_grad()
    forward(amp, loss):backward()
    opt:step()
  end
end

-- Each: a name, an id (memory_torch.py's) and make(batch, amp), which builds
-- the model, data and optimizer and returns one training step (zero_grad,
-- forward, backward, step), its forward under bfloat16 autocast when amp;
-- steps.peak measures one.
local steps = {
  {name = "MLP (SGD momentum)", id = "mlp", make = function(batch, amp)
    local model = mlp()
    return classifier_step(model, optim.SGD(model:parameters(), {lr = 0.01, momentum = 0.9}), batch, amp)
  end},
  {name = "CNN (Adam)", id = "cnn", make = function(batch, amp)
    local model = cnn()
    return classifier_step(model, optim.Adam(model:parameters(), {lr = 1e-3}), batch, amp)
  end},
  {name = "transformer block (AdamW)", id = "block", make = function(batch, amp)
    local model = Block(256)
    local opt = optim.AdamW(model:parameters(), {lr = 1e-3})
    local x = lt.randn(batch // 16 + 1, 64, 256)
    local function loss() return model(x):pow(2):mean() end
    return function()
      opt:zero_grad()
      forward(amp, loss):backward()
      opt:step()
    end
  end},
}

-- The peak bytes of the second and third steps of the step with this id,
-- everything included (model, data, gradients, optimizer state), above what
-- was allocated before it was built, on the CPU device, as written (no
-- lt.del, no lt.gc()): the tensors' own bytes (requested, what PyTorch's
-- profiler timeline counts) and the allocator's blocks.
function steps.peak(id, batch, amp)
  for _, s in ipairs(steps) do
    if s.id == id then
      lt.manual_seed(0)
      collectgarbage() -- what an earlier measurement dropped is not this one's
      collectgarbage()
      local before = lt.memory.stats("cpu")
      local step = s.make(batch, amp)
      step()
      lt.memory.reset_peak("cpu")
      step()
      step()
      local after = lt.memory.stats("cpu")
      return after.requested_bytes.all.peak - before.requested_bytes.all.current,
        after.allocated_bytes.all.peak - before.allocated_bytes.all.current
    end
  end
  error("steps.peak: unknown model '" .. tostring(id) .. "' (mlp, cnn or block)", 2)
end

return steps
