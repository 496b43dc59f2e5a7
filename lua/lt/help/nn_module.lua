-- lt.help: lt.nn and nn.Module (lua/lt/nn/init.lua, lua/lt/nn/module.lua).
return {
  title = "Modules: nn.Module",
  intro = "Every layer and model is an nn.Module: m(x) calls m:forward(x). Assigning a module to a "
    .. "field registers a child, assigning an nn.Parameter registers a parameter. Names in "
    .. "named_parameters, state_dict and files are PyTorch's exactly: container children are "
    .. "numbered from 0 in names while Lua indexing stays 1-based (seq[1] holds \"0.weight\"), so "
    .. "checkpoints interchange with PyTorch.",
  entries = {
    { "nn", "lt.nn (local nn = lt.nn)",
      "Modules (nn.Module and the layers), nn.Parameter, losses, nn.init (weight initialisation), nn.utils "
        .. "(gradient clipping) and nn.functional (F: the ops as functions).",
      ex = "local net = lt.nn.Sequential(lt.nn.Linear(4, 8), lt.nn.ReLU(), lt.nn.Linear(8, 2))",
      members = "nn." },
    { "nn.Module", "nn.Module (nn.Module:extend(name) makes a module class)",
      "The base of every layer and model, after torch.nn.Module. A class defines init (the constructor, "
        .. "called with the class's arguments) and forward; instances are called: m(x) is m:forward(x). "
        .. "Fields holding modules, parameters and buffers are registered in assignment order. tostring(m) "
        .. "prints the tree as PyTorch does.",
      ex = "local Block = nn.Module:extend(\"Block\")\n"
        .. "function Block:init(n) self.fc = nn.Linear(n, n) end\n"
        .. "function Block:forward(input) return self.fc(input):relu() end\n"
        .. "local out = Block(4)(x)",
      members = "m:", see = { "nn.Module:extend", "nn.Parameter" } },
    { "nn.Module:extend", "nn.Module:extend(name) / SomeModule:extend(name)",
      "A new module class derived from this one (nn.Linear:extend(\"MyLinear\") inherits Linear's init "
        .. "and forward). Calling the class makes an instance and runs its init. Methods defined on it "
        .. "check that they are called with a colon.",
      ex = "local Scale = nn.Module:extend(\"Scale\"); function Scale:forward(input) return input * 2 end" },
    { "m:init", "function Class:init(...) ... end",
      "The constructor a module class defines: called with the arguments given to the class, it "
        .. "assigns children, parameters and options to self.",
      ex = "local Affine = nn.Module:extend(\"Affine\")\n"
        .. "function Affine:init(n) self.scale = nn.Parameter(lt.ones(n)); self.shift = nn.Parameter(lt.zeros(n)) end\n"
        .. "function Affine:forward(input) return input * self.scale + self.shift end",
      see = { "m:forward" } },
    { "m:forward", "m:forward(...) (m(...) calls it)",
      "What a module computes; every module class defines it (the base raises \"forward is not implemented\").",
      ex = "local out = m:forward(x)" },
    { "m:extra_repr", "m:extra_repr() -> string",
      "The options a module shows inside its parentheses when printed (PyTorch's extra_repr); a class "
        .. "may define it.",
      ex = "print(m:extra_repr())", see = { "m:repr" } },
    { "m:repr", "m:repr() (tostring(m))", "The module tree as text, as PyTorch prints it.",
      ex = "local text = model:repr()" },
    { "m:length", "#m / m:length()",
      "The number of children of a container (nn.Sequential, nn.ModuleList); other modules raise.",
      ex = "local layers = #model" },
    { "nn.Parameter", "nn.Parameter(t, requires_grad=true)",
      "Marks t as a parameter (t itself is returned: a leaf requiring grad, counted as parameter memory; "
        .. "a non-leaf is detached first). Assigning it to a module field registers it.",
      ex = "local bias = nn.Parameter(lt.zeros(3))", aliases = { "nn.Module.Parameter" },
      see = { "m:register_parameter" } },
    { "nn.is_parameter", "nn.is_parameter(t)", "Whether t was made a parameter by nn.Parameter.",
      ex = "assert(nn.is_parameter(m.weight))", aliases = { "nn.Module.is_parameter" } },
    { "nn.is_module", "nn.is_module(v)", "Whether v is a module instance (a class is not).",
      ex = "assert(nn.is_module(m))", aliases = { "nn.Module.is_module" } },
    { "nn.Module.keeps_no_handles", "nn.Module.keeps_no_handles(Class) / nn.Module.keeps_no_handles(m)",
      "Marks a module class whose forward keeps no reference to the tensors it takes or returns, so that "
        .. "nn.Sequential may free an intermediate as soon as the next such layer has used it; with a "
        .. "module, whether its own class is marked. lt's built-in layers are marked; subclasses are not.",
      ex = "local marked = nn.Module.keeps_no_handles(m)" },
    { "m:register_parameter", "m:register_parameter(name, t | nil)",
      "Registers t as the parameter name (made an nn.Parameter if it is not); nil registers an absent "
        .. "parameter (nn.Linear's bias with bias=false).",
      ex = "m:register_parameter(\"scale\", lt.ones(3))" },
    { "m:register_buffer", "m:register_buffer(name, t | nil, persistent=true)",
      "Registers a tensor that is part of the module's state but not trained (running statistics): it "
        .. "follows m:to and is saved in state_dict unless persistent is false.",
      ex = "m:register_buffer(\"steps\", lt.zeros({}, {dtype = \"int64\"}))" },
    { "m:add_module", "m:add_module(name, child | nil) / m:register_module(name, child)",
      "Registers child under name, as assigning m[name] = child does.",
      ex = "model:add_module(\"head\", nn.Linear(3, 1))", aliases = { "m:register_module" } },
    { "m:parameters", "m:parameters(recurse=true) -> {tensor...}",
      "The parameters of m and (with recurse) its descendants, each once, in registration order: what "
        .. "an optimizer takes.",
      ex = "local sgd = optim.SGD(model:parameters(), {lr = 0.01})", see = { "m:named_parameters" } },
    { "m:named_parameters", "m:named_parameters(recurse=true) -> iterator of name, tensor",
      "The parameters with their PyTorch names (\"0.weight\", \"fc.bias\"): for name, p in "
        .. "m:named_parameters() do ... end.",
      ex = "for name, p in model:named_parameters() do print(name, p.shape) end" },
    { "m:buffers", "m:buffers(recurse=true) -> {tensor...}", "The buffers (running statistics, ...), each once.",
      ex = "local bufs = nn.BatchNorm1d(3):buffers()" },
    { "m:named_buffers", "m:named_buffers(recurse=true) -> iterator of name, tensor",
      "The buffers with their names.", ex = "for name in nn.BatchNorm1d(3):named_buffers() do print(name) end" },
    { "m:children", "m:children() -> {module...}", "The direct children, in registration order.",
      ex = "local first = model:children()[1]" },
    { "m:named_children", "m:named_children() -> iterator of name, module", "The direct children with their names.",
      ex = "for name, child in model:named_children() do print(name, child) end" },
    { "m:modules", "m:modules() -> {module...}", "m and every descendant, pre-order, each once.",
      ex = "local count = #model:modules()" },
    { "m:named_modules", "m:named_modules() -> iterator of name, module",
      "m (named \"\") and every descendant with its dotted name.",
      ex = "for name, sub in model:named_modules() do print(name) end" },
    { "m:apply", "m:apply(fn)", "Calls fn(module) on every descendant and then m (children first); returns m.",
      ex = "model:apply(function(mod) if mod.weight then nn.init.zeros_(mod.weight) end end)" },
    { "m:num_parameters", "m:num_parameters({trainable_only=false})",
      "The number of parameter elements (those requiring grad only, with trainable_only).",
      opts = "trainable_only=false", ex = "local n = model:num_parameters()" },
    { "m:train", "m:train(mode=true)",
      "Sets training mode on m and every descendant (dropout drops, batch norm uses batch statistics); returns m.",
      ex = "model:train()", see = { "m:eval" } },
    { "m:eval", "m:eval()", "m:train(false): evaluation mode; returns m.", ex = "model:eval()" },
    { "m:requires_grad_", "m:requires_grad_(on=true)",
      "Sets requires_grad on every parameter (false freezes them); returns m.", ex = "m:requires_grad_(false)" },
    { "m:zero_grad", "m:zero_grad({set_to_none=true})",
      "Drops every parameter's gradient (nil, so its memory goes back at once), or fills them with zeros "
        .. "with set_to_none=false. Returns m.",
      opts = "set_to_none=true", ex = "model:zero_grad()", see = { "opt:zero_grad" } },
    { "m:to", "m:to(dtype | device | tensor | {dtype=, device=})",
      "Converts parameters and buffers in place (floating dtypes only; a device moves everything) and "
        .. "returns m. A parameter stays the same Lua value (its gradient converted too), so an optimizer "
        .. "made before still steps it. All or nothing: a failure (out of memory) leaves m as it was.",
      ex = "model:to(\"float64\"); model:to(\"float32\")", see = { "m:half", "m:cuda" } },
    { "m:half", "m:half(), m:float(), m:double(), m:bfloat16()",
      "m:to(\"float16\"), m:to(\"float32\"), m:to(\"float64\"), m:to(\"bfloat16\").",
      ex = "local half_model = nn.Linear(4, 2):half()", aliases = { "m:float", "m:double", "m:bfloat16" } },
    { "m:cpu", "m:cpu()", "m:to(\"cpu\").", ex = "model:cpu()" },
    { "m:cuda", "m:cuda([index])", "m:to(\"cuda\") or m:to(\"cuda:\" .. index).",
      ex = "if lt.cuda.is_available() then model:cuda() end" },
    { "m:state_dict", "m:state_dict() -> {name = tensor}",
      "Parameters and persistent buffers by PyTorch's dotted names, detached (they share storage with m: "
        .. "clone to keep a snapshot). lt.save writes it as a safetensors file PyTorch reads.",
      ex = "local sd = model:state_dict()", see = { "m:load_state_dict", "lt.save" } },
    { "m:load_state_dict", "m:load_state_dict(sd, {strict=true, quiet=false})",
      "Copies sd's tensors into the parameters and buffers by name (converting dtype and device). Every "
        .. "missing, unexpected and mis-shaped key is named in one error and nothing is loaded. With "
        .. "strict=false, returns {missing_keys=, unexpected_keys=} and names them on stderr unless quiet.",
      opts = "strict=true, quiet=false", ex = "model:load_state_dict(model:state_dict())",
      see = { "lt.load" } },
  },
}
