-- lt.help: files and the random generator (bindings/io.c, bindings/core.c).
return {
  title = "Files and random state",
  intro = "Tensors are saved as safetensors files, which PyTorch's safetensors reads and writes, and "
    .. "which state_dict names make interchangeable with PyTorch checkpoints. lt's random numbers come "
    .. "from one Philox generator whose state is a string.",
  entries = {
    { "lt.save", "lt.save(path, {name = tensor, ...}, {metadata = {key = value}})",
      "Writes the tensors to a safetensors file (copied to the CPU, views as contiguous data in their own "
        .. "dtype). metadata values are strings or numbers (they come back as strings). The file is "
        .. "replaced atomically: it is always the old or the new complete file.",
      opts = "metadata (none)", ex = "lt.save(\"net.safetensors\", model:state_dict(), {metadata = {epoch = 3}})",
      run = "writes a file", see = { "lt.load", "m:state_dict" } },
    { "lt.load", "lt.load(path) -> tensors, metadata",
      "Reads a safetensors file: a table of tensors by name (on the CPU) and a table of its metadata strings.",
      ex = "local sd, meta = lt.load(\"net.safetensors\"); model:load_state_dict(sd)", run = "reads a file",
      see = { "m:load_state_dict" } },
    { "lt.manual_seed", "lt.manual_seed(n)",
      "Seeds lt's generator (lt.rand, randn, randint, randperm, multinomial, dropout, shuffling): the same "
        .. "seed gives the same numbers again.",
      ex = "lt.manual_seed(42)", see = { "lt.get_rng_state" } },
    { "lt.get_rng_state", "lt.get_rng_state() -> string",
      "The generator's state as a string (\"philox:<seed>:<offset>\"), for a checkpoint's metadata.",
      ex = "local state = lt.get_rng_state(); local a = lt.rand(2); lt.set_rng_state(state)",
      see = { "lt.set_rng_state" } },
    { "lt.set_rng_state", "lt.set_rng_state(state)", "Restores a state from lt.get_rng_state().",
      ex = "lt.set_rng_state(lt.get_rng_state())" },
  },
}
