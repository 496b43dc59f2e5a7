// Streams and events (lt/cuda.h): a pool of non-blocking streams per device,
// the current stream of each device, and events, after PyTorch's
// c10/cuda/CUDAStream.cpp and CUDAEvent.h. Also cuda_stream(), the stream
// every kernel, copy and library call of the backend is queued on.
//
// State is process-wide and is changed only from lt's one compute thread
// (the Lua state runs on one thread). The hot read, cuda_stream() on every
// op, takes no lock; the few writes go through __atomic stores so that a
// read from another thread (none today) would still see a whole value.
#include <pthread.h>
#include <stdlib.h>

#include "cuda/cuda_internal.h"

namespace {

struct device_streams {
  // Made on first hand-out and never destroyed: an id stays valid for the
  // process, so the caching allocator may keep blocks tagged with it.
  cudaStream_t pool[CUDA_STREAM_POOL_SIZE];
  unsigned next;        // the pool slot the next lt_cuda_stream_new hands out
  cudaStream_t current; // 0: the legacy default stream
};

device_streams devices[LT_MAX_DEVICES];
pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER; // guards pool[] and next

// "cuda.<fn>: <call>: <reason>", the style of lt_cuda_set_device, with the
// runtime's error state cleared so that the next call does not report it.
lt_status api_fail(const char *fn, const char *call, cudaError_t e) {
  (void)cudaGetLastError();
  return lt_error(LT_ERR_DEVICE, "cuda.%s: %s: %s", fn, call, cudaGetErrorString(e));
}

lt_status check_device(const char *fn, int device) {
  const int n = lt_cuda_device_count();
  if (device < 0 || device >= n)
    return lt_error(LT_ERR_DEVICE, "cuda.%s: device %d out of range (%d device%s)", fn, device, n,
                    n == 1 ? "" : "s");
  if (device >= LT_MAX_DEVICES)
    return lt_error(LT_ERR_DEVICE, "cuda.%s: device %d: lt supports cuda:0 to cuda:%d", fn,
                    device, LT_MAX_DEVICES - 1);
  return LT_OK;
}

// 1 + the pool slot holding s on device, or -1. device must be in range.
int pool_slot(int device, cudaStream_t s) {
  if (!s) return -1;
  for (int i = 0; i < CUDA_STREAM_POOL_SIZE; i++)
    if (__atomic_load_n(&devices[device].pool[i], __ATOMIC_ACQUIRE) == s) return i + 1;
  return -1;
}

// A stream id names a stream of device when it is 0 or one of its pool's:
// anything else (another device's stream, a made-up number) would reach the
// runtime as a dangling pointer.
lt_status check_stream(const char *fn, int device, lt_cuda_stream stream) {
  if (stream == 0 || pool_slot(device, (cudaStream_t)stream) > 0) return LT_OK;
  return lt_error(LT_ERR_DEVICE, "cuda.%s: stream 0x%llx does not belong to cuda:%d", fn,
                  (unsigned long long)stream, device);
}

// Makes device current for a scope (a stream or event belongs to the device
// current when it is made, and stream 0 means the current device's), and
// says when it could not, naming the lt call.
struct device_scope {
  cuda_device_guard guard;
  explicit device_scope(int device) : guard(lt_device{LT_DEVICE_CUDA, (signed char)device}) {}
  lt_status check(const char *fn) const {
    return guard.error == cudaSuccess ? LT_OK : api_fail(fn, guard.error_call, guard.error);
  }
};

} // namespace

struct lt_cuda_event {
  cudaEvent_t event;
  int device;    // the device it was made on: it may be recorded only there
  bool timing;   // made with enable_timing
  bool recorded; // elapsed_ms needs both ends recorded
};

// ---- internal (cuda_internal.h) ----

cudaStream_t cuda_stream(void) {
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return cuda_stream_of(d);
}

cudaStream_t cuda_stream_of(int device) {
  if (device < 0 || device >= LT_MAX_DEVICES) return 0;
  return __atomic_load_n(&devices[device].current, __ATOMIC_RELAXED);
}

int cuda_stream_slot(int device, cudaStream_t stream) {
  if (device < 0 || device >= LT_MAX_DEVICES) return -1;
  if (!stream) return 0;
  return pool_slot(device, stream);
}

// ---- streams ----

static lt_status rt_stream_new(int device, lt_cuda_stream *out) {
  *out = 0;
  LT_TRY(check_device("stream_new", device));
  pthread_mutex_lock(&pool_lock);
  device_streams *ds = &devices[device];
  const unsigned i = ds->next;
  lt_status st = LT_OK;
  if (!ds->pool[i]) {
    // A stream belongs to the device current when it is made.
    device_scope scope(device);
    st = scope.check("stream_new");
    cudaStream_t s = NULL;
    if (st == LT_OK) {
      // Non-blocking: no implicit synchronisation with the legacy default
      // stream, so that work on pool streams overlaps work on stream 0.
      const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      if (e != cudaSuccess) st = api_fail("stream_new", "cudaStreamCreateWithFlags", e);
    }
    if (st == LT_OK) __atomic_store_n(&ds->pool[i], s, __ATOMIC_RELEASE);
  }
  if (st == LT_OK) {
    // Advance only on success: a failed creation is retried at the same slot.
    ds->next = (i + 1) % CUDA_STREAM_POOL_SIZE;
    *out = (lt_cuda_stream)ds->pool[i];
  }
  pthread_mutex_unlock(&pool_lock);
  return st;
}

static lt_cuda_stream rt_current_stream(int device) {
  if (device < 0 || device >= LT_MAX_DEVICES || device >= lt_cuda_device_count()) return 0;
  return (lt_cuda_stream)cuda_stream_of(device);
}

static lt_status rt_set_stream(int device, lt_cuda_stream stream) {
  LT_TRY(check_device("set_stream", device));
  LT_TRY(check_stream("set_stream", device, stream));
  __atomic_store_n(&devices[device].current, (cudaStream_t)stream, __ATOMIC_RELAXED);
  return LT_OK;
}

static lt_status rt_stream_synchronize(int device, lt_cuda_stream stream) {
  LT_TRY(check_device("stream_synchronize", device));
  LT_TRY(check_stream("stream_synchronize", device, stream));
  // Stream 0 is the legacy default stream of the device current at the call.
  device_scope scope(device);
  LT_TRY(scope.check("stream_synchronize"));
  const cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
  if (e != cudaSuccess) return api_fail("stream_synchronize", "cudaStreamSynchronize", e);
  return LT_OK;
}

static lt_status rt_stream_query(int device, lt_cuda_stream stream, bool *done) {
  *done = true;
  LT_TRY(check_device("stream_query", device));
  LT_TRY(check_stream("stream_query", device, stream));
  device_scope scope(device);
  LT_TRY(scope.check("stream_query"));
  const cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
  if (e == cudaSuccess) return LT_OK;
  if (e == cudaErrorNotReady) {
    // "Not ready" is an answer, not an error: it must not stay behind for
    // the next cudaGetLastError (a kernel launch check) to report.
    (void)cudaGetLastError();
    *done = false;
    return LT_OK;
  }
  return api_fail("stream_query", "cudaStreamQuery", e);
}

static lt_status rt_stream_wait_stream(int device, lt_cuda_stream waiter,
                                     lt_cuda_stream other) {
  LT_TRY(check_device("stream_wait_stream", device));
  LT_TRY(check_stream("stream_wait_stream", device, waiter));
  LT_TRY(check_stream("stream_wait_stream", device, other));
  if (waiter == other) return LT_OK; // a stream already runs in its own order
  device_scope scope(device);
  LT_TRY(scope.check("stream_wait_stream"));
  // An event marks what other has queued so far; waiter waits for that
  // point only, not for what other queues later.
  cudaEvent_t ev;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e != cudaSuccess) return api_fail("stream_wait_stream", "cudaEventCreateWithFlags", e);
  const char *call = "cudaEventRecord";
  e = cudaEventRecord(ev, (cudaStream_t)other);
  if (e == cudaSuccess) {
    call = "cudaStreamWaitEvent";
    e = cudaStreamWaitEvent((cudaStream_t)waiter, ev, 0);
  }
  // Destroying an event a stream still waits on is allowed: the runtime
  // releases it once the wait is over.
  const cudaError_t d = cudaEventDestroy(ev);
  if (e != cudaSuccess) return api_fail("stream_wait_stream", call, e);
  if (d != cudaSuccess) return api_fail("stream_wait_stream", "cudaEventDestroy", d);
  return LT_OK;
}

// ---- events ----

static lt_status check_event(const char *fn, const lt_cuda_event *event) {
  if (!event) return lt_error(LT_ERR_ARG, "cuda.%s: no event (NULL)", fn);
  return LT_OK;
}

static lt_status rt_event_new(int device, bool enable_timing, lt_cuda_event **out) {
  *out = NULL;
  LT_TRY(check_device("event_new", device));
  lt_cuda_event *ev = (lt_cuda_event *)calloc(1, sizeof *ev);
  if (!ev) return lt_error(LT_ERR_OOM, "cuda.event_new: out of host memory");
  ev->device = device;
  ev->timing = enable_timing;
  device_scope scope(device);
  lt_status st = scope.check("event_new");
  if (st == LT_OK) {
    // Without timing an event is cheaper to record and to wait on (PyTorch's
    // default too).
    const cudaError_t e = cudaEventCreateWithFlags(
        &ev->event, enable_timing ? cudaEventDefault : cudaEventDisableTiming);
    if (e != cudaSuccess) st = api_fail("event_new", "cudaEventCreateWithFlags", e);
  }
  if (st != LT_OK) {
    free(ev);
    return st;
  }
  *out = ev;
  return LT_OK;
}

static void rt_event_free(lt_cuda_event *event) {
  if (!event) return;
  // A failed switch still destroys: cudaEventDestroy does not need the
  // event's device current.
  device_scope scope(event->device);
  if (scope.guard.error != cudaSuccess) (void)cudaGetLastError();
  if (cudaEventDestroy(event->event) != cudaSuccess) (void)cudaGetLastError();
  free(event);
}

static int rt_event_device(const lt_cuda_event *event) {
  return event ? event->device : -1;
}

static lt_status rt_event_record(lt_cuda_event *event, lt_cuda_stream stream) {
  LT_TRY(check_event("event_record", event));
  // An event may be recorded only on a stream of its own device.
  LT_TRY(check_stream("event_record", event->device, stream));
  device_scope scope(event->device);
  LT_TRY(scope.check("event_record"));
  const cudaError_t e = cudaEventRecord(event->event, (cudaStream_t)stream);
  if (e != cudaSuccess) return api_fail("event_record", "cudaEventRecord", e);
  event->recorded = true;
  return LT_OK;
}

static lt_status rt_event_synchronize(lt_cuda_event *event) {
  LT_TRY(check_event("event_synchronize", event));
  // An event never recorded has nothing to wait for (cudaEventSynchronize
  // returns at once).
  device_scope scope(event->device);
  LT_TRY(scope.check("event_synchronize"));
  const cudaError_t e = cudaEventSynchronize(event->event);
  if (e != cudaSuccess) return api_fail("event_synchronize", "cudaEventSynchronize", e);
  return LT_OK;
}

static lt_status rt_event_query(lt_cuda_event *event, bool *done) {
  *done = true;
  LT_TRY(check_event("event_query", event));
  device_scope scope(event->device);
  LT_TRY(scope.check("event_query"));
  const cudaError_t e = cudaEventQuery(event->event);
  if (e == cudaSuccess) return LT_OK;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError(); // an answer, not an error (see stream_query)
    *done = false;
    return LT_OK;
  }
  return api_fail("event_query", "cudaEventQuery", e);
}

static lt_status rt_event_elapsed_ms(lt_cuda_event *start, lt_cuda_event *end,
                                     double *ms) {
  *ms = 0.0;
  LT_TRY(check_event("event_elapsed_ms", start));
  LT_TRY(check_event("event_elapsed_ms", end));
  if (!start->timing || !end->timing)
    return lt_error(LT_ERR_ARG, "cuda.event_elapsed_ms: both events must be made with "
                                "enable_timing (the %s one was not)",
                    !start->timing ? "start" : "end");
  if (!start->recorded || !end->recorded)
    return lt_error(LT_ERR_ARG, "cuda.event_elapsed_ms: the %s event has not been recorded",
                    !start->recorded ? "start" : "end");
  if (start->device != end->device)
    return lt_error(LT_ERR_DEVICE, "cuda.event_elapsed_ms: events on cuda:%d and cuda:%d",
                    start->device, end->device);
  device_scope scope(start->device);
  LT_TRY(scope.check("event_elapsed_ms"));
  float f = 0.0f;
  // cudaErrorNotReady when an end has not completed: reported as an error,
  // as torch.cuda.Event.elapsed_time does; synchronize end first.
  const cudaError_t e = cudaEventElapsedTime(&f, start->event, end->event);
  if (e != cudaSuccess) return api_fail("event_elapsed_ms", "cudaEventElapsedTime", e);
  *ms = (double)f;
  return LT_OK;
}

static lt_status rt_stream_wait_event(int device, lt_cuda_stream stream,
                                     lt_cuda_event *event) {
  LT_TRY(check_device("stream_wait_event", device));
  LT_TRY(check_stream("stream_wait_event", device, stream));
  LT_TRY(check_event("stream_wait_event", event));
  // The event may belong to another device: a stream can wait on any
  // device's event. One never recorded makes no wait.
  device_scope scope(device);
  LT_TRY(scope.check("stream_wait_event"));
  const cudaError_t e = cudaStreamWaitEvent((cudaStream_t)stream, event->event, 0);
  if (e != cudaSuccess) return api_fail("stream_wait_event", "cudaStreamWaitEvent", e);
  return LT_OK;
}

// The stream and event entries of the runtime's hooks (cuda_device.cu).
void cuda_stream_hooks(lt_cuda_hooks *h) {
  h->stream_new = rt_stream_new;
  h->current_stream = rt_current_stream;
  h->set_stream = rt_set_stream;
  h->stream_synchronize = rt_stream_synchronize;
  h->stream_query = rt_stream_query;
  h->stream_wait_stream = rt_stream_wait_stream;
  h->event_new = rt_event_new;
  h->event_free = rt_event_free;
  h->event_device = rt_event_device;
  h->event_record = rt_event_record;
  h->event_synchronize = rt_event_synchronize;
  h->event_query = rt_event_query;
  h->event_elapsed_ms = rt_event_elapsed_ms;
  h->stream_wait_event = rt_stream_wait_event;
}
