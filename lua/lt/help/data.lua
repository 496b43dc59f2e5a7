-- lt.help: data sets and loading (lua/lt/data.lua, lua/lt/data_prefetch.lua, bindings/io.c).
return {
  title = "Data",
  intro = "Data sets as tensors and a loader that cuts them into (shuffled) batches along dimension 1. "
    .. "Class labels are 1-based.",
  entries = {
    { "lt.data", "lt.data", "lt.data.fashion_mnist, lt.data.DataLoader and lt.data.prefetch.",
      ex = "local loader = lt.data.DataLoader({x, y}, {batch_size = 4, shuffle = true, seed = 1})",
      members = "lt.data." },
    { "lt.data.fashion_mnist", "lt.data.fashion_mnist(split=\"train\", {dir=})",
      "The Fashion-MNIST images (Xiao, Rasul and Vollgraf, 2017), split \"train\" (60000) or \"test\" (10000): the "
        .. "images, uint8 [N, 1, 28, 28], and the labels, int64 in 1..10. Read from Debian's "
        .. "dataset-fashion-mnist package unless dir says where the gzip files are.",
      opts = "dir=\"/usr/share/datasets/fashion-mnist\"",
      ex = "local images, labels = lt.data.fashion_mnist(\"test\")", run = "reads 10000 images from disk" },
    { "lt.data.DataLoader",
      "lt.data.DataLoader(dataset, {batch_size=1, shuffle=false, seed=, drop_last=false, "
        .. "pin_memory=false}) / lt.data.DataLoader{dataset=, ...}",
      "Batches of a data set: a tensor, a list of tensors sharing their first size ({images, labels}: "
        .. "each step yields one batch of each), or a table of named tensors (each step yields a table). "
        .. "Each batch is a new tensor gathered along dimension 1. Shuffled orders come from lt's "
        .. "generator; with seed, epoch k's order depends only on (seed, k). #loader is the number of "
        .. "batches in an epoch. pin_memory puts batches in page-locked memory for non_blocking copies.",
      opts = "batch_size=1, shuffle=false, seed (none: the global generator), drop_last=false, pin_memory=false",
      ex = "for xb, yb in lt.data.DataLoader({x, y}, {batch_size = 4, shuffle = true}):iter() do local l = F.cross_entropy(model(xb), yb) end",
      members = "loader:", see = { "lt.data.prefetch" } },
    { "loader:iter", "loader:iter() -> iterator",
      "Iterates the next epoch (the first call epoch 1, then 2, ...): for xb, yb in loader:iter() do ... end.",
      ex = "local loader = lt.data.DataLoader({x, y}, {batch_size = 4}); for xb, yb in loader:iter() do end" },
    { "loader:epoch", "loader:epoch(k) -> iterator", "loader:set_epoch(k) then loader:iter().",
      ex = "local loader = lt.data.DataLoader({x, y}, {batch_size = 4}); for xb, yb in loader:epoch(3) do end" },
    { "loader:set_epoch", "loader:set_epoch(k)",
      "Makes the next iter() epoch k (1-based), to resume a run with the order an uninterrupted one would see.",
      ex = "lt.data.DataLoader({x, y}, {shuffle = true, seed = 7}):set_epoch(5)" },
    { "loader:order", "loader:order(k) -> int64 tensor", "The order of the samples in epoch k: indices 1..size.",
      ex = "local order = lt.data.DataLoader({x, y}, {shuffle = true, seed = 7}):order(1)" },
    { "lt.data.prefetch", "lt.data.prefetch(batches, device=\"cpu\")",
      "The batches of an iterator (loader:iter()) on device, the next batch's copy overlapping the current "
        .. "step on CUDA (a side stream, non_blocking copies from pinned memory, record_stream). On the "
        .. "CPU the batches pass through unchanged.",
      ex = "for xb, yb in lt.data.prefetch(lt.data.DataLoader({x, y}, {batch_size = 4}):iter(), \"cpu\") do end" },
    { "lt.read_idx", "lt.read_idx(path)",
      "A tensor from an IDX file (the MNIST format, gzip-compressed or not): its dtype and shape are the file's.",
      ex = "local images = lt.read_idx(\"/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz\")",
      run = "reads a file" },
  },
}
