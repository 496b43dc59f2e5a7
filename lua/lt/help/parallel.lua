-- lt.help: data-parallel training (lua/lt/nn/parallel.lua, lua/lt/optim/zero.lua,
-- lua/lt/data/distributed_sampler.lua, lua/lt/grad_hooks.lua, lua/lt/recipes/distributed.lua).
local NEEDS_GROUP = "needs a process group of several ranks (lt.distributed.init_process_group under mpirun)"

return {
  title = "Data-parallel training",
  intro = "One process per rank (`mpirun -np N lt train.lua`), each with a replica of the model: "
    .. "DistributedDataParallel averages the gradients during backward, DistributedSampler gives each rank its "
    .. "share of every epoch, ZeroRedundancyOptimizer shards the optimizer state. The recipes take --ddp and "
    .. "--zero (scripts/train_fashion_cnn.lua).",
  entries = {
    { "nn.parallel", "lt.nn.parallel", "nn.parallel.DistributedDataParallel.",
      ex = "local DDP = nn.parallel.DistributedDataParallel", members = "nn.parallel." },
    { "nn.parallel.DistributedDataParallel",
      "nn.parallel.DistributedDataParallel(model, {bucket_cap_mb=25, broadcast_buffers=true, "
        .. "find_unused_parameters=false, process_group=})",
      "A module wrapping model (ddp.module; forward delegates; state_dict names start with \"module.\", as "
        .. "PyTorch's). At wrap time every rank's parameter shapes are compared (an error on every rank names the "
        .. "first parameter that differs and both shapes) and rank 0's parameters and buffers are broadcast. "
        .. "The parameters that require grad are grouped in buckets in reverse order (the first bucket capped at "
        .. "1 MiB, the others at bucket_cap_mb); when the last gradient of a bucket is accumulated "
        .. "(t:register_post_accumulate_grad_hook) an asynchronous all_reduce (avg) of the bucket's flat "
        .. "buffer starts, while backward goes on; each .grad is a view of its bucket's buffer (PyTorch's "
        .. "gradient_as_bucket_view: a gradient made anew after zero_grad is copied in once). The hook that "
        .. "launches the last bucket waits for all of them, so when loss:backward() returns every rank holds "
        .. "the averaged gradients and any optimizer steps as usual. Buffers are broadcast from rank 0 at "
        .. "each forward (broadcast_buffers). A parameter that gets no gradient in a backward stops its "
        .. "bucket: the next forward raises an error naming it, unless find_unused_parameters=true (then each "
        .. "forward walks the graph from its outputs and marks the parameters it does not reach ready; a "
        .. "parameter unused on every rank keeps no gradient, as in PyTorch). process_group: a table with "
        .. "lt.distributed's functions (the default).",
      opts = "bucket_cap_mb=25, broadcast_buffers=true, find_unused_parameters=false, process_group=lt.distributed",
      ex = "lt.distributed.init_process_group()\nlocal ddp = nn.parallel.DistributedDataParallel(model)\n"
        .. "F.cross_entropy(ddp(x), y):backward()  -- the gradients are averaged over the ranks\nopt:step()",
      run = NEEDS_GROUP, members = "ddp:", see = { "m:no_sync", "lt.data.DistributedSampler" } },
    { "m:no_sync", "ddp:no_sync([fn]) -> guard | fn's results",
      "Gradient accumulation without communication: forwards inside `local g <close> = ddp:no_sync()` (or "
        .. "inside fn) skip the all-reduce in their backward, the gradients add up locally, and the next "
        .. "synchronised backward averages the sum.",
      ex = "do\n  local g <close> = ddp:no_sync()\n  F.cross_entropy(ddp(x1), y1):backward()\nend\n"
        .. "F.cross_entropy(ddp(x2), y2):backward()  -- averages both micro-batches' gradients",
      run = NEEDS_GROUP },
    { "m:bucket_names", "ddp:bucket_names() -> {{name, ...}, ...}",
      "The buckets, in the order they are reduced, as lists of parameter names (the model's).",
      ex = "for i, b in ipairs(ddp:bucket_names()) do print(i, table.concat(b, \" \")) end", run = NEEDS_GROUP },
    { "m:remove_hooks", "ddp:remove_hooks()",
      "Removes the gradient hooks: the model no longer communicates in backward.",
      ex = "ddp:remove_hooks()", run = NEEDS_GROUP },
    { "lt.data.DistributedSampler",
      "lt.data.DistributedSampler(dataset, {num_replicas=, rank=, shuffle=true, seed=0, drop_last=false})",
      "One rank's share of each epoch, by PyTorch's rule: the epoch's order (with shuffle, the one "
        .. "DataLoader{shuffle=true, seed=seed} gives in that epoch, so the ranks together see the "
        .. "single-process order interleaved) padded by repeating its start to a multiple of num_replicas (or "
        .. "cut down with drop_last); rank r (0-based) takes positions r+1, r+1+num_replicas, ... "
        .. "num_replicas and rank default to the process group's; every rank must use the same seed. "
        .. "dataset: a size, a tensor, a table of tensors or anything with #dataset. #sampler is the number "
        .. "of indices per rank. Give it to DataLoader{sampler=}, or use DataLoader{distributed=true}.",
      opts = "num_replicas=world size, rank=this rank, shuffle=true, seed=0, drop_last=false",
      ex = "local s = lt.data.DistributedSampler(10, {num_replicas = 3, rank = 1, shuffle = false})\n"
        .. "print(table.concat(s:indices(), \" \"))  -- 2 5 8 1",
      members = "sampler:", see = { "lt.data.DataLoader" } },
    { "sampler:indices", "sampler:indices([epoch]) -> {i, ...}",
      "This rank's 1-based indices for epoch (default: the one set_epoch set, 1 at first).",
      ex = "local s = lt.data.DistributedSampler(8, {num_replicas = 2, rank = 0, seed = 1})\n"
        .. "local first = s:indices(1)" },
    { "sampler:set_epoch", "sampler:set_epoch(epoch)",
      "The epoch indices() and iter() use (PyTorch's set_epoch: call it at each epoch's start; a "
        .. "DataLoader with this sampler passes its own epoch instead).",
      ex = "local s = lt.data.DistributedSampler(8, {num_replicas = 2, rank = 0})\ns:set_epoch(3)" },
    { "sampler:iter", "sampler:iter() -> iterator",
      "`for i in sampler:iter() do`: the indices of the current epoch.",
      ex = "for i in lt.data.DistributedSampler(4, {num_replicas = 2, rank = 1}):iter() do end" },
    { "optim.ZeroRedundancyOptimizer",
      "optim.ZeroRedundancyOptimizer(params, optimizer_class, {process_group=, <optimizer_class's options>})",
      "ZeRO stage 1, as torch.distributed.optim.ZeroRedundancyOptimizer: the parameters are partitioned over "
        .. "the ranks (each group's largest first, each to the rank with the fewest elements so far), each "
        .. "rank builds optimizer_class over its shard only (so zero:state_bytes() is about 1/N of the plain "
        .. "optimizer's) and steps it, then every parameter is broadcast from its owner. The gradients must be "
        .. "the same on every rank (DistributedDataParallel). param_groups holds every parameter and the "
        .. "options, which a learning-rate schedule may change.",
      opts = "process_group=lt.distributed, and the inner optimizer's",
      ex = "local zero = optim.ZeroRedundancyOptimizer(ddp:parameters(), optim.Adam, {lr = 1e-3})",
      run = NEEDS_GROUP, members = "zero:", see = { "nn.parallel.DistributedDataParallel" } },
    { "zero:step", "zero:step([closure])",
      "closure() first when given (its result is returned), then the shard's step and the broadcast of every "
        .. "parameter from its owner.",
      ex = "zero:step()", run = NEEDS_GROUP },
    { "zero:zero_grad", "zero:zero_grad({set_to_none=true})", "Drops every parameter's gradient (not only the shard's).",
      ex = "zero:zero_grad()", run = NEEDS_GROUP },
    { "zero:state_bytes", "zero:state_bytes()", "The bytes of this rank's optimizer state: its shard's only.",
      ex = "print(zero:state_bytes())", run = NEEDS_GROUP },
    { "zero:shard", "zero:shard() -> {p, ...}", "The parameters this rank steps.",
      ex = "print(#zero:shard())", run = NEEDS_GROUP },
    { "zero:state_dict", "zero:state_dict() -> {state =, param_groups =}",
      "Collective (every rank must call it): each owner broadcasts its shard's state, and every rank returns "
        .. "the whole state in the plain optimizer's layout, so a checkpoint loads into ZeRO on any number of "
        .. "ranks, or into the plain optimizer.",
      ex = "local sd = zero:state_dict()", run = NEEDS_GROUP, see = { "zero:load_state_dict" } },
    { "zero:load_state_dict", "zero:load_state_dict(sd)",
      "Loads a state_dict() (this rank keeps its shard's entries; every group's options are taken). Not collective.",
      ex = "zero:load_state_dict(sd)", run = NEEDS_GROUP },
    { "t:register_post_accumulate_grad_hook", "t:register_post_accumulate_grad_hook(fn) -> handle",
      "fn(t) runs once per backward, after that backward's last gradient for the leaf t was added into t.grad "
        .. "(PyTorch's hook of the same name; DistributedDataParallel starts a bucket's all-reduce there). "
        .. "Hooks run in registration order, with grad mode off. An error in fn stops the backward with that "
        .. "error at the backward's line. The hook does not keep t alive. handle:remove() unregisters it.",
      ex = "local w = lt.ones(3, {requires_grad = true})\n"
        .. "local handle = w:register_post_accumulate_grad_hook(function(p) print(p.grad) end)\n"
        .. "local loss = (w * 2):sum()\nloss:backward()\nhandle:remove()",
      members = "hook:", see = { "hook:remove" } },
    { "hook:remove", "handle:remove()", "Unregisters the hook (idempotent; also from inside the hook).",
      ex = "local w = lt.ones(1, {requires_grad = true})\nw:register_post_accumulate_grad_hook(print):remove()" },
  },
}
