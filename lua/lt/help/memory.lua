-- lt.help: memory (bindings/memory.c, bindings/memory_history.c, bindings/category.c,
-- lua/lt/memory_*.lua).
local DEV = "dev: a device name (\"cpu\", \"cuda\", \"cuda:1\"); without it, `lt --device`'s, else the CPU."

return {
  title = "Memory",
  intro = "One caching allocator serves every device, the CPU included, so every figure is exact "
    .. "allocator bytes and testable without a GPU. Each storage has a category (parameter, gradient, "
    .. "optimizer, activation, other, workspace) so stats say where memory goes. Dropped tensors are "
    .. "collected before they could raise a peak; lt.del, t:free and <close> release at once.",
  entries = {
    { "lt.memory", "lt.memory", "Allocator statistics, limits, categories, the event history and reports.",
      ex = "print(lt.memory.allocated(), lt.memory.max_allocated())", members = "lt.memory." },
    { "lt.memory.allocated", "lt.memory.allocated([dev])",
      "Bytes held by live tensors now (torch.cuda.memory_allocated). " .. DEV,
      ex = "local before = lt.memory.allocated()", see = { "lt.memory.max_allocated", "lt.memory.stats" } },
    { "lt.memory.max_allocated", "lt.memory.max_allocated([dev])",
      "The peak of allocated() since the start or the last reset_peak. " .. DEV,
      ex = "lt.memory.reset_peak(); local y2 = model(x); local peak = lt.memory.max_allocated()",
      see = { "lt.memory.reset_peak", "lt.memory.estimate" } },
    { "lt.memory.reserved", "lt.memory.reserved([dev])",
      "Bytes the allocator holds from the system (allocated plus its cache). " .. DEV,
      ex = "local held = lt.memory.reserved()", see = { "lt.memory.empty_cache" } },
    { "lt.memory.max_reserved", "lt.memory.max_reserved([dev])", "The peak of reserved(). " .. DEV,
      ex = "local peak = lt.memory.max_reserved()" },
    { "lt.memory.reset_peak", "lt.memory.reset_peak([dev])", "Starts the peaks (max_allocated, max_reserved, "
        .. "peak_by_category) again from the current figures. " .. DEV, ex = "lt.memory.reset_peak()" },
    { "lt.memory.stats", "lt.memory.stats([dev]) -> table",
      "torch.cuda.memory_stats's figures: allocation, segment, active, inactive_split and their _bytes, "
        .. "allocated_bytes, reserved_bytes, requested_bytes (each with all / small_pool / large_pool and "
        .. "current / peak / allocated / freed), by_category and peak_by_category, num_ooms, "
        .. "num_alloc_retries, num_collections, num_peak_collections, limit, and the device's free and "
        .. "total bytes. " .. DEV,
      ex = "local s = lt.memory.stats(); print(s.by_category.parameter.current, s.allocated_bytes.all.peak)",
      see = { "lt.memory.summary" } },
    { "lt.memory.summary", "lt.memory.summary([dev]) -> string",
      "The statistics as a readable table, laid out like torch.cuda.memory_summary. " .. DEV,
      ex = "print(lt.memory.summary())" },
    { "lt.memory.empty_cache", "lt.memory.empty_cache([dev]) -> bytes",
      "Returns the allocator's whole free segments to the system; returns the bytes released. " .. DEV,
      ex = "local released = lt.memory.empty_cache()", see = { "lt.cuda.empty_cache" } },
    { "lt.memory.set_limit", "lt.memory.set_limit(bytes | fraction | nil [, dev]) -> bytes",
      "Caps the device's reserved memory, so a small machine behaves like a small GPU: an integer (or a "
        .. "float above 1) is bytes, a float in (0, 1] a fraction of the device's memory; nil or 0 removes "
        .. "the limit. Allocations past it run a collection, empty the cache and retry, then raise "
        .. "\"out of memory\" (catchable with pcall).",
      ex = "lt.memory.set_limit(64 * 2^20); lt.memory.set_limit(nil)", see = { "lt.memory.get_limit" } },
    { "lt.memory.get_limit", "lt.memory.get_limit([dev])", "The limit in bytes, 0 for none. " .. DEV,
      ex = "local cap = lt.memory.get_limit()" },
    { "lt.memory.set_category", "lt.memory.set_category(t, name) -> t",
      "Counts t's storage (every view of it) under a category: parameter, gradient, optimizer, activation "
        .. "or other.",
      ex = "local state = lt.memory.set_category(lt.zeros(10), \"optimizer\")" },
    { "lt.memory.category", "lt.memory.category(t)", "The category of t's storage.",
      ex = "print(lt.memory.category(m.weight))" },
    { "lt.memory.record", "lt.memory.record(on [, {max_events=}]) -> was_recording",
      "Starts (a fresh log) or stops recording every allocation and free with the script line that made it.",
      opts = "max_events (the log's capacity; older events are dropped past it)",
      ex = "lt.memory.record(true); local tmp = lt.zeros(100); lt.memory.record(false)",
      see = { "lt.memory.snapshot", "lt.memory.report" } },
    { "lt.memory.mark", "lt.memory.mark(label)", "A labelled moment on the timeline (nothing when not recording).",
      ex = "lt.memory.mark(\"epoch 2\")" },
    { "lt.memory.snapshot", "lt.memory.snapshot() -> {events =, recording =, dropped =, max_events =, stats =}",
      "The recorded events as a Lua table (kind, time, device, size, category, origin line, op, ...) and "
        .. "the current stats.",
      ex = "local snap = lt.memory.snapshot()" },
    { "lt.memory.report", "lt.memory.report(path, {title=}) -> path",
      "Writes one self-contained HTML page from the recorded events: a stacked timeline by category with "
        .. "marks, the largest allocations at the peak with their script lines, segments and the summary. "
        .. "`lt --memory-report FILE script.lua` does it for a whole script.",
      opts = "title (\"lt memory report: <script>\")", ex = "lt.memory.report(\"memory.html\")", run = "writes a file" },
    { "lt.memory.estimate",
      "lt.memory.estimate(fn, ...) -> {peak =, by_category =, reserved =, baseline =, limit =, fits =, "
        .. "oom =, device =, devices =}",
      "Predicts the peak memory of fn(...) without allocating it: fn runs op by op on tensors that are "
        .. "shapes without data, through the allocator's own rules. Afterwards everything is as before "
        .. "(gradients, optimizer state, the generator). fits is false when the real run would raise out of "
        .. "memory under the limit.",
      ex = "local est = lt.memory.estimate(function() F.cross_entropy(model(x), y):backward() end); print(est.peak)" },
    { "lt.del", "lt.del(t, ...) -> bytes",
      "Releases the tensors now, as Python's del; later use is an error (\"attempt to use a freed "
        .. "tensor\"). Storage still shared with a view or saved by autograd stays alive: returns the bytes "
        .. "actually given back.",
      ex = "local tmp = lt.zeros(1000); local freed = lt.del(tmp)", see = { "t:free", "lt.gc" } },
    { "t:free", "t:free() -> bytes",
      "Releases t now (as lt.del(t) and leaving a `local t <close>` scope do); returns the bytes given back.",
      ex = "do local tmp <close> = lt.zeros(1000) end; local b = lt.zeros(10):free()", see = { "lt.del" } },
    { "t:is_freed", "t:is_freed()", "Whether t was released (lt.del, t:free, <close>).",
      ex = "local tmp = lt.zeros(1); tmp:free(); assert(tmp:is_freed())" },
    { "lt.gc", "lt.gc() -> bytes",
      "A full Lua collection (gc.collect()); returns the tensor bytes it gave back. Rarely needed: tensor "
        .. "bytes are charged to the collector.",
      ex = "local freed = lt.gc()" },
  },
}
