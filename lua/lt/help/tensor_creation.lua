-- lt.help: creating tensors (bindings/tensor_create.c, lua/lt/tensor_extras.lua).
local CREATE = "dtype=\"float32\", device=\"cpu\" (also under `lt --device cuda`, as in PyTorch), requires_grad=false"

return {
  title = "Creating tensors",
  intro = "Sizes come as varargs or as one table, then an optional options table {dtype=, device=, "
    .. "requires_grad=}: lt.zeros(2, 3), lt.zeros({2, 3}), lt.zeros(2, 3, {dtype = \"float64\"}). "
    .. "dtypes are the strings float32, float64, float16, bfloat16, int64, int32, uint8 and bool; "
    .. "devices \"cpu\", \"cuda\" and \"cuda:N\" (0-based, as PyTorch's).",
  entries = {
    { "lt.tensor", "lt.tensor(data, {dtype=, device=, requires_grad=})",
      "A new tensor holding data: a number, a boolean, nested tables of them (their shape is the nesting), "
        .. "or a tensor (copied). Lua integers give int64, floats float32 (any float in the data makes it "
        .. "float32), booleans bool; dtype converts. Ragged tables and stray keys are errors naming the place.",
      opts = "dtype (from the values), device=\"cpu\", requires_grad=false (a floating dtype is needed for true)",
      ex = "local w = lt.tensor({{1, 2}, {3, 4}}, {dtype = \"float32\", requires_grad = true})",
      see = { "t:totable", "t:item" } },
    { "lt.zeros", "lt.zeros(size..., {dtype=, device=, requires_grad=})",
      "A tensor filled with 0, float32 unless dtype says otherwise.",
      opts = CREATE, ex = "local z = lt.zeros(2, 3, {dtype = \"int64\"})",
      see = { "lt.zeros_like", "t:new_zeros", "t:zero_" } },
    { "lt.ones", "lt.ones(size..., {dtype=, device=, requires_grad=})",
      "A tensor filled with 1, float32 unless dtype says otherwise.",
      opts = CREATE, ex = "local o = lt.ones({2, 3})", see = { "lt.ones_like", "t:new_ones" } },
    { "lt.empty", "lt.empty(size..., {dtype=, device=, requires_grad=})",
      "A tensor whose values are whatever its memory held: the cheapest way to get a buffer you fill "
        .. "yourself (as torch.empty).",
      opts = CREATE, ex = "local buf = lt.empty(1024):fill_(0.5)", see = { "lt.empty_like", "t:new_empty" } },
    { "lt.full", "lt.full(sizes, value, {dtype=, device=, requires_grad=})",
      "A tensor of the given sizes (a table or one integer) filled with value. The dtype follows the "
        .. "value: an integer gives int64, a float float32, a boolean bool.",
      opts = "dtype (from value), device=\"cpu\", requires_grad=false",
      ex = "local sevens = lt.full({2, 2}, 7)", see = { "lt.full_like", "t:new_full", "t:fill_" } },
    { "lt.rand", "lt.rand(size..., {dtype=, device=, requires_grad=})",
      "Samples of the uniform distribution on [0, 1), from lt's generator (lt.manual_seed). "
        .. "The dtype must be floating.",
      opts = CREATE, ex = "local u = lt.rand(2, 3)", see = { "lt.rand_like", "t:uniform_", "lt.manual_seed" } },
    { "lt.randn", "lt.randn(size..., {dtype=, device=, requires_grad=})",
      "Samples of the standard normal distribution N(0, 1), from lt's generator (lt.manual_seed). "
        .. "The dtype must be floating.",
      opts = CREATE, ex = "local w = lt.randn(3, 4, {requires_grad = true})",
      see = { "lt.randn_like", "t:normal_", "lt.manual_seed" } },
    { "lt.randint", "lt.randint(low, high, size..., {dtype=, device=, requires_grad=})",
      "Random integers from low to high, both included (as Lua's math.random(low, high); PyTorch's "
        .. "high is excluded), int64 unless dtype says otherwise.",
      opts = "dtype=\"int64\", device=\"cpu\", requires_grad=false",
      ex = "local labels = lt.randint(1, 10, {8})", see = { "lt.randperm", "lt.multinomial" } },
    { "lt.randperm", "lt.randperm(n, {seed=})",
      "The integers 1..n in random order (int64). With seed, from a private generator seeded so (the "
        .. "global one is untouched): the same seed, the same order.",
      opts = "seed (none: lt's global generator)", ex = "local order = lt.randperm(10, {seed = 1})",
      see = { "lt.data.DataLoader" } },
    { "lt.arange", "lt.arange(end) / lt.arange(start, end, step=1) + {dtype=, device=, requires_grad=}",
      "start, start + step, ... up to but excluding end, as torch.arange (the values, not positions: "
        .. "arange(3) is 0, 1, 2). Integer arguments give int64, any float float32.",
      opts = "dtype (from the arguments), device=\"cpu\", requires_grad=false",
      ex = "local steps = lt.arange(0, 1, 0.25)" },
    { "lt.zeros_like", "lt.zeros_like(t, {dtype=, device=, requires_grad=})",
      "A tensor of zeros with t's shape, and t's dtype and device unless the options say otherwise.",
      opts = "dtype=t.dtype, device=t.device, requires_grad=false",
      ex = "local z = lt.zeros_like(t)",
      aliases = { "lt.ones_like", "lt.empty_like", "lt.rand_like", "lt.randn_like" },
      see = { "lt.full_like" } },
    { "lt.full_like", "lt.full_like(t, value, {dtype=, device=, requires_grad=})",
      "A tensor with t's shape filled with value, in t's dtype and on t's device unless the options say "
        .. "otherwise.",
      opts = "dtype=t.dtype, device=t.device, requires_grad=false", ex = "local m1 = lt.full_like(t, -1)" },
    { "t:new_zeros", "t:new_zeros(size..., {dtype=, device=, requires_grad=})",
      "A new tensor of the given sizes (not t's) filled with 0, in t's dtype and on t's device unless the "
        .. "options say otherwise (PyTorch's x.new_zeros). t:new_ones and t:new_empty likewise.",
      opts = "dtype=t.dtype, device=t.device, requires_grad=false",
      ex = "local z = t:new_zeros(2, 2)", aliases = { "t:new_ones", "t:new_empty" } },
    { "t:new_full", "t:new_full(sizes, value, {dtype=, device=, requires_grad=})",
      "A new tensor of the given sizes filled with value, in t's dtype and on t's device unless the options "
        .. "say otherwise (PyTorch's x.new_full).",
      opts = "dtype=t.dtype, device=t.device, requires_grad=false", ex = "local f = t:new_full({2}, 3.5)" },
    { "lt.is_tensor", "lt.is_tensor(v)", "Whether v is an lt tensor (a freed one included).",
      ex = "assert(lt.is_tensor(t) and not lt.is_tensor({}))" },
    { "lt.float32", "lt.float32, lt.float64, lt.float16, lt.bfloat16, lt.int64, lt.int32, lt.uint8, lt.bool",
      "The dtype names as constants, as torch.float32 and friends: each is its own name as a string, so "
        .. "lt.float32 == \"float32\". Also the aliases lt.float (float32), lt.double (float64), lt.half "
        .. "(float16), lt.long (int64) and lt.int (int32).",
      ex = "local h = lt.zeros(2, {dtype = lt.half})",
      aliases = { "lt.float64", "lt.float16", "lt.bfloat16", "lt.int64", "lt.int32", "lt.uint8", "lt.bool",
        "lt.float", "lt.double", "lt.half", "lt.long", "lt.int" } },
    { "lt.finfo", "lt.finfo(dtype | t)",
      "PyTorch's torch.finfo figures of a floating dtype (float32 by default; a tensor gives its own): "
        .. "a table with dtype, bits, eps, max, min, tiny (= smallest_normal) and resolution.",
      ex = "local eps = lt.finfo(\"float16\").eps", see = { "lt.iinfo" } },
    { "lt.iinfo", "lt.iinfo(dtype | t)",
      "PyTorch's torch.iinfo figures of an integer dtype (int64, int32, uint8; a tensor gives its own): "
        .. "a table with dtype, bits, min and max.",
      ex = "local top = lt.iinfo(\"int32\").max", see = { "lt.finfo" } },
  },
}
