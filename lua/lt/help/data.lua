-- lt.help: data sets and loading (lua/lt/data.lua, lua/lt/data/, lua/lt/data_prefetch.lua, bindings/io.c,
-- bindings/data_io.c).
return {
  title = "Data",
  intro = "Data sets as tensors and a loader that cuts them into (shuffled) batches along dimension 1. "
    .. "Class labels are 1-based.",
  entries = {
    { "lt.data", "lt.data", "lt.data.DataLoader and its datasets: tensors, the Dataset protocol (#dataset "
        .. "and dataset:get(i)), lt.data.ImageFolder, CSV tables, MNIST, Fashion-MNIST and CIFAR-10 files, "
        .. "and the image transforms of lt.data.transforms.",
      ex = "local loader = lt.data.DataLoader({x, y}, {batch_size = 4, shuffle = true, seed = 1})",
      members = "lt.data." },
    { "lt.data.fashion_mnist", "lt.data.fashion_mnist(split=\"train\", {dir=})",
      "The Fashion-MNIST images (Xiao, Rasul and Vollgraf, 2017), split \"train\" (60000) or \"test\" (10000): the "
        .. "images, uint8 [N, 1, 28, 28], and the labels, int64 in 1..10. Read from Debian's "
        .. "dataset-fashion-mnist package unless dir says where the gzip files are.",
      opts = "dir=\"/usr/share/datasets/fashion-mnist\"",
      ex = "local images, labels = lt.data.fashion_mnist(\"test\")", run = "reads 10000 images from disk" },
    { "lt.data.DataLoader", "lt.data.DataLoader(dataset, {batch_size=1, shuffle=false, seed=, drop_last=false, pin_memory=false, collate=, num_workers=0, prefetch_factor=2, sampler=, distributed=false}) / lt.data.DataLoader{dataset=, ...}",
      "Batches of a data set: a tensor, a list of tensors sharing their first size ({images, labels}: "
        .. "each step yields one batch of each), or a table of named tensors (each step yields a table); "
        .. "each batch is a new tensor gathered along dimension 1. Or a Dataset: any table or userdata with "
        .. "a length (#dataset, its metatable's __len, as PyTorch's __len__) and get(i) returning sample i "
        .. "(1-based, as PyTorch's __getitem__); each batch is then collate(samples, indices) "
        .. "(lt.data.default_collate unless given), and a batch that is a list {x, y} comes out as several "
        .. "values. With num_workers > 0, a dataset with a prefetch(indices, num_workers) method is told the "
        .. "indices of the next prefetch_factor batches before each batch is gathered, so it can load them in "
        .. "the background (lt.data.ImageFolder decodes them on C threads). Shuffled orders come from lt's "
        .. "generator; with seed, epoch k's order depends only on (seed, k). drop_last drops a last, smaller "
        .. "batch. #loader is the number of batches in an epoch. pin_memory puts batches in page-locked memory "
        .. "for non_blocking copies. sampler (a lt.data.DistributedSampler) orders the samples instead of "
        .. "shuffle, driven by the loader's epochs; distributed=true makes one over the process group (with "
        .. "shuffle and seed, default 0): each rank iterates its share of every epoch.",
      opts = "batch_size=1, shuffle=false, seed (none: the global generator), drop_last=false, pin_memory=false, "
        .. "collate=lt.data.default_collate, num_workers=0, prefetch_factor=2, sampler=, distributed=false",
      ex = "for xb, yb in lt.data.DataLoader({x, y}, {batch_size = 4, shuffle = true}):iter() do local l = F.cross_entropy(model(xb), yb) end",
      members = "loader:", see = { "lt.data.prefetch", "lt.data.default_collate", "lt.data.ImageFolder" } },
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
    { "lt.data.default_collate", "lt.data.default_collate(samples) -> batch",
      "A batch from a list of samples, as PyTorch's default_collate: tensors of one shape stacked along a new "
        .. "dimension 1, numbers as a tensor (int64 when all are integers, else float32), booleans as a bool "
        .. "tensor, strings as a list, and lists and named tables field by field. Samples that do not fit "
        .. "together are an error naming both by their dataset index.",
      ex = "local batch = lt.data.default_collate({{x = lt.ones(2), y = 1}, {x = lt.zeros(2), y = 2}})" },
    { "lt.data.mnist", "lt.data.mnist(dir, split=\"train\")",
      "MNIST from dir, which holds the IDX files as distributed (train-images-idx3-ubyte, "
        .. "train-labels-idx1-ubyte, t10k-..., each plain or .gz): split \"train\" or \"test\". Returns the images, "
        .. "uint8 [N, 1, 28, 28], and the labels, int64 in 1..10 (the digit plus one).",
      ex = "local images, labels = lt.data.mnist(\"data/mnist\", \"test\")", run = "reads files" },
    { "lt.data.cifar10", "lt.data.cifar10(dir, split=\"train\") -> images, labels, classes",
      "CIFAR-10's binary version from dir (cifar-10-batches-bin): \"train\" reads data_batch_1.bin to "
        .. "data_batch_5.bin, \"test\" test_batch.bin, each record 1 label byte and 3072 pixel bytes. Returns the "
        .. "images, uint8 [N, 3, 32, 32], the labels, int64 in 1..10, and the ten class names. A file that is not "
        .. "a whole number of 3073-byte records is an error naming it and its byte count.",
      ex = "local images, labels, classes = lt.data.cifar10(\"data/cifar-10-batches-bin\", \"test\")", run = "reads files" },
    { "lt.data.csv", "lt.data.csv(path, {header=true, label=, delimiter=\",\", dtype=\"float32\"}) -> features, labels, classes, columns",
      "A CSV table of numbers: features [N, F] (dtype) from every column but the label one. label names the "
        .. "label column (header name or 1-based index): text there gives int64 labels 1..C, class k being the "
        .. "k-th of the sorted distinct names, listed in classes; numbers give their values (int64 when all are "
        .. "integers, else dtype). Without label, labels is nil. columns: the features' header names. Quoted "
        .. "cells, CRLF and blank lines are read; errors name the file, line and column.",
      opts = "header=true, label (none), delimiter=\",\", dtype=\"float32\" (or \"float64\")",
      ex = "local features, labels, classes = lt.data.csv(\"iris.csv\", {label = \"species\"})", run = "reads a file" },
    { "lt.data.ImageFolder", "lt.data.ImageFolder(root, {transform=, target_transform=, channels=3})",
      "PNG and JPEG images in one sub-folder per class (torchvision's ImageFolder), a Dataset for "
        .. "lt.data.DataLoader: classes are the sorted sub-folder names (dataset.classes, dataset.class_to_idx), "
        .. "labels 1..C, dataset:get(i) returns {image, label} with image the decoded uint8 [H, W, C] after "
        .. "transform. Decoding uses Debian's libstb. With DataLoader{num_workers = n}, the files of the next "
        .. "batches are read, decoded and (for a transform that starts with Resize) resized on n C threads while "
        .. "Lua computes; the rest of the transform runs on the Lua thread in get order, so random transforms "
        .. "give the same batches with any num_workers. dataset:stats() counts what the threads did, "
        .. "dataset:close() joins them.",
      opts = "transform (a transform or function of the image), target_transform, channels=3 (1: gray, 4: RGBA)",
      ex = "local train = lt.data.ImageFolder(\"data/train\", {transform = lt.data.transforms.ToTensor()})",
      run = "reads a folder", types = { "lt.data.ImageFolder" }, see = { "lt.data.transforms" } },
    { "lt.data.transforms", "lt.data.transforms",
      "torchvision's common image transforms as callable objects. A uint8 tensor is an image as decoded, "
        .. "[H, W, C]; a floating one is [C, H, W] (what ToTensor makes); [H, W] either way. Random ones draw "
        .. "from lt's generator when called (lt.manual_seed reproduces them).",
      ex = "local T = lt.data.transforms; local t = T.Compose{T.RandomCrop(28, {padding = 2}), T.ToTensor()}",
      members = "lt.data.transforms." },
    { "lt.data.transforms.Resize", "lt.data.transforms.Resize(size)",
      "Bilinear resampling to size {h, w}, or so that the shorter side is size (an integer) and the aspect "
        .. "ratio is kept, as torchvision's Resize; without antialiasing (F.interpolate's bilinear, "
        .. "align_corners=false); uint8 rounds to nearest.",
      ex = "local small = lt.data.transforms.Resize(16)(lt.zeros(32, 48, 3, {dtype = \"uint8\"}))" },
    { "lt.data.transforms.RandomCrop", "lt.data.transforms.RandomCrop(size, {padding=0, fill=0, pad_if_needed=false})",
      "A size (n x n or {h, w}) window at a random position of the image padded by padding (n, "
        .. "{left/right, top/bottom} or {left, top, right, bottom}) with fill, as torchvision's RandomCrop.",
      opts = "padding=0, fill=0, pad_if_needed=false",
      ex = "local crop = lt.data.transforms.RandomCrop(28, {padding = 4})(lt.rand(1, 28, 28))" },
    { "lt.data.transforms.RandomHorizontalFlip", "lt.data.transforms.RandomHorizontalFlip(p=0.5)",
      "The image mirrored left to right with probability p.",
      ex = "local maybe = lt.data.transforms.RandomHorizontalFlip()(lt.rand(3, 8, 8))" },
    { "lt.data.transforms.Normalize", "lt.data.transforms.Normalize(mean, std)",
      "(image - mean[c]) / std[c] per channel of a floating [C, H, W] image (one number: every channel), as "
        .. "torchvision's Normalize.",
      ex = "local n = lt.data.transforms.Normalize({0.5, 0.5, 0.5}, {0.25, 0.25, 0.25})(lt.rand(3, 8, 8))" },
    { "lt.data.transforms.ToTensor", "lt.data.transforms.ToTensor()",
      "A uint8 [H, W, C] (or [H, W]) image as float32 [C, H, W] divided by 255, as torchvision's ToTensor.",
      ex = "local t = lt.data.transforms.ToTensor()(lt.zeros(8, 8, 3, {dtype = \"uint8\"}))" },
    { "lt.data.transforms.ToFloat", "lt.data.transforms.ToFloat()",
      "A uint8 tensor of any layout as float32 divided by 255 (floating ones unchanged), as torchvision's "
        .. "ToDtype(float32, scale=True): for [C, H, W] uint8 images such as CIFAR-10's.",
      ex = "local t = lt.data.transforms.ToFloat()(lt.zeros(3, 32, 32, {dtype = \"uint8\"}))" },
    { "lt.data.transforms.Compose", "lt.data.transforms.Compose{t1, t2, ...}",
      "The transforms applied in order (each a transform or any function of one image).",
      ex = "local T = lt.data.transforms; local t = T.Compose{T.ToTensor(), T.Normalize(0.5, 0.5)}" },
    { "lt.read_idx", "lt.read_idx(path)",
      "A tensor from an IDX file (the MNIST format, gzip-compressed or not): its dtype and shape are the file's.",
      ex = "local images = lt.read_idx(\"/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz\")",
      run = "reads a file" },
  },
}
