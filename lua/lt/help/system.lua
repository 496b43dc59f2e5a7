-- lt.help: threads, printing, the process and lt.help itself (bindings/core.c,
-- bindings/system.c, lua/lt/pp.lua, lua/lt/help/).
return {
  title = "Threads, printing and the process",
  intro = "One OpenMP pool runs lt's kernels; the REPL prints results through lt.pp; lt.help shows "
    .. "these docs.",
  entries = {
    { "lt", "lt (require \"lt\"; the lt host also provides the global lt)",
      "The tensor library: tensors and their functions, lt.nn, lt.optim, lt.memory, lt.cuda, lt.data, "
        .. "lt.amp, lt.autograd, lt.text and the rest. lt.help() lists the areas of these docs.",
      ex = "local lt = require \"lt\"" },
    { "lt.help", "lt.help([x]) / ?x and x? at the REPL",
      "Prints the doc of x: a function (lt.randn), a class (nn.Linear), a module or optimizer instance "
        .. "(its class), a tensor (the Tensor overview), a namespace (lt.nn, F: its entries with one line "
        .. "each) or a name as a string (\"t:sum\", \"F.relu\", \"nn.Linear\", or just \"sum\"; "
        .. "lt.nn.functional.relu, Tensor:sum and torch.* spellings work too), or an area's title. An "
        .. "unknown name says which one was meant. With no argument, the list of areas. Returns nothing; "
        .. "require(\"lt.help\").text(x) returns the text. docs/API.md has every entry.",
      ex = "lt.help(\"F.relu\")", see = { "lt.pp" } },
    { "lt.set_num_threads", "lt.set_num_threads(n)",
      "Starts n threads for lt's kernels at once (`lt --threads N` too). It first checks that they fit the "
        .. "process's limits and fails with a message, keeping the old count, when they do not.",
      ex = "lt.set_num_threads(lt.get_num_threads())", see = { "lt.get_num_threads" } },
    { "lt.get_num_threads", "lt.get_num_threads()", "The number of threads lt's kernels use.",
      ex = "local n = lt.get_num_threads()" },
    { "lt.pp", "lt.pp(...) / lt.pp.print(...)",
      "Prints its arguments as the REPL shows results: a list on one line ({3, 4}), other keys sorted, "
        .. "tensors and modules inside a table as one summary each, nested tables to depth 3, a cycle as "
        .. "<cycle>, one entry per line past 80 columns.",
      ex = "lt.pp({lr = 0.1, shape = t.shape})", aliases = { "lt.pp.print" }, members = "lt.pp." },
    { "lt.pp.format", "lt.pp.format(v, {depth=3}) -> string", "The text lt.pp prints for one value.",
      opts = "depth=3", ex = "local s = lt.pp.format({1, 2, {a = 3}})" },
    { "lt.clock", "lt.clock()", "Seconds on a monotonic wall clock, as a float (os.clock is CPU time of every thread).",
      ex = "local t0 = lt.clock(); local elapsed = lt.clock() - t0" },
    { "lt.peak_rss", "lt.peak_rss()", "The process's peak resident memory in bytes.",
      ex = "print(lt.peak_rss() / 2^20, \"MiB\")" },
    { "lt.stdout_is_tty",
      "lt.stdout_is_tty()", "Whether standard output is a terminal (progress bars redraw in place).",
      ex = "local fancy = lt.stdout_is_tty()" },
    { "lt.version", "lt.version", "lt's version string.", ex = "print(lt.version)" },
  },
}
