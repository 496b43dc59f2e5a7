-- lt.help: learning-rate schedules (lua/lt/optim/lr_scheduler.lua).
return {
  title = "Learning-rate schedules",
  intro = "torch.optim.lr_scheduler's names, options and values: each schedule is a closed form of "
    .. "the epoch, so runs are reproducible and resumable, and the rates match PyTorch's step for step. "
    .. "Making a schedule sets epoch 0's rates; sched:step() after opt:step() moves one epoch (or one "
    .. "batch, for OneCycleLR). A refused step, construction or load changes no group.",
  entries = {
    { "optim.lr_scheduler", "lt.optim.lr_scheduler",
      "StepLR, CosineAnnealingLR, LinearLR, LambdaLR, OneCycleLR and SequentialLR.",
      ex = "local sched = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = 10})",
      members = "optim.lr_scheduler." },
    { "optim.lr_scheduler.StepLR", "optim.lr_scheduler.StepLR(opt, {step_size=, gamma=0.1})",
      "lr = base * gamma ^ floor(epoch / step_size).",
      opts = "step_size (required, a positive integer), gamma=0.1",
      ex = "local sched = optim.lr_scheduler.StepLR(opt, {step_size = 30, gamma = 0.1})",
      see = { "sched:step" } },
    { "optim.lr_scheduler.CosineAnnealingLR", "optim.lr_scheduler.CosineAnnealingLR(opt, {T_max=, eta_min=0})",
      "lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.",
      opts = "T_max (required, positive), eta_min=0",
      ex = "local sched = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = 10})" },
    { "optim.lr_scheduler.LinearLR",
      "optim.lr_scheduler.LinearLR(opt, {start_factor=1/3, end_factor=1, total_iters=5})",
      "lr = base * (start + (end - start) * min(epoch, total_iters) / total_iters): a linear warm-up "
        .. "(or decay) of the factor.",
      opts = "start_factor=1/3 (in (0, 1]), end_factor=1 (in [0, 1]), total_iters=5",
      ex = "local warmup = optim.lr_scheduler.LinearLR(opt, {start_factor = 0.1, total_iters = 4})" },
    { "optim.lr_scheduler.LambdaLR", "optim.lr_scheduler.LambdaLR(opt, fn | {fn per group} | {lr_lambda=})",
      "lr = base * fn(epoch), fn a function of the epoch or a list with one per parameter group. The "
        .. "functions are not saved in state_dict (a resumed run passes its own).",
      ex = "local sched = optim.lr_scheduler.LambdaLR(opt, function(epoch) return 0.95 ^ epoch end)" },
    { "optim.lr_scheduler.OneCycleLR",
      "optim.lr_scheduler.OneCycleLR(opt, {max_lr=, total_steps= | epochs= and steps_per_epoch=, "
        .. "pct_start=0.3, anneal_strategy=\"cos\", div_factor=25, final_div_factor=1e4, three_phase=false, "
        .. "cycle_momentum=true, base_momentum=0.85, max_momentum=0.95})",
      "Smith's 1cycle policy, stepped once per batch: the rate rises from max_lr / div_factor to max_lr "
        .. "over pct_start of the steps, then anneals to max_lr / (div_factor * final_div_factor); "
        .. "momentum (SGD's momentum or Adam's beta1) cycles the other way. max_lr and the momenta may "
        .. "be one number or a list, one per group. Stepping past total_steps is an error.",
      opts = "max_lr (required), total_steps or epochs and steps_per_epoch, pct_start=0.3, "
        .. "anneal_strategy=\"cos\" (or \"linear\"), div_factor=25, final_div_factor=1e4, three_phase=false, "
        .. "cycle_momentum=true, base_momentum=0.85, max_momentum=0.95",
      ex = "local sched = optim.lr_scheduler.OneCycleLR(optim.SGD(m:parameters(), {lr = 0.1, momentum = 0.9}), {max_lr = 0.1, total_steps = 100})" },
    { "optim.lr_scheduler.SequentialLR", "optim.lr_scheduler.SequentialLR(opt, {schedulers={...}, milestones={...}})",
      "Runs schedulers[k + 1] from epoch milestones[k] on, each restarted at its own epoch 0 (a LinearLR "
        .. "warm-up, then a CosineAnnealingLR, say). The schedulers are of the same optimizer; #milestones "
        .. "is #schedulers - 1.",
      ex = "local warm = optim.lr_scheduler.LinearLR(opt, {start_factor = 0.1, total_iters = 2})\n"
        .. "local cosine = optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = 8})\n"
        .. "local sched = optim.lr_scheduler.SequentialLR(opt, {schedulers = {warm, cosine}, milestones = {2}})" },
    { "sched:step", "sched:step()",
      "Moves to the next epoch and sets its rates in the optimizer's groups (call it after opt:step()).",
      ex = "local sched = optim.lr_scheduler.StepLR(opt, {step_size = 2}); opt:step(); sched:step()",
      see = { "sched:get_last_lr" } },
    { "sched:get_last_lr", "sched:get_last_lr() -> {lr per group}", "The rates now in force, one per parameter group.",
      ex = "local rates = optim.lr_scheduler.StepLR(opt, {step_size = 2}):get_last_lr()" },
    { "sched:state_dict", "sched:state_dict()",
      "The epoch, the base rates and the options (functions excepted), to save with a checkpoint.",
      ex = "local saved = optim.lr_scheduler.StepLR(opt, {step_size = 2}):state_dict()" },
    { "sched:load_state_dict", "sched:load_state_dict(sd, {keep_options=false}) -> {option = saved value}",
      "Restores a state_dict, checked whole before anything is taken. By PyTorch's rule the saved options "
        .. "come back too; with keep_options=true this schedule's own options stay (a resumed run with a "
        .. "longer T_max continues on the new schedule from the saved epoch). Returns the saved options "
        .. "that differ from the ones in force.",
      opts = "keep_options=false",
      ex = "local sched = optim.lr_scheduler.StepLR(opt, {step_size = 2}); sched:load_state_dict(sched:state_dict())" },
    { "sched:apply", "sched:apply()", "Sets the current epoch's rates in the optimizer's groups again.",
      ex = "optim.lr_scheduler.StepLR(opt, {step_size = 2}):apply()" },
  },
}
