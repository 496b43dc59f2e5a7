-- lt.help: views and shapes (bindings/tensor_methods.c, lua/lt/tensor_ops.lua).
return {
  title = "Views and shapes",
  intro = "A view shares its storage with the tensor it came from: writing one writes the other, and "
    .. "autograd follows writes through views as PyTorch does. Sizes come as varargs or one table; "
    .. "dimensions are 1-based and -1 is the last.",
  entries = {
    { "t:view", "t:view(size...)",
      "A view of t with another shape of the same number of elements (one size may be -1: inferred). "
        .. "t must be laid out compatibly (contiguous, or strides that allow it); see t:reshape.",
      ex = "local v = t:view(2, -1)", see = { "t:reshape", "t:view_as" } },
    { "t:reshape", "t:reshape(size...)",
      "t with another shape: a view when the strides allow it, else a copy (one size may be -1).",
      ex = "local r = t:t():reshape(-1)", see = { "t:view", "t:flatten" } },
    { "t:view_as", "t:view_as(other)", "t:view(other's shape).", ex = "local v = t:view_as(lt.zeros(4, 3))" },
    { "t:expand", "t:expand(size...)",
      "A view repeating t's dimensions of size 1 to the given sizes without copying (-1 keeps a size; "
        .. "new leading dimensions may be added). Writing an expanded view is refused.",
      ex = "local e = lt.ones(3, 1):expand(3, 5)", see = { "t:expand_as" } },
    { "t:expand_as", "t:expand_as(other)", "t:expand(other's shape).",
      ex = "local e = lt.ones(1, 4):expand_as(t)" },
    { "t:transpose", "t:transpose(d1, d2)", "A view with dimensions d1 and d2 swapped.",
      ex = "local tt = t:transpose(1, 2)", see = { "t:t", "t:permute" } },
    { "t:t", "t:t()", "The transpose of a matrix (a 0-D or 1-D tensor as it is); a view.",
      ex = "local tt = t:t()" },
    { "t:permute", "t:permute(dims...)",
      "A view with the dimensions in the given order (a permutation of 1..ndim, as varargs or a table).",
      ex = "local p = lt.zeros(2, 3, 4):permute(3, 1, 2)" },
    { "t:flatten", "t:flatten(start_dim=1, end_dim=-1)",
      "Dimensions start_dim..end_dim merged into one (a view when possible): t:flatten() is 1-D, "
        .. "x:flatten(2) keeps the batch dimension.",
      ex = "local flat = lt.zeros(8, 1, 28, 28):flatten(2)", see = { "F.flatten", "nn.Flatten" } },
    { "t:unsqueeze", "t:unsqueeze(d)",
      "A view with a new dimension of size 1 at position d (1..ndim+1; -1 appends it last).",
      ex = "local col = lt.arange(3):unsqueeze(2)" },
    { "t:squeeze", "t:squeeze([d])",
      "A view without dimension d if its size is 1 (else t unchanged), or without every dimension of "
        .. "size 1 when d is not given.",
      ex = "local s = lt.zeros(1, 3, 1):squeeze()" },
    { "t:narrow", "t:narrow(d, start, length)",
      "A view of length positions of dimension d from start (1-based; negative counts from the end).",
      ex = "local middle = t:narrow(2, 2, 2)", see = { "t[i]", "t:select" } },
    { "t:select", "t:select(d, i)",
      "A view of index i of dimension d, which goes (i is 1-based, negative from the end): "
        .. "t:select(1, i) is t[i].",
      ex = "local last_col = t:select(2, -1)", see = { "t[i]", "t:narrow" } },
    { "t:split", "t:split(size | {sizes}, d=1) / lt.split(t, ...)",
      "A list of views of t along d: pieces of size rows (the last one smaller), or pieces of the listed "
        .. "sizes, which must add up to d's size.",
      ex = "local first, rest = table.unpack(t:split({1, 2}))", aliases = { "lt.split" }, see = { "t:chunk" } },
    { "t:chunk", "t:chunk(k, d=1) / lt.chunk(t, ...)",
      "At most k views of t along d, each ceil(size / k) rows (the last smaller), as torch.chunk.",
      ex = "local halves = t:chunk(2, 2)", aliases = { "lt.chunk" }, see = { "t:split" } },
  },
}
