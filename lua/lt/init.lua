-- require "lt": the public lt table, built on the C half (lt.core).
local core = require "lt.core"

local lt = {}
for name, value in pairs(core) do lt[name] = value end

-- dtype names as constants, as torch.float32 and friends
for _, name in ipairs { "float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8", "bool" } do
  lt[name] = name
end
lt.float, lt.double, lt.half, lt.long, lt.int = "float32", "float64", "float16", "int64", "int32"

-- lt.autocast without a device_type under `lt --device cuda`: the region is
-- CUDA's. The engine's default is the CPU, and a CPU region casts no CUDA
-- tensor, so lt.autocast{dtype = "float16"} around a model on the GPU would
-- silently run it all in float32.
function lt.autocast(opts, ...)
  local dev = rawget(lt, "default_device")
  if type(dev) == "string" and dev:match("^cuda") and (opts == nil or type(opts) == "table" and opts.device_type == nil) then
    local copy = { device_type = "cuda" }
    for k, v in pairs(opts or {}) do copy[k] = v end
    opts = copy
  end
  return core.autocast(opts, ...)
end

local extras = require "lt.tensor_extras" -- also t:new_zeros, t:clamp{min=, max=}, ...
lt.finfo, lt.iinfo = extras.finfo, extras.iinfo
local slicing = require "lt.slicing"
core._set_slicing(slicing.get, slicing.set) -- t[{ {}, -1, {2, 4} }], read and written
local tensor_ops = require "lt.tensor_ops" -- t:split, chunk, masked_fill, tril, triu, bmm, baddbmm, var, std, norm
for _, name in ipairs { "split", "chunk", "masked_fill", "tril", "triu", "bmm", "baddbmm", "var", "std", "norm",
    "gather", "cumsum" } do
  lt[name] = lt.Tensor[name] -- torch.tril(x) and friends
end

local namespace = require "lt.namespace"
-- Loaded on first use: most runs never print a summary, estimate or write a report.
namespace(lt.memory, "lt.memory", {
  summary = function() return require("lt.memory_summary")(lt.memory) end,
  estimate = function() return require("lt.memory_estimate").estimate end,
})
function lt.memory.report(path, opts)
  return require("lt.memory_report")(lt.memory, core.version)(path, opts)
end
lt.optim = require "lt.optim"
lt.nn = require "lt.nn"
lt.nn.functional.normalize, lt.nn.functional.cosine_similarity = tensor_ops.normalize, tensor_ops.cosine_similarity
-- t:softmax(dim), t:log_softmax(dim), t:gelu(opts): PyTorch's methods, the
-- functional ops with the tensor first.
for _, name in ipairs { "softmax", "log_softmax", "gelu" } do lt.Tensor[name] = lt.nn.functional[name] end
lt.autograd = require "lt.autograd"
require "lt.grad_hooks" -- t:register_post_accumulate_grad_hook
-- lt.help(x) prints the doc of x (lua/lt/help/): the docs are data that
-- most runs never read, so they load on the first call.
function lt.help(...) return require("lt.help").show(...) end

-- lt.text (tokenizers reading a tokenizer.json) loads on first use: most
-- scripts never tokenize, and it would add a sixth to lt's start-up. So do
-- lt.progress (bars for loops), lt.plot (a training run's curves as HTML)
-- lt.models (the model zoo) and lt.distributed (collectives under mpirun);
-- and lt.checkpoint, lt.amp (GradScaler), lt.microbatch, lt.pp (print with
-- tables shown readably, as the REPL shows results) and lt.data (loaders,
-- data sets, transforms), which a script uses or not: every module loaded at start-up is also Lua heap that each full
-- collection walks (a peak collection costs in proportion to it).
return namespace(lt, "lt", { text = "lt.text", progress = "lt.progress", plot = "lt.plot", models = "lt.models",
  distributed = "lt.distributed", checkpoint = "lt.checkpoint", amp = "lt.amp", microbatch = "lt.microbatch",
  pp = "lt.pp", data = "lt.data" }, { default_device = true })
