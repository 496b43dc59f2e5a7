-- lt.help: mixed precision (bindings/autocast.c, lua/lt/init.lua, lua/lt/amp.lua).
return {
  title = "Mixed precision",
  intro = "lt.autocast runs a region's ops in bfloat16 or float16 where PyTorch's autocast would "
    .. "(matmul, linear, conv) and keeps the rest in float32; a GradScaler scales float16 losses so "
    .. "small gradients do not underflow (bfloat16 has float32's range and needs none).",
  entries = {
    { "lt.autocast", "lt.autocast({dtype=, enabled=true, device_type=}, fn, ...) / local g <close> = lt.autocast{...}",
      "Runs fn(...) in an autocast region and returns its results (the previous state comes back after, "
        .. "also on error); without fn, a guard for a block. dtype defaults to the device type's: bfloat16 "
        .. "on the CPU, float16 on CUDA. device_type defaults to \"cuda\" under `lt --device cuda`, else "
        .. "\"cpu\". Run the backward outside the region, as PyTorch recommends.",
      opts = "dtype (\"bfloat16\" or \"float16\"), enabled=true, device_type=\"cpu\" (or \"cuda\")",
      ex = "local logits = lt.autocast({dtype = \"bfloat16\"}, function() return model(x) end)",
      types = { "lt.AutocastGuard" }, see = { "lt.amp.GradScaler", "lt.is_autocast_enabled" } },
    { "lt.is_autocast_enabled", "lt.is_autocast_enabled([device_type])",
      "Whether ops (on that device type, or on the open region's) are autocast here.",
      ex = "local on = lt.autocast({}, lt.is_autocast_enabled)" },
    { "lt.get_autocast_dtype", "lt.get_autocast_dtype([device_type])",
      "The dtype an autocast region on that device type uses (the open region's, else the default).",
      ex = "print(lt.get_autocast_dtype(\"cpu\"))" },
    { "lt.amp", "lt.amp", "Loss scaling for float16 mixed precision: lt.amp.GradScaler.",
      ex = "local scaler = lt.amp.GradScaler()", members = "lt.amp." },
    { "lt.amp.GradScaler",
      "lt.amp.GradScaler({init_scale=65536, growth_factor=2, backoff_factor=0.5, growth_interval=2000, "
        .. "enabled=true})",
      "torch.cuda.amp.GradScaler: scaler:scale(loss):backward(), then scaler:step(opt) unscales the "
        .. "gradients and skips the step if any is inf or NaN, then scaler:update() backs the scale off "
        .. "after an inf/NaN and grows it after growth_interval good steps. The scale is a float32 number. "
        .. "Disabled (enabled=false), every method passes through.",
      opts = "init_scale=65536, growth_factor=2, backoff_factor=0.5, growth_interval=2000, enabled=true",
      ex = "local scaler = lt.amp.GradScaler()\n"
        .. "scaler:scale(F.cross_entropy(model(x), y)):backward(); scaler:step(opt); scaler:update()",
      types = { "GradScaler" }, members = "scaler:" },
    { "scaler:scale", "scaler:scale(loss | {tensors})",
      "loss times the scale (a float16 or bfloat16 loss is scaled in float32); a table of tensors is scaled "
        .. "entry by entry.",
      ex = "lt.amp.GradScaler():scale(F.mse_loss(m(x), lt.zeros(8, 3))):backward()" },
    { "scaler:unscale_", "scaler:unscale_(opt)",
      "Divides opt's gradients by the scale in place, once per step, noting any inf or NaN (read when "
        .. "step needs it, so the device is not waited for). Call it before clipping gradients.",
      ex = "local scaler = lt.amp.GradScaler(); scaler:scale(model(x):sum()):backward(); scaler:unscale_(opt)\n"
        .. "nn.utils.clip_grad_norm_(model:parameters(), 1.0); scaler:step(opt); scaler:update()" },
    { "scaler:step", "scaler:step(opt, ...) -> stepped",
      "opt:step(...) unless the gradients held an inf or NaN (unscaling them first if unscale_ was not "
        .. "called); returns whether the step was taken.",
      ex = "local scaler = lt.amp.GradScaler(); scaler:scale(model(x):sum()):backward(); local took = scaler:step(opt); scaler:update()" },
    { "scaler:update", "scaler:update([new_scale])",
      "The scale for the next iteration: times backoff_factor after an inf/NaN, times growth_factor after "
        .. "growth_interval good steps in a row; new_scale sets it instead.",
      ex = "lt.amp.GradScaler():update(1024)" },
    { "scaler:get_scale", "scaler:get_scale()", "The current scale (1 when disabled).",
      ex = "local s = lt.amp.GradScaler():get_scale()" },
    { "scaler:is_enabled", "scaler:is_enabled()", "Whether the scaler was made with enabled=true.",
      ex = "assert(lt.amp.GradScaler():is_enabled())" },
    { "scaler:get_growth_factor", "scaler:get_growth_factor() / scaler:set_growth_factor(v)",
      "The factor the scale grows by after growth_interval good steps.",
      ex = "local sc = lt.amp.GradScaler(); sc:set_growth_factor(4); print(sc:get_growth_factor())",
      aliases = { "scaler:set_growth_factor" } },
    { "scaler:get_backoff_factor", "scaler:get_backoff_factor() / scaler:set_backoff_factor(v)",
      "The factor the scale shrinks by after an inf or NaN.",
      ex = "local sc = lt.amp.GradScaler(); sc:set_backoff_factor(0.25)", aliases = { "scaler:set_backoff_factor" } },
    { "scaler:get_growth_interval", "scaler:get_growth_interval() / scaler:set_growth_interval(n)",
      "The number of good steps in a row before the scale grows.",
      ex = "local sc = lt.amp.GradScaler(); sc:set_growth_interval(100)", aliases = { "scaler:set_growth_interval" } },
    { "scaler:state_dict", "scaler:state_dict()", "The scale, factors, interval and growth tracker ({} when disabled).",
      ex = "local saved = lt.amp.GradScaler():state_dict()" },
    { "scaler:load_state_dict", "scaler:load_state_dict(sd)", "Restores a state_dict.",
      ex = "local sc = lt.amp.GradScaler(); sc:load_state_dict(sc:state_dict())" },
  },
}
