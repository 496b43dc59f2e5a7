-- lt.help: autograd (bindings/autograd.c, lua/lt/autograd.lua).
return {
  title = "Autograd",
  intro = "Operations on tensors that require grad are recorded as a graph; t:backward() computes "
    .. "gradients into the leaves' .grad and frees the graph. Each saved tensor remembers its version, "
    .. "so an in-place write to it makes backward fail with a message naming the op.",
  entries = {
    { "t:backward", "t:backward([grad] [, {retain_graph=false}])",
      "Backpropagates from t: every leaf that requires grad gets the gradient of t added to its .grad. "
        .. "grad is needed unless t has one element (it is d(something)/dt, t's shape). The graph is freed "
        .. "unless retain_graph=true.",
      opts = "retain_graph=false", ex = "local w = lt.randn(4, 1, {requires_grad = true}); x:matmul(w):pow(2):mean():backward()",
      see = { "t.grad", "lt.no_grad", "opt:zero_grad" } },
    { "t:requires_grad_", "t:requires_grad_(on=true)",
      "Sets t.requires_grad (on a leaf of a floating dtype) and returns t.",
      ex = "local w = lt.zeros(3):requires_grad_()", see = { "t.requires_grad" } },
    { "lt.no_grad", "lt.no_grad(fn, ...) / local g <close> = lt.no_grad()",
      "Runs fn(...) with gradient recording off and returns its results (the mode comes back after, also "
        .. "on error); without fn, a guard that turns recording off until it is closed. Nothing is "
        .. "recorded and nothing is saved: inference memory.",
      ex = "local pred = lt.no_grad(function() return model(x) end)",
      types = { "lt.GradModeGuard" }, see = { "lt.enable_grad", "lt.set_grad_enabled", "t:detach" } },
    { "lt.enable_grad", "lt.enable_grad(fn, ...) / local g <close> = lt.enable_grad()",
      "As lt.no_grad, with recording on (inside a no_grad region).",
      ex = "local y2 = lt.no_grad(function() return lt.enable_grad(function() return m(x) end) end)" },
    { "lt.is_grad_enabled", "lt.is_grad_enabled()", "Whether operations are recorded now.",
      ex = "assert(lt.is_grad_enabled())" },
    { "lt.set_grad_enabled", "lt.set_grad_enabled(on)",
      "Turns recording on or off for good and returns the previous mode, so that it can be restored.",
      ex = "local before = lt.set_grad_enabled(false); lt.set_grad_enabled(before)" },
    { "lt.autograd", "lt.autograd",
      "Custom differentiable functions written in Lua (lt.autograd.Function) and a finite-difference "
        .. "gradient check (lt.autograd.gradcheck).",
      ex = "local ok = lt.autograd.gradcheck(function(a) return a:sin() end, {lt.randn(3, {dtype = \"float64\", requires_grad = true})})",
      members = "lt.autograd." },
    { "lt.autograd.Function",
      "lt.autograd.Function:extend(name) -> Fn; Fn.forward(ctx, ...); Fn.backward(ctx, "
        .. "grad...); Fn.apply(...)",
      "A custom operation, as torch.autograd.Function: forward computes the outputs (nothing inside it is "
        .. "recorded) and may ctx:save_for_backward(tensors); backward gets the outputs' gradients and "
        .. "returns one gradient per argument of forward (nil for non-tensors). Fn.apply(...) runs it and "
        .. "records one node. ctx.needs_input_grad[i] says whether argument i needs a gradient.",
      ex = "local Square = lt.autograd.Function:extend(\"Square\")\n"
        .. "function Square.forward(ctx, a) ctx:save_for_backward(a); return a * a end\n"
        .. "function Square.backward(ctx, g) local a = ctx:saved_tensors(); return 2 * a * g end\n"
        .. "local sq = Square.apply(lt.randn(3, {requires_grad = true}))",
      types = { "lt.autograd.Context" }, see = { "ctx:save_for_backward", "lt.autograd.gradcheck" } },
    { "lt.autograd.Function:extend", "lt.autograd.Function:extend(name)",
      "A new function class named name (for messages and grad_fn); define its forward and backward.",
      ex = "local Double = lt.autograd.Function:extend(\"Double\")" },
    { "ctx:save_for_backward", "ctx:save_for_backward(tensor...)",
      "Inside forward: keeps tensors for backward (the engine holds them, so an in-place write to one "
        .. "makes backward fail).",
      ex = "local F1 = lt.autograd.Function:extend(\"F1\")\n"
        .. "function F1.forward(ctx, a) ctx:save_for_backward(a); return a:exp() end\n"
        .. "function F1.backward(ctx, g) return ctx:saved_tensors():exp() * g end",
      see = { "ctx:saved_tensors" } },
    { "ctx:saved_tensors", "ctx:saved_tensors() -> tensor...",
      "Inside backward: the tensors forward saved, in order (an error elsewhere: they are freed after backward).",
      ex = "local F2 = lt.autograd.Function:extend(\"F2\")\n"
        .. "function F2.forward(ctx, a, b) ctx:save_for_backward(a, b); return a * b end\n"
        .. "function F2.backward(ctx, g) local a, b = ctx:saved_tensors(); return g * b, g * a end" },
    { "lt.autograd.gradcheck", "lt.autograd.gradcheck(fn, inputs, {eps=1e-6, atol=1e-5, rtol=1e-3})",
      "Checks the gradients backward gives fn at inputs (a list; the tensors that require grad are "
        .. "checked, as float64 copies) against central finite differences. Returns true or raises an error "
        .. "naming the input, the element and both values.",
      opts = "eps=1e-6, atol=1e-5, rtol=1e-3",
      ex = "lt.autograd.gradcheck(function(a) return a:tanh() end, {lt.randn(3, {dtype = \"float64\", requires_grad = true})})" },
  },
}
