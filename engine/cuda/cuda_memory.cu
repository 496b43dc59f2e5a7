// The CUDA device's raw memory for the caching allocator (engine/alloc):
// cudaMalloc/cudaFree on the device the allocator names, the stream hooks
// (current stream, events) of its per-stream pools, and cudaHostAlloc for
// the pinned host pool. Pooling, splitting, statistics and limits live in
// the one caching allocator every device shares, so this file stays thin.
#include <stdio.h>

#include "cuda/cuda_internal.h"

// The raw allocator can only say "no room" (NULL), so the reason of a failure
// that is not plain exhaustion (a bad device, a driver error) is kept here for
// lt_cuda_last_alloc_error, with the call and cudaGetErrorString.
static char last_error[256];

static void remember(const char *call, int index, size_t nbytes, cudaError_t e) {
  snprintf(last_error, sizeof last_error, "cuda: %s(%zu bytes) on cuda:%d: %s", call, nbytes,
           index, cudaGetErrorString(e));
}

// The same for a call with no byte count (the stream hooks' event calls).
static void remember_call(const char *call, int index, cudaError_t e) {
  snprintf(last_error, sizeof last_error, "cuda: %s on cuda:%d: %s", call, index,
           cudaGetErrorString(e));
}

// Whether e is a failure; if so it is remembered and the runtime's error
// state cleared, so that the next launch check does not report it.
static bool call_failed(const char *call, int index, cudaError_t e) {
  if (e == cudaSuccess) return false;
  (void)cudaGetLastError();
  remember_call(call, index, e);
  return true;
}

static void *cuda_raw_alloc(void *ctx, int index, size_t nbytes) {
  (void)ctx;
  void *ptr = NULL;
  // The caching allocator asks for whole segments (2 MiB and up) of device
  // index, whichever device the caller made current.
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  // cudaMalloc allocates on the current device: if index could not be made
  // current, the segment would land on another device under cuda:index's name.
  if (guard.error != cudaSuccess) {
    (void)cudaGetLastError();
    remember(guard.error_call, index, nbytes, guard.error);
    return NULL;
  }
  cudaError_t e = cudaMalloc(&ptr, nbytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); // an out-of-memory must not poison the next call
    remember("cudaMalloc", index, nbytes, e);
    return NULL;
  }
  return ptr;
}

// The allocator's hooks have no launch check of their own: a failed switch
// that the guard left pending would be reported later by an unrelated op's
// launch check, under that kernel's name. Kept here instead, and cleared.
static void clear_guard_error(const cuda_device_guard &guard, int index) {
  if (guard.error != cudaSuccess) (void)call_failed(guard.error_call, index, guard.error);
}

static void cuda_raw_free(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx;
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  clear_guard_error(guard, index);
  // cudaFree synchronises the device, so no kernel still uses the segment.
  cudaError_t e = cudaFree(ptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember("cudaFree", index, nbytes, e);
  }
}

static bool cuda_mem_info(void *ctx, int index, size_t *free_bytes, size_t *total_bytes) {
  (void)ctx;
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  // Another device's numbers are no answer for this one.
  if (call_failed(guard.error_call, index, guard.error)) return false;
  cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember_call("cudaMemGetInfo", index, e);
    return false;
  }
  return true;
}

// ---- streams (the caching allocator's per-stream pools; lt/alloc.h) ----
//
// The allocator tags each segment with the stream current at allocation and,
// for a block also used on other streams (lt_block_record_stream), records an
// event on each of them at its free and keeps the block out of its pool until
// every event has completed. Events are made and recorded with device index
// current: an event belongs to the device current when it is made and may be
// recorded only on a stream of that device.

static lt_stream_id cuda_current_stream(void *ctx, int index) {
  (void)ctx;
  return (lt_stream_id)cuda_stream_of(index);
}

static void *cuda_record_event(void *ctx, int index, lt_stream_id stream) {
  (void)ctx;
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  // Stream 0 would then mean another device's default stream.
  if (call_failed(guard.error_call, index, guard.error)) return NULL;
  cudaEvent_t ev = NULL;
  // No timing: cheaper to record and to query, and only completion matters.
  // On failure the allocator synchronizes the device instead.
  if (call_failed("cudaEventCreateWithFlags", index, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)))
    return NULL;
  if (call_failed("cudaEventRecord", index, cudaEventRecord(ev, (cudaStream_t)stream))) {
    (void)cudaEventDestroy(ev);
    (void)cudaGetLastError();
    return NULL;
  }
  return (void *)ev;
}

static bool cuda_event_done(void *ctx, int index, void *event) {
  (void)ctx;
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  clear_guard_error(guard, index);
  const cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError(); // "not ready" must not reach the next launch check
  if (e == cudaErrorNotReady) return false;
  // Any other error means the context is broken (a fault in a kernel): the
  // work the event marks will never complete normally, and answering "not
  // done" forever would keep the block out of the pool for the process. The
  // failure is kept for lt_cuda_last_alloc_error.
  remember_call("cudaEventQuery", index, e);
  return true;
}

static void cuda_event_wait(void *ctx, int index, void *event) {
  (void)ctx;
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  clear_guard_error(guard, index);
  (void)call_failed("cudaEventSynchronize", index, cudaEventSynchronize((cudaEvent_t)event));
}

static void cuda_event_free(void *ctx, int index, void *event) {
  (void)ctx;
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  clear_guard_error(guard, index);
  (void)call_failed("cudaEventDestroy", index, cudaEventDestroy((cudaEvent_t)event));
}

static void cuda_device_sync(void *ctx, int index) {
  (void)ctx;
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  // Not the device asked for: nothing here can prove its streams are done.
  if (call_failed(guard.error_call, index, guard.error)) return;
  // Every stream of the device, the pool's included: the fallback when an
  // event could not be recorded.
  (void)call_failed("cudaDeviceSynchronize", index, cudaDeviceSynchronize());
}

// ---- pinned host memory ----

static void *pinned_alloc(void *ctx, int index, size_t nbytes) {
  (void)ctx;
  (void)index;
  void *ptr = NULL;
  // Portable: usable by every device's copies, not only the current one's.
  cudaError_t e = cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember("cudaHostAlloc", 0, nbytes, e);
    return NULL;
  }
  return ptr;
}

static void pinned_free(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx;
  (void)index;
  // cudaFreeHost waits for the copies still reading or writing the pages.
  cudaError_t e = cudaFreeHost(ptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember("cudaFreeHost", 0, nbytes, e);
  }
}

void lt_cuda_install_allocator(void) {
  // Members by name: the struct grows (the stream hooks came later), and a
  // positional list would quietly put a pointer in the wrong slot.
  lt_raw_allocator raw = {};
  raw.alloc = cuda_raw_alloc;
  raw.free = cuda_raw_free;
  raw.mem_info = cuda_mem_info;
  raw.current_stream = cuda_current_stream;
  raw.record_event = cuda_record_event;
  raw.event_done = cuda_event_done;
  raw.event_wait = cuda_event_wait;
  raw.event_free = cuda_event_free;
  raw.synchronize = cuda_device_sync;
  raw.ctx = NULL;
  lt_alloc_set_backend(LT_DEVICE_CUDA, &raw);
  // The pinned pool has one stream (its hooks stay NULL): a copy still
  // reading or writing its pages is waited for through the storage's
  // pending_copy event (cuda_copy.cu), not through the allocator.
  lt_raw_allocator pinned = {};
  pinned.alloc = pinned_alloc;
  pinned.free = pinned_free;
  pinned.ctx = NULL;
  lt_alloc_set_pinned_backend(&pinned);
}

const char *cuda_last_alloc_error(void) {
  return last_error[0] ? last_error : NULL;
}
