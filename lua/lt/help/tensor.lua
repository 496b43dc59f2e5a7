-- lt.help: the tensor, its fields, indexing and conversions
-- (bindings/tensor_handle.c, bindings/tensor_methods.c, lua/lt/slicing.lua).
-- virtual: entries for what no walk of lt's tables finds (fields, syntax).
local FIELD, SYNTAX = "a tensor field", "syntax, not a function"

return {
  title = "Tensors",
  intro = "A tensor is a view (shape, strides, offset, dtype, device) over a storage, as in PyTorch. "
    .. "Every index and dimension is 1-based and -1 is the last. Methods are called with a colon "
    .. "(t:sum()); some are also functions of lt with the tensor first (lt.matmul(a, b), lt.tril(t), "
    .. "lt.sort(t)).",
  entries = {
    { "Tensor", virtual = SYNTAX, "Tensor (lt.Tensor: the table of tensor methods)",
      "An n-dimensional array of one dtype on one device, with autograd. Fields: t.shape, t.dtype, "
        .. "t.device, t.ndim, t.requires_grad, t.grad, t.is_leaf, t.grad_fn. Indexing: t[i], "
        .. "t[{ {}, -1, {2, 4} }]. Operators: + - * / % // ^ and unary -, with numbers on either side. "
        .. "tostring(t) prints as PyTorch does; #t is the size of dimension 1. Reading an unknown "
        .. "field is an error with a suggestion. Adding a function to lt.Tensor makes it a method of "
        .. "every tensor.",
      ex = "local t2 = lt.randn(2, 3); print(t2.shape, t2.dtype, t2.device, t2:sum():item())",
      aliases = { "lt.Tensor" }, members = "t:", compact = true },
    { "t.shape", virtual = FIELD, "t.shape", "The sizes as a Lua list ({2, 3}); a 0-dim tensor's is {}. A new table at each read.",
      ex = "local rows, cols = table.unpack(t.shape)", see = { "t:size", "t.ndim" } },
    { "t.dtype", virtual = FIELD, "t.dtype", "The element type as a string: \"float32\", \"float64\", \"float16\", "
        .. "\"bfloat16\", \"int64\", \"int32\", \"uint8\" or \"bool\".",
      ex = "assert(t.dtype == \"float32\")", see = { "t:to" } },
    { "t.device", virtual = FIELD, "t.device", "Where the storage lives: \"cpu\" or \"cuda:N\" (N from 0).",
      ex = "print(t.device)", see = { "t:to", "t:cuda", "t:cpu" } },
    { "t.ndim", virtual = FIELD, "t.ndim", "The number of dimensions, as t:dim().", ex = "assert(t.ndim == t:dim())" },
    { "t.requires_grad", virtual = FIELD, "t.requires_grad (readable and assignable)",
      "Whether autograd records operations on t so that backward computes its gradient. Setting it is "
        .. "allowed on leaves of a floating dtype.",
      ex = "local w = lt.zeros(3); w.requires_grad = true", see = { "t:requires_grad_", "t:detach" } },
    { "t.grad", virtual = FIELD, "t.grad (readable and assignable)",
      "The gradient backward accumulated into a leaf that requires grad (nil before the first backward "
        .. "or after zero_grad). It may be assigned a tensor of t's shape, dtype and device, or nil.",
      ex = "local w = lt.ones(2, {requires_grad = true}); (w * 3):sum():backward(); print(w.grad)",
      see = { "t:backward", "opt:zero_grad" } },
    { "t.is_leaf", virtual = FIELD, "t.is_leaf",
      "Whether t was made by the user rather than by a recorded operation (leaves get .grad).",
      ex = "assert(t.is_leaf)" },
    { "t.grad_fn", virtual = FIELD, "t.grad_fn",
      "The name of the operation that made t in the autograd graph (\"MulBackward\"), nil for a leaf.",
      ex = "local w = lt.ones(2, {requires_grad = true}); print((w * 2).grad_fn)" },
    { "t[i]", virtual = SYNTAX, "t[i], t[i] = v, t[{ {}, -1, {2, 4} }], t[{...}] = v",
      "Indexing. t[i] is a view of t along dimension 1 (a 0-dim tensor for a 1-D t: :item() gives the "
        .. "number); t[i] = v writes a number or a broadcastable tensor. A table key slices as Torch7: one "
        .. "entry per dimension, {} the whole dimension, {a, b} the inclusive range a..b (negative from the "
        .. "end), {a} the range a..a (the dimension stays), n the index n (the dimension goes); the "
        .. "dimensions past the key are whole. Slices are views, and assigning one writes through.",
      ex = "local row = t[2]; local corner = t[{ {1, 2}, {-2, -1} }]; t[{ {}, 1 }] = 0",
      aliases = { "t[{}]", "slicing", "indexing" }, see = { "t:narrow", "t:select", "t:index_select" } },
    { "operators", virtual = SYNTAX, "a + b, a - b, a * b, a / b, a % b, a // b, a ^ b, -a",
      "Elementwise arithmetic with broadcasting, a number on either side: the same as add, sub, mul, "
        .. "div, remainder (Python's %, the sign of the divisor), floor_divide (Python's //), pow and neg. "
        .. "Comparisons are methods (t:eq, t:lt, ...): Lua's == compares identity and < needs numbers.",
      ex = "local z = (t * 2 + 1) ^ 2 / t:numel()", aliases = { "arithmetic" },
      see = { "t:add", "t:remainder", "t:floor_divide", "t:eq" } },
    { "t:size", "t:size([d])", "The sizes as a list, or the size of dimension d (1-based, -1 the last).",
      ex = "local n = t:size(1); local all = t:size()", see = { "t.shape", "t:numel" } },
    { "t:stride", "t:stride([d])",
      "The strides (elements to step over per index of each dimension) as a list, or dimension d's.",
      ex = "local s = t:stride()", see = { "t:is_contiguous" } },
    { "t:dim", "t:dim()", "The number of dimensions (0 for a scalar tensor).", ex = "local d = t:dim()" },
    { "t:numel", "t:numel()", "The number of elements.", ex = "local n = t:numel()" },
    { "t:element_size", "t:element_size()", "Bytes per element of t's dtype (4 for float32).",
      ex = "local b = t:element_size()" },
    { "t:nbytes", "t:nbytes()", "Bytes of t's elements: numel() * element_size() (not of its whole storage).",
      ex = "local b = t:nbytes()" },
    { "t:is_contiguous", "t:is_contiguous()", "Whether t's elements lie in row-major order without gaps.",
      ex = "assert(not t:t():is_contiguous())", see = { "t:contiguous" } },
    { "t:item", "t:item()",
      "The value of a one-element tensor as a Lua number (an integer for integer dtypes, a boolean for "
        .. "bool). On a GPU this waits for the device.",
      ex = "local total = t:sum():item()", see = { "t:totable" } },
    { "t:totable", "t:totable()",
      "The values as nested Lua tables (a 0-dim tensor gives its number). On a GPU this copies to the host.",
      ex = "local rows = t:totable()", see = { "lt.tensor" } },
    { "t:clone", "t:clone()", "A copy with its own storage (recorded by autograd).",
      ex = "local c = t:clone()", see = { "t:detach" } },
    { "t:detach", "t:detach()",
      "A view of the same storage outside the autograd graph: it does not require grad, and writing to it "
        .. "writes t.",
      ex = "local d = t:detach()", see = { "t:clone", "lt.no_grad" } },
    { "t:contiguous", "t:contiguous()", "t itself if contiguous, else a contiguous copy.",
      ex = "local c = t:t():contiguous()", see = { "t:is_contiguous" } },
    { "t:to", "t:to(dtype | device | other [, {non_blocking=, copy=}]) / t:to({dtype=, device=, copy=, non_blocking=})",
      "t converted to a dtype, moved to a device, or both (another tensor gives its dtype and device). "
        .. "Returns t itself when nothing changes, unless copy=true.",
      opts = "copy=false (always make a new tensor), non_blocking=false (a pinned host <-> GPU copy "
        .. "returns before it is done)",
      ex = "local d = t:to(\"float64\"); local same = t:to({dtype = \"float32\", device = \"cpu\"})",
      see = { "t:float", "t:cuda", "t:cpu", "t:pin_memory" } },
    { "t:float", "t:float(), t:double(), t:half(), t:bfloat16(), t:long(), t:int(), t:byte(), t:bool()",
      "t converted to float32, float64, float16, bfloat16, int64, int32, uint8 or bool (t itself when "
        .. "it already is). float16 and bfloat16 round as PyTorch does, bit for bit.",
      ex = "local h = t:half()",
      aliases = { "t:double", "t:half", "t:bfloat16", "t:long", "t:int", "t:byte", "t:bool" },
      see = { "t:to" } },
    { "t:cpu", "t:cpu()", "t on the CPU (t itself when it is there).", ex = "local c = t:cpu()",
      see = { "t:cuda", "t:to" } },
    { "t:cuda", "t:cuda([device] [, {non_blocking=}])",
      "t on a CUDA device: the current one, a number N or a name \"cuda:N\". An error without CUDA.",
      opts = "non_blocking=false (from pinned memory, the copy runs asynchronously)",
      ex = "if lt.cuda.is_available() then local g = t:cuda() end", see = { "t:to", "t:pin_memory" } },
  },
}
