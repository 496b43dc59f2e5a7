-- lt.help: optimizers (lua/lt/optim/*.lua).
local PARAMS = "params: a list of tensors (m:parameters()) or a list of groups {params = {...}, lr = ...} whose "
  .. "options override the constructor's. Frozen tensors (requires_grad false) may be among them: they get "
  .. "no gradient, so steps skip them and they hold no state. "

return {
  title = "Optimizers",
  intro = "torch.optim's optimizers over fused kernels: one engine call updates every parameter of a "
    .. "device. State is allocated at the first step and counted as optimizer memory "
    .. "(lt.memory.stats().by_category.optimizer): SGD 0x or 1x the parameter bytes (momentum), Adam 2x, "
    .. "RMSprop 1x to 3x, Adagrad 1x. "
    .. "A step that fails (out of memory) changes no parameter and no state.",
  entries = {
    { "optim", "lt.optim (local optim = lt.optim)",
      "SGD, Adam, AdamW, RMSprop, Adagrad, the Optimizer base and optim.lr_scheduler.",
      ex = "local adam = lt.optim.Adam(model:parameters(), {lr = 1e-3})", members = "optim." },
    { "optim.SGD", "optim.SGD(params, {lr=, momentum=0, dampening=0, weight_decay=0, nesterov=false, maximize=false})",
      "Stochastic gradient descent, as torch.optim.SGD (lr is required). " .. PARAMS
        .. "State: a momentum_buffer per parameter when momentum is not 0.",
      opts = "lr (required), momentum=0, dampening=0, weight_decay=0, nesterov=false, maximize=false",
      ex = "local sgd = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})",
      see = { "optim.Optimizer", "opt:step" } },
    { "optim.Adam",
      "optim.Adam(params, {lr=0.001, betas={0.9, 0.999}, eps=1e-8, weight_decay=0, amsgrad=false, "
        .. "maximize=false})",
      "Adam, as torch.optim.Adam. " .. PARAMS .. "State per parameter: exp_avg and exp_avg_sq (and "
        .. "max_exp_avg_sq with amsgrad) and the step count.",
      opts = "lr=0.001, betas={0.9, 0.999}, eps=1e-8, weight_decay=0, amsgrad=false, maximize=false",
      ex = "local adam = optim.Adam(model:parameters(), {lr = 3e-4, betas = {0.9, 0.95}})",
      see = { "optim.AdamW", "optim.Optimizer" } },
    { "optim.AdamW",
      "optim.AdamW(params, {lr=0.001, betas={0.9, 0.999}, eps=1e-8, weight_decay=0.01, amsgrad=false, "
        .. "maximize=false})",
      "Adam with decoupled weight decay, as torch.optim.AdamW (weight_decay defaults to 0.01).",
      opts = "lr=0.001, betas={0.9, 0.999}, eps=1e-8, weight_decay=0.01, amsgrad=false, maximize=false",
      ex = "local adamw = optim.AdamW(model:parameters(), {lr = 1e-3, weight_decay = 0.05})" },
    { "optim.RMSprop",
      "optim.RMSprop(params, {lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=false, "
        .. "maximize=false})",
      "RMSprop, as torch.optim.RMSprop: the gradient divided by the root of a running average of its "
        .. "square (centered: of its variance). alpha must lie in [0, 1]. " .. PARAMS
        .. "State per parameter: square_avg, momentum_buffer (momentum not 0) and grad_avg (centered), "
        .. "and the step count.",
      opts = "lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=false, maximize=false",
      ex = "local rms = optim.RMSprop(model:parameters(), {lr = 1e-3, momentum = 0.9})",
      see = { "optim.Adagrad", "optim.Optimizer" } },
    { "optim.Adagrad",
      "optim.Adagrad(params, {lr=0.01, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, "
        .. "maximize=false})",
      "Adagrad, as torch.optim.Adagrad (dense gradients): the gradient divided by the root of the sum of "
        .. "its squares, at the rate lr / (1 + (step - 1) * lr_decay). " .. PARAMS
        .. "State per parameter: sum (starting at initial_accumulator_value) and the step count, made at "
        .. "the parameter's first step (PyTorch makes it in the constructor, with the same values).",
      opts = "lr=0.01, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, maximize=false",
      ex = "local ada = optim.Adagrad(model:parameters(), {lr = 0.05})",
      see = { "optim.RMSprop", "optim.Optimizer" } },
    { "optim.Optimizer", "optim.Optimizer (the base of SGD, Adam, AdamW, RMSprop and Adagrad)",
      "Parameter groups, lazily allocated state, zero_grad, state_dict and load_state_dict, state_bytes. "
        .. "An optimizer has the fields param_groups (each group's params and options, which a schedule "
        .. "changes) and state (per parameter). tostring(opt) lists the groups' options.",
      ex = "local sgd = optim.SGD(m:parameters(), {lr = 0.1}); print(sgd.param_groups[1].lr)",
      aliases = { "optim.Optimizer.new" }, members = "opt:" },
    { "opt:step", "opt:step([closure])",
      "Updates every parameter that has a gradient, in one engine call per device. closure, if given, is "
        .. "called first (it recomputes the loss) and its result returned. A failed step (out of memory) "
        .. "leaves every parameter and state as it was and can be retried.",
      ex = "F.cross_entropy(model(x), y):backward(); opt:step(); opt:zero_grad()", see = { "opt:zero_grad" } },
    { "opt:zero_grad", "opt:zero_grad({set_to_none=true})",
      "Drops the parameters' gradients (nil: their memory goes back at once), or fills them with zeros "
        .. "with set_to_none=false.",
      opts = "set_to_none=true", ex = "opt:zero_grad()", see = { "m:zero_grad" } },
    { "opt:state_dict", "opt:state_dict() -> {state =, param_groups =}",
      "PyTorch's layout: state[i] (copies of the buffers and the step) for the parameter at position i "
        .. "over all groups, and param_groups with each group's options and its parameters' positions.",
      ex = "local saved = opt:state_dict()", see = { "opt:load_state_dict" } },
    { "opt:load_state_dict", "opt:load_state_dict(sd)",
      "Restores a state_dict (group structure, buffer names and shapes checked first: a bad one changes nothing).",
      ex = "opt:load_state_dict(opt:state_dict())" },
    { "opt:state_bytes", "opt:state_bytes()",
      "Bytes of the state tensors (0 before the first step: state is made lazily).", ex = "local b = opt:state_bytes()" },
    { "opt:add_param_group", "opt:add_param_group({params = {...}, option = value, ...})",
      "Adds a parameter group; options it does not give come from the constructor's.",
      ex = "opt:add_param_group({params = m:parameters(), lr = 0.01})" },
    { "opt:num_params", "opt:num_params()", "The number of parameters over all groups.",
      ex = "local n = opt:num_params()" },
    { "opt:describe",
      "opt:describe() (tostring(opt))", "The groups and their options as text, "
        .. "as PyTorch prints an optimizer.",
      ex = "print(opt:describe())" },
    { "optim.Optimizer:extend",
      "optim.Optimizer:extend(name, defaults) -> class; class:check(group), class:prepare(params, "
        .. "group, made), class:run(calls), class:commit(call)",
      "Defines an optimizer class called as optim.X(params, options), defaults giving each option's default "
        .. "(optim.Optimizer.required for one the user must give). A step is three hooks: prepare returns "
        .. "the arguments of one update of a list of parameters on one device (new state buffers appended "
        .. "to made), run performs all of them and must change nothing when it fails, commit stores the new "
        .. "state. check(group) validates a group's options; state_tensors names the state buffers.",
      ex = "local Plain = optim.Optimizer:extend(\"Plain\", {lr = optim.Optimizer.required})",
      aliases = { "opt:check", "opt:prepare", "opt:run", "opt:commit" }, see = { "optim.Optimizer.new_buffer" } },
    { "optim.Optimizer.new_buffer", "optim.Optimizer.new_buffer(p, fill=true)",
      "For optimizer classes: a zero-filled (fill=false: uninitialised) buffer like p, counted as optimizer memory.",
      ex = "local buf = optim.Optimizer.new_buffer(m.weight)" },
    { "opt:fail", "opt:fail(format, ...)",
      "For optimizer classes: raises \"<name>: message\" at the line of the user's call.",
      ex = "local ok, err = pcall(opt.fail, opt, \"invalid momentum %s\", -1)" },
  },
}
