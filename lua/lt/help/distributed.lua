-- lt.help: collectives between processes (bindings/distributed.c, engine/dist/,
-- lua/lt/distributed.lua).
local NEEDS_GROUP = "needs a process group (lt.distributed.init_process_group, under mpirun for several ranks)"
local WORK = "a method of the work handle that async_op=true returns"
local ASYNC = " async_op=true returns a work handle (wait, is_completed) instead of waiting; the tensors hold "
  .. "the result after work:wait()."

return {
  title = "Distributed",
  intro = "torch.distributed's collectives between the processes mpirun starts (`mpirun -np 4 lt train.lua`, "
    .. "or `mpirun -H host1,host2 -np 4 lt train.lua` over machines; see the README): one default process "
    .. "group, ranks numbered from 0 like devices. Backend \"mpi\" moves CPU tensors with Open MPI; \"nccl\" "
    .. "moves CUDA tensors with NCCL, each rank on cuda:<its rank on the machine>, queued on the current "
    .. "stream. Collectives work in place on tensors of every dtype (bool: sum and max are \"any\", prod and "
    .. "min \"all\"); a non-contiguous tensor is staged in a contiguous copy and written back. Before any "
    .. "tensor moves, the ranks compare their calls (collective, dtype, shape, op, src): a difference is an "
    .. "error on every rank naming both ranks' values, and the group goes on (with async_op the call returns at "
    .. "once and the comparison ends later: a difference is raised by work:wait() and work:is_completed(), on "
    .. "every rank). A rank that does not arrive "
    .. "within the group's timeout is an error naming the op (the group is then broken: destroy it and init "
    .. "again). An error nobody catches in `lt script.lua` ends the whole job: the failing rank tells the "
    .. "others, which stop in their collective with \"<op>: rank R stopped because rank F failed: <its "
    .. "error>\", then MPI_Abort; a rank that dies makes mpirun end the others; a rank that leaves with "
    .. "os.exit while the others wait in a collective ends the job when their timeout passes.",
  entries = {
    { "lt.distributed", "lt.distributed",
      "The process group and its collectives (loaded on first use: a script that never uses it never starts MPI).",
      ex = "print(lt.distributed.is_available(), lt.distributed.is_initialized())", members = "lt.distributed." },
    { "lt.distributed.is_available", "lt.distributed.is_available()",
      "Whether this lt has a backend (it was built with MPI).", ex = "local can = lt.distributed.is_available()" },
    { "lt.distributed.is_mpi_available", "lt.distributed.is_mpi_available()", "Whether backend \"mpi\" is built in.",
      ex = "local mpi = lt.distributed.is_mpi_available()" },
    { "lt.distributed.is_nccl_available", "lt.distributed.is_nccl_available()",
      "Whether backend \"nccl\" is built in: CUDA builds that found NCCL's header (libnccl is opened when a "
        .. "group starts; without MPI, a world of one) and the simulated device.",
      ex = "local nccl = lt.distributed.is_nccl_available()" },
    { "lt.distributed.init_process_group", "lt.distributed.init_process_group({backend=\"mpi\", timeout=300})",
      "Makes the default process group of every rank mpirun started (not under mpirun: a world of one). The "
        .. "first call starts MPI, which is finalized at exit, so a group can be destroyed and made again. Every "
        .. "rank must call it; timeout (seconds) bounds every wait of the group's calls. With \"nccl\", each "
        .. "rank's device becomes cuda:<its rank on the machine>.",
      opts = "backend=\"mpi\" (or \"nccl\"), timeout=300",
      ex = "lt.distributed.init_process_group({backend = \"mpi\", timeout = 60})", run = NEEDS_GROUP,
      see = { "lt.distributed.destroy_process_group" } },
    { "lt.distributed.is_initialized", "lt.distributed.is_initialized()", "Whether the default group exists.",
      ex = "if not lt.distributed.is_initialized() then print(\"one process\") end" },
    { "lt.distributed.get_rank", "lt.distributed.get_rank()", "This process's rank, from 0.",
      ex = "if lt.distributed.get_rank() == 0 then print(\"rank 0 prints\") end", run = NEEDS_GROUP },
    { "lt.distributed.get_world_size", "lt.distributed.get_world_size()", "The number of ranks.",
      ex = "local n = lt.distributed.get_world_size()", run = NEEDS_GROUP },
    { "lt.distributed.get_backend", "lt.distributed.get_backend()", "\"mpi\" or \"nccl\".",
      ex = "print(lt.distributed.get_backend())", run = NEEDS_GROUP },
    { "lt.distributed.barrier", "lt.distributed.barrier()", "Waits until every rank has called it (within the timeout).",
      ex = "lt.distributed.barrier()", run = NEEDS_GROUP },
    { "lt.distributed.destroy_process_group", "lt.distributed.destroy_process_group()",
      "Ends the default group after the work still in flight (MPI stays up for the next init_process_group).",
      ex = "lt.distributed.destroy_process_group()", run = NEEDS_GROUP },
    { "lt.distributed.all_reduce", "lt.distributed.all_reduce(t, {op=\"sum\", async_op=false}) -> nil | work",
      "In place: t becomes the reduction of every rank's t. op: \"sum\", \"avg\" (floating point only), \"max\", "
        .. "\"min\" or \"prod\"; float16 and bfloat16 round after each step, as NCCL's." .. ASYNC,
      opts = "op=\"sum\", async_op=false",
      ex = "local g = lt.ones(3)\nlt.distributed.all_reduce(g, {op = \"avg\"})", run = NEEDS_GROUP,
      see = { "lt.distributed.ReduceOp" } },
    { "lt.distributed.broadcast", "lt.distributed.broadcast(t, {src=0, async_op=false}) -> nil | work",
      "In place: every rank's t becomes rank src's." .. ASYNC, opts = "src=0, async_op=false",
      ex = "lt.distributed.broadcast(m.weight, {src = 0})", run = NEEDS_GROUP },
    { "lt.distributed.all_gather", "lt.distributed.all_gather(list, t, {async_op=false}) -> nil | work",
      "list (one tensor per rank, each of t's shape and dtype) gets every rank's t: list[r + 1] is rank r's."
        .. ASYNC, opts = "async_op=false",
      ex = "local parts = {}\nfor i = 1, lt.distributed.get_world_size() do parts[i] = lt.empty(3) end\n"
        .. "lt.distributed.all_gather(parts, lt.ones(3))", run = NEEDS_GROUP },
    { "lt.distributed.reduce_scatter", "lt.distributed.reduce_scatter(out, list, {op=\"sum\", async_op=false}) -> nil | work",
      "out becomes the reduction over the ranks of their list[rank + 1] (list: one tensor per rank, each of "
        .. "out's shape and dtype)." .. ASYNC, opts = "op=\"sum\", async_op=false",
      ex = "local ins = {}\nfor i = 1, lt.distributed.get_world_size() do ins[i] = lt.ones(3) end\n"
        .. "local out = lt.empty(3)\nlt.distributed.reduce_scatter(out, ins)", run = NEEDS_GROUP },
    { "lt.distributed.all_to_all", "lt.distributed.all_to_all(outs, ins, {async_op=false}) -> nil | work",
      "outs[r + 1] becomes rank r's ins[this rank + 1] (both lists one tensor per rank, all of one shape and "
        .. "dtype)." .. ASYNC, opts = "async_op=false",
      ex = "local n, ins, outs = lt.distributed.get_world_size(), {}, {}\n"
        .. "for i = 1, n do ins[i], outs[i] = lt.full({2}, i), lt.empty(2) end\nlt.distributed.all_to_all(outs, ins)",
      run = NEEDS_GROUP },
    { "lt.distributed.ReduceOp", "lt.distributed.ReduceOp",
      "torch.distributed.ReduceOp's names for the op strings: SUM, AVG, MAX, MIN, PRODUCT.",
      ex = "local op = lt.distributed.ReduceOp.SUM  -- \"sum\"" },
    { "work:wait", virtual = WORK, "work:wait() -> true",
      "Waits (within the group's timeout, counted from the call) until the collective is done and its "
        .. "results are in the tensors; with nccl, until the device has run it. Raises the error of a call the "
        .. "ranks disagreed on (the collective was skipped on every rank).",
      ex = "local work = lt.distributed.all_reduce(lt.ones(3), {async_op = true})\nwork:wait()", run = NEEDS_GROUP,
      types = { "lt.distributed.Work" } },
    { "work:is_completed", virtual = WORK, "work:is_completed() -> done",
      "Whether the collective is done, without waiting (MPI moves the data only inside its calls: this one, "
        .. "wait, the next collective; each starts the async collectives whose call the ranks have agreed on, "
        .. "in call order). Raises as wait does: a disagreement, or the timeout passed.",
      ex = "local work = lt.distributed.all_reduce(lt.ones(3), {async_op = true})\n"
        .. "while not work:is_completed() do end", run = NEEDS_GROUP },
  },
}
