-- lt.optim: optimizers over fused kernels, and learning-rate schedules.
--   optim.SGD(params, {lr=, momentum=, dampening=, weight_decay=, nesterov=})
--   optim.Adam(params, {lr=, betas={b1, b2}, eps=, weight_decay=, amsgrad=})
--   optim.AdamW(...)                        (decoupled weight decay, default 0.01)
--   optim.RMSprop(params, {lr=, alpha=, eps=, weight_decay=, momentum=, centered=})
--   optim.Adagrad(params, {lr=, lr_decay=, weight_decay=, initial_accumulator_value=, eps=})
--   optim.lr_scheduler.StepLR / CosineAnnealingLR / LinearLR / LambdaLR /
--     OneCycleLR / SequentialLR
--   optim.ZeroRedundancyOptimizer(params, optim.Adam, opts)   (state sharded over the ranks)
-- params: a list of tensors, or a list of groups {params={...}, lr=...}.
-- Frozen tensors (requires_grad false) may be among them: as in PyTorch
-- they get no gradient, so steps skip them and they hold no state.
-- The schedules, RMSprop, Adagrad and ZeRO load on first use (lt.namespace).
local adam = require "lt.optim.adam"

return require "lt.namespace" ({
  Optimizer = require "lt.optim.optimizer",
  SGD = require "lt.optim.sgd",
  Adam = adam.Adam,
  AdamW = adam.AdamW,
}, "lt.optim", {
  RMSprop = "lt.optim.rmsprop",
  Adagrad = "lt.optim.adagrad",
  lr_scheduler = "lt.optim.lr_scheduler",
  ZeroRedundancyOptimizer = "lt.optim.zero", -- ZeRO stage 1 over lt.distributed
})
