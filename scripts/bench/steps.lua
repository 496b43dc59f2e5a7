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

-- A Fashion-MNIST-shaped classifier's step: a random batch of images and
-- labels, cross-entropy.
local function classifier_step(model, opt, batch)
  local x, y = lt.randn(batch, 1, 28, 28), lt.randint(1, 10, {batch})
  return function()
    opt:zero_grad()
    F.cross_entropy(model(x), y):backward()
    opt:step()
  end
end

-- Each: a name, an id (memory_torch.py's) and make(batch), which builds the
-- model, data and optimizer and returns one training step (zero_grad,
-- forward, backward, step).
return {
  {name = "MLP (SGD momentum)", id = "mlp", make = function(batch)
    local model = mlp()
    return classifier_step(model, optim.SGD(model:parameters(), {lr = 0.01, momentum = 0.9}), batch)
  end},
  {name = "CNN (Adam)", id = "cnn", make = function(batch)
    local model = cnn()
    return classifier_step(model, optim.Adam(model:parameters(), {lr = 1e-3}), batch)
  end},
  {name = "transformer block (AdamW)", id = "block", make = function(batch)
    local model = Block(256)
    local opt = optim.AdamW(model:parameters(), {lr = 1e-3})
    local x = lt.randn(batch // 16 + 1, 64, 256)
    return function()
      opt:zero_grad()
      model(x):pow(2):mean():backward()
      opt:step()
    end
  end},
}
