-- Fashion-MNIST with a multi-layer perceptron (784-256-128-10), SGD with
-- momentum and a cosine learning-rate schedule. The loop, checkpoints,
-- progress bars and metrics log are lua/lt/recipes/training.lua's.
-- The last line printed is "test accuracy 0.XXXX".
--   lt scripts/train_fashion_mlp.lua [--epochs 10] [--lr 0.05] [--checkpoint F [--resume]] ...
--   lt scripts/train_fashion_mlp.lua --limit 2000 --metrics run.jsonl --plot run.html   # a quick run, its curves
--   lt scripts/train_fashion_mlp.lua --help
local lt = lt or require "lt"
local nn, optim = lt.nn, lt.optim
local cli, training = require "lt.recipes.cli", require "lt.recipes.training"

local opts = cli.parse(arg, training.fashion_options {
  {"epochs", 10, "passes over the training set", min = 1},
  {"lr", 0.05, "learning rate (the cosine schedule starts there)", min = 0},
  {"momentum", 0.9, "SGD momentum", min = 0},
}, "scripts/train_fashion_mlp.lua")
local train, test = training.fashion_loaders(opts)

local model = nn.Sequential(
  nn.Flatten(),
  nn.Linear(784, 256), nn.ReLU(),
  nn.Linear(256, 128), nn.ReLU(),
  nn.Linear(128, 10))
model:to(training.device(opts))
print(model)
local opt = optim.SGD(model:parameters(), {lr = opts.lr, momentum = opts.momentum})
-- Annealing to zero over the run settles the weights: the last epochs no longer
-- bounce between minima (without it test accuracy wanders by about a point).
opts.scheduler = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = opts.epochs})
training.fit(model, opt, train, test, opts)
