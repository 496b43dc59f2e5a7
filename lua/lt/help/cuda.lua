-- lt.help: CUDA devices, streams and events (bindings/core.c, bindings/cuda_stream.c,
-- bindings/tensor_methods.c).
local ON_GPU = "needs a CUDA device"
-- Methods of streams and events: only an object made on a device reaches them.
local CUDA_OBJECT = "a method of CUDA streams and events, which need a device to exist"

return {
  title = "CUDA",
  intro = "CUDA devices are \"cuda:N\" (N from 0), \"cuda\" (the current one) or N. Every op runs on its "
    .. "device's current stream; streams and events follow torch.cuda's. In a build or on a machine "
    .. "without CUDA, is_available() is false and the functions that need a device raise an error "
    .. "saying so.",
  entries = {
    { "lt.cuda", "lt.cuda", "Devices, streams, events, TF32 switches and the driver's memory figures.",
      ex = "print(lt.cuda.is_available(), lt.cuda.device_count())", members = "lt.cuda." },
    { "lt.cuda.is_available", "lt.cuda.is_available()", "Whether a CUDA device can be used.",
      ex = "local device = lt.cuda.is_available() and \"cuda\" or \"cpu\"" },
    { "lt.cuda.device_count", "lt.cuda.device_count()", "The number of CUDA devices (0 without CUDA).",
      ex = "local n = lt.cuda.device_count()" },
    { "lt.cuda.current_device", "lt.cuda.current_device()", "The current device's number.",
      ex = "local d = lt.cuda.current_device()", run = ON_GPU },
    { "lt.cuda.set_device", "lt.cuda.set_device(n | \"cuda:N\")", "Makes a device current.",
      ex = "lt.cuda.set_device(0)", run = ON_GPU },
    { "lt.cuda.synchronize", "lt.cuda.synchronize()", "Waits until the device has finished all queued work.",
      ex = "lt.cuda.synchronize()", run = ON_GPU },
    { "lt.cuda.empty_cache", "lt.cuda.empty_cache() -> bytes",
      "lt.memory.empty_cache for every CUDA device (0 without CUDA); returns the bytes released.",
      ex = "local released = lt.cuda.empty_cache()" },
    { "lt.cuda.mem_get_info", "lt.cuda.mem_get_info([device]) -> free, total",
      "The driver's free and total bytes of a device (cudaMemGetInfo), as nvidia-smi shows them.",
      ex = "local free, total = lt.cuda.mem_get_info()", run = ON_GPU },
    { "lt.cuda.allow_tf32", "lt.cuda.allow_tf32({matmul=, cudnn=}) -> {matmul =, cudnn =}",
      "Turns TF32 (faster float32 matmuls and convolutions at lower precision) on or off; both are off by "
        .. "default. Either may be left out; returns both switches.",
      ex = "local now = lt.cuda.allow_tf32({matmul = false})" },
    { "lt.cuda.Stream", "lt.cuda.Stream([device]) -> stream",
      "A new stream on a device: work queued on it may overlap other streams'. Fields device and id; "
        .. "methods synchronize, query, wait_stream, wait_event, record_event.",
      ex = "local side = lt.cuda.Stream()", run = ON_GPU, members = "stream:" },
    { "lt.cuda.current_stream", "lt.cuda.current_stream([device])", "The device's current stream.",
      ex = "local cur = lt.cuda.current_stream()", run = ON_GPU },
    { "lt.cuda.default_stream", "lt.cuda.default_stream([device])", "The device's default stream (id 0).",
      ex = "local s0 = lt.cuda.default_stream()", run = ON_GPU },
    { "lt.cuda.set_stream", "lt.cuda.set_stream(stream)",
      "Makes stream (and its device) current for good, as torch.cuda.set_stream.",
      ex = "lt.cuda.set_stream(lt.cuda.default_stream())", run = ON_GPU },
    { "lt.cuda.stream", "lt.cuda.stream(stream, fn, ...) / local g <close> = lt.cuda.stream(stream)",
      "Runs fn(...) with stream and its device current and puts the previous ones back after it, also when "
        .. "fn fails (Python's `with torch.cuda.stream(s):`); without fn, a guard for a block.",
      ex = "local side = lt.cuda.Stream(); local y2 = lt.cuda.stream(side, function() return t:cuda() * 2 end)",
      run = ON_GPU, types = { "lt.cuda.StreamGuard" } },
    { "lt.cuda.Event", "lt.cuda.Event({enable_timing=false, device=}) -> event",
      "A CUDA event (freed when collected or closed): methods record, synchronize, query, wait and "
        .. "elapsed_time.",
      opts = "enable_timing=false, device (the current one)",
      ex = "local start, stop = lt.cuda.Event({enable_timing = true}), lt.cuda.Event({enable_timing = true})",
      run = ON_GPU, members = "event:" },
    { "stream:synchronize", virtual = CUDA_OBJECT, "stream:synchronize()", "Waits until the work queued on the stream is done.",
      ex = "lt.cuda.current_stream():synchronize()", run = ON_GPU },
    { "stream:query", virtual = CUDA_OBJECT, "stream:query() -> done", "Whether the work queued on the stream is done.",
      ex = "local done = lt.cuda.current_stream():query()", run = ON_GPU },
    { "stream:wait_stream", virtual = CUDA_OBJECT, "stream:wait_stream(other)",
      "Work queued on stream from now on waits for the work queued on other so far.",
      ex = "lt.cuda.Stream():wait_stream(lt.cuda.current_stream())", run = ON_GPU },
    { "stream:wait_event", virtual = CUDA_OBJECT, "stream:wait_event(event)", "Work queued on stream from now on waits for event.",
      ex = "local e = lt.cuda.Event(); e:record(); lt.cuda.Stream():wait_event(e)", run = ON_GPU },
    { "stream:record_event", virtual = CUDA_OBJECT, "stream:record_event([event]) -> event",
      "Records event (a new one when not given) at the stream's current point.",
      ex = "local e = lt.cuda.current_stream():record_event()", run = ON_GPU },
    { "event:record", virtual = CUDA_OBJECT, "event:record([stream])", "Records the event on stream (the current one by default).",
      ex = "local e = lt.cuda.Event(); e:record()", run = ON_GPU },
    { "event:synchronize", virtual = CUDA_OBJECT, "event:synchronize()", "Waits until the work before the event is done.",
      ex = "local e = lt.cuda.Event(); e:record(); e:synchronize()", run = ON_GPU },
    { "event:query", virtual = CUDA_OBJECT, "event:query() -> done", "Whether the work before the event is done.",
      ex = "local e = lt.cuda.Event(); e:record(); local done = e:query()", run = ON_GPU },
    { "event:wait", virtual = CUDA_OBJECT, "event:wait([stream])", "Work queued on stream from now on waits for the event.",
      ex = "local e = lt.cuda.Event(); e:record(); e:wait(lt.cuda.Stream())", run = ON_GPU },
    { "event:elapsed_time", virtual = CUDA_OBJECT, "start:elapsed_time(stop) -> milliseconds",
      "The time between two recorded events made with enable_timing.",
      ex = "local a, b = lt.cuda.Event({enable_timing = true}), lt.cuda.Event({enable_timing = true})\n"
        .. "a:record(); b:record(); b:synchronize(); print(a:elapsed_time(b))", run = ON_GPU },
    { "t:record_stream", "t:record_stream(stream)",
      "Tells the allocator that work queued on stream uses t's memory, so it is not reused before that "
        .. "work is done (torch.Tensor.record_stream).",
      ex = "local g = t:cuda(); g:record_stream(lt.cuda.current_stream())", run = ON_GPU },
    { "t:pin_memory", "t:pin_memory()",
      "t in page-locked host memory (t itself if already there), from which t:to(\"cuda\", "
        .. "{non_blocking = true}) copies without waiting.",
      ex = "local pinned = t:pin_memory()", run = ON_GPU, see = { "t:is_pinned", "lt.data.DataLoader" } },
    { "t:is_pinned", "t:is_pinned()", "Whether t is in page-locked host memory.", ex = "local p = t:is_pinned()" },
  },
}
