-- lt.help: progress bars and training plots (lua/lt/progress.lua, lua/lt/plot.lua).
-- Examples write their bars to a string buffer (out =) so that running them prints nothing.
return {
  title = "Progress bars and plots",
  intro = "lt.progress draws tqdm's bars for loops (redrawn in place on a terminal, a plain line every "
    .. "few seconds into a file or pipe); lt.plot draws a training run's curves as one HTML page. Both "
    .. "load on first use.",
  entries = {
    { "lt.progress",
      "lt.progress(what, {desc=, total=, unit=\"it\", postfix=, out=, tty=, width=, columns=, "
        .. "interval=0.1, log_every=10, clock=})",
      "A progress bar that is also the iterator of a for loop: what is an iterator function, a table (as "
        .. "ipairs), a DataLoader (its next epoch) or a count n (1..n). Each item counts a step; the bar "
        .. "closes (printing the total time) when the loop ends, breaks or fails. Keep it in a local to "
        .. "call bar:set_postfix inside the loop.",
      opts = "desc (the label; label is the same), total (from what, when it can tell), unit=\"it\", postfix "
        .. "(initial fields), out=io.stdout, tty (whether out is a terminal), width=20 (bar cells), columns "
        .. "($COLUMNS, else stty's), interval=0.1 (seconds between redraws), log_every=10 (seconds between "
        .. "plain lines), clock=lt.clock",
      ex = "for i in lt.progress(3, {desc = \"demo\", tty = false}) do end",
      aliases = { "lt.progress.wrap" }, members = "lt.progress." },
    { "lt.progress.new", "lt.progress.new(total, {desc=, unit=, ...})",
      "A bar driven by hand (total nil: unknown, no percentage or ETA): bar:update() per step, bar:close() "
        .. "at the end. Options as lt.progress's.",
      ex = "local bar = lt.progress.new(2, {tty = false}); bar:update(); bar:update(); bar:close()",
      members = "bar:" },
    { "bar:update",
      "bar:update(n=1 [, fields])", "n more steps done; fields, when given, "
        .. "are merged into the shown ones.",
      ex = "local bar = lt.progress.new(10, {tty = false}); bar:update(2, {loss = 0.5}); bar:close()",
      aliases = { "bar:step" } },
    { "bar:set_postfix", "bar:set_postfix(fields)",
      "The fields shown after the rate, replacing the ones before (tqdm's set_postfix): {loss = 0.69}, or "
        .. "{{\"test loss\", 0.41}, {\"test accuracy\", 0.85}} in that order.",
      ex = "local bar = lt.progress.new(1, {tty = false}); bar:set_postfix({lr = 1e-3}); bar:close()" },
    { "bar:set_description", "bar:set_description(desc)", "The label in front of the bar.",
      ex = "local bar = lt.progress.new(1, {tty = false}); bar:set_description(\"epoch 2\"); bar:close()" },
    { "bar:write", "bar:write(text)", "A line above the bar (tqdm.write), the bar redrawn under it on a terminal.",
      ex = "local bar = lt.progress.new(1, {tty = false}); bar:write(\"checkpoint saved\"); bar:close()" },
    { "bar:close", "bar:close([fields]) -> seconds",
      "Prints the final line (fields merged first) with the total time and returns the seconds the bar ran; "
        .. "closing twice does nothing. bar:finish is the same.",
      ex = "local bar = lt.progress.new(1, {tty = false}); bar:update(); local took = bar:close()",
      aliases = { "bar:finish" } },
    { "bar:elapsed_time", "bar:elapsed_time()", "The seconds since the bar started (or that it ran, once closed).",
      ex = "local bar = lt.progress.new(1, {tty = false}); local s = bar:elapsed_time(); bar:close()" },
    { "bar:refresh", "bar:refresh([force])",
      "Draws the bar now if interval (on a terminal) or log_every (elsewhere) has passed, or with force.",
      ex = "local bar = lt.progress.new(1, {tty = false}); bar:refresh(true); bar:close()" },
    { "lt.progress.format_duration", "lt.progress.format_duration(seconds)",
      "Whole seconds as a clock shows them: 75 is \"01:15\", 3725 \"1:02:05\".",
      ex = "assert(lt.progress.format_duration(75) == \"01:15\")", see = { "lt.progress.format_total" } },
    { "lt.progress.format_total", "lt.progress.format_total(seconds)",
      "A bar's total time: tenths of a second under a minute (\"11.2 s\"), a clock above.",
      ex = "local s = lt.progress.format_total(11.24)" },
    { "lt.progress.format_rate", "lt.progress.format_rate(done, elapsed, unit)",
      "\"41.2 it/s\", or seconds per step below one a second (\"2.31 s/it\"), as tqdm.",
      ex = "local r = lt.progress.format_rate(10, 4, \"it\")" },
    { "lt.progress.format_value", "lt.progress.format_value(v)",
      "A field's number as bars show it: four decimals, or three significant digits for tiny and huge ones.",
      ex = "local s = lt.progress.format_value(1e-5)" },
    { "lt.plot", "lt.plot(metrics, path, {title=}) -> path",
      "The curves of a training run as one self-contained HTML page (loss per batch and epoch, test loss "
        .. "and accuracy, learning rate, memory, against the step, with epochs marked, summary cards and a "
        .. "table). metrics is a file of JSON lines as the recipes' --metrics writes, or a list of those "
        .. "records. The page is replaced atomically. lt.plot.write is the same.",
      opts = "title (\"lt training run: <recipe>\")", ex = "lt.plot(\"run.jsonl\", \"run.html\")",
      run = "reads and writes files", aliases = { "lt.plot.write" }, members = "lt.plot." },
    { "lt.plot.colours",
      "lt.plot.colours", "The colour of each series, "
        .. "the same on every page: {[\"batch loss\"] = \"#9ecae1\", ...}.",
      ex = "local c = lt.plot.colours[\"test accuracy\"]" },
    { "lt.plot.charts", "lt.plot.charts(records) -> {title =, start =, epochs =, charts = {...}}",
      "What the page draws, as data: each chart's id, title, y label and series of {step, value} points.",
      ex = "local page = lt.plot.charts({})" },
  },
}
