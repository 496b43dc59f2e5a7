-- lt.help: gradient checkpointing and micro-batches (lua/lt/checkpoint.lua,
-- lua/lt/nn/checkpoint.lua, lua/lt/microbatch.lua).
return {
  title = "Checkpointing and micro-batches",
  intro = "Trading compute for memory: checkpointed code keeps none of its activations (they are "
    .. "recomputed during backward), and micro-batches split a step so that only a slice's activations "
    .. "live at once, with the same gradients.",
  entries = {
    { "lt.checkpoint", "lt.checkpoint(fn, ...)",
      "fn(...)'s results with fn's activations recomputed at backward instead of kept "
        .. "(torch.utils.checkpoint, non-reentrant): the forward runs fn without recording and keeps only "
        .. "its tensor arguments, the RNG and the autocast state. fn is a function or a module; its "
        .. "parameters still get gradients. Batch norm does not update its statistics twice.",
      ex = "local out = lt.checkpoint(model, x); out:sum():backward()", see = { "nn.checkpoint_sequential" } },
    { "nn.checkpoint_sequential", "nn.checkpoint_sequential(seq, segments, x)",
      "Runs an nn.Sequential (or a list of modules and functions) in segments, each but the last under "
        .. "lt.checkpoint, as torch.utils.checkpoint.checkpoint_sequential: segment size n // segments.",
      ex = "local out = nn.checkpoint_sequential(model, 2, x)" },
    { "lt.microbatch", "lt.microbatch(fn, inputs, {chunks=1 | \"auto\", params=, key=, scaler=}) -> loss, chunks",
      "One step's forward and backward over slices of the batch with the full batch's gradients: "
        .. "fn(slice_1, ..., slice_m) gets the same rows of each tensor of inputs (split along dimension 1) "
        .. "and returns that slice's mean loss; each is weighted by its share of the batch before its "
        .. "backward. Returns the full batch's loss (no graph) and the number of chunks. chunks=\"auto\" "
        .. "starts whole and doubles the count on out of memory (params needed: the gradients it puts back), "
        .. "remembering what worked for key.",
      opts = "chunks=1 (a positive integer, or \"auto\"), params (a list or a module; needed with \"auto\"), "
        .. "key=fn, scaler (a GradScaler: each weighted loss goes through scaler:scale)",
      ex = "local loss, k = lt.microbatch(function(xb, yb) return F.cross_entropy(model(xb), yb) end, {x, y}, {chunks = 2})",
      see = { "lt.memory.estimate" } },
  },
}
