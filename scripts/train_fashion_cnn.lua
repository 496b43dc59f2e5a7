-- Fashion-MNIST with a small convolutional network: two blocks of
-- conv3x3-BatchNorm-ReLU-maxpool (32 and 64 channels), then 3136-128-10, Adam
-- with a cosine learning-rate schedule.
-- The loop, checkpoints, progress bars and metrics log are
-- lua/lt/recipes/training.lua's.
-- The last line printed is "test accuracy 0.XXXX".
--   lt scripts/train_fashion_cnn.lua [--epochs 5] [--lr 0.001] [--checkpoint F [--resume]] ...
--   lt scripts/train_fashion_cnn.lua --limit 2000 --metrics run.jsonl --plot run.html   # a quick run, its curves
--   lt scripts/train_fashion_cnn.lua --help
-- Memory options: --amp bf16|fp16 (autocast; fp16 adds a GradScaler),
-- --checkpoint_segments N (recompute activations in N segments), --accum K
-- (K micro-batches per step; auto: the batch whole, split in twice as many
-- on out of memory, the same gradients).
-- Several processes (lua/lt/recipes/distributed.lua): --ddp (data-parallel,
-- --batch_size per rank) or --zero (and Adam's state sharded), under mpirun:
--   mpirun -np 2 lt scripts/train_fashion_cnn.lua --ddp [--checkpoint F [--resume]]
local lt = lt or require "lt"
local nn, optim = lt.nn, lt.optim
local cli, training = require "lt.recipes.cli", require "lt.recipes.training"
local distributed = require "lt.recipes.distributed"

local opts = cli.parse(arg, distributed.options(training.fashion_options(training.memory_options {
  {"epochs", 5, "passes over the training set", min = 1},
  {"lr", 0.001, "learning rate (the cosine schedule starts there)", min = 0},
})), "scripts/train_fashion_cnn.lua")
distributed.setup(opts)
local train, test = training.fashion_loaders(opts)

local function block(cin, cout)
  return nn.Sequential(
    nn.Conv2d(cin, cout, 3, {padding = 1}), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))
end
local model = nn.Sequential(
  block(1, 32),   -- 32 x 14 x 14
  block(32, 64),  -- 64 x 7 x 7
  nn.Flatten(),
  nn.Linear(3136, 128), nn.ReLU(),
  nn.Linear(128, 10))
model:to(training.device(opts))
print(model)
local trained = distributed.wrap(model, opts)
local opt = distributed.optimizer(model:parameters(), optim.Adam, {lr = opts.lr}, opts)
opts.scheduler = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = opts.epochs})
training.fit(trained, opt, train, test, opts)
distributed.finish(opts)
