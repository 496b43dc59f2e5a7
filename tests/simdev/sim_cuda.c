/* A simulated CUDA slot for tests on machines without a GPU. It takes the
 * place of core's no-CUDA hooks in the `lt_simdev` host (tests only, never
 * shipped; it installs its hooks when the program starts): LT_SIM_CUDA_DEVICES (default 2) "cuda" devices whose memory is
 * host memory and whose kernels are the CPU's, with streams and events that
 * complete at once. The kernels are the CPU's, so it checks nothing of the
 * CUDA kernels (tests/gpu/cases.lua does that on a GPU); what it runs is
 * everything around them that is device-generic and otherwise runs only on
 * a GPU: tensors and modules moved to "cuda" and "cuda:1", copies between
 * devices, per-device allocator statistics, pinned memory, the range checks
 * of labels on a device, optimizer state on the device, the autocast and
 * grad scaler paths, streams and events through the Lua API, and the
 * recipes under --device cuda. */
#include <stdlib.h>
#include <time.h>

#include "core/cuda_hooks.h"
#include "core/device_kernels.h"
#include "lt/alloc.h"
#include "lt/cuda.h"

#define SIM_MAX_DEVICES 8
#define SIM_STREAMS 32                  /* per device, as the real pool */
#define SIM_TOTAL_BYTES ((size_t)16 << 30) /* each device's "memory" */

static int device_count = -1;
static int current_device;
static lt_cuda_stream current_stream[SIM_MAX_DEVICES];
static unsigned next_stream[SIM_MAX_DEVICES];
static size_t used_bytes[SIM_MAX_DEVICES];

/* ---- raw memory: host memory, aligned as cudaMalloc's ---- */

static void *sim_alloc(void *ctx, int index, size_t nbytes) {
  (void)ctx;
  if (index < 0 || index >= SIM_MAX_DEVICES || nbytes > SIM_TOTAL_BYTES - used_bytes[index])
    return NULL;
  void *p = NULL;
  if (posix_memalign(&p, 256, nbytes ? nbytes : 1) != 0) return NULL;
  used_bytes[index] += nbytes;
  return p;
}

static void sim_free(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx;
  free(ptr);
  used_bytes[index] -= nbytes;
}

static bool sim_mem_info(void *ctx, int index, size_t *free_bytes, size_t *total_bytes) {
  (void)ctx;
  *total_bytes = SIM_TOTAL_BYTES;
  *free_bytes = SIM_TOTAL_BYTES - used_bytes[index];
  return true;
}

static lt_stream_id raw_current_stream(void *ctx, int index) {
  (void)ctx;
  return current_stream[index];
}

/* Work completes as it is queued: every event is done when recorded. */
static char done_marker;
static void *sim_record_event(void *ctx, int index, lt_stream_id stream) {
  (void)ctx, (void)index, (void)stream;
  return &done_marker;
}
static bool sim_event_done(void *ctx, int index, void *event) {
  (void)ctx, (void)index, (void)event;
  return true;
}
static void sim_event_nothing(void *ctx, int index, void *event) { (void)ctx, (void)index, (void)event; }
static void raw_synchronize(void *ctx, int index) { (void)ctx, (void)index; }

static void *host_alloc(void *ctx, int index, size_t nbytes) {
  (void)ctx, (void)index;
  void *p = NULL;
  return posix_memalign(&p, 256, nbytes ? nbytes : 1) == 0 ? p : NULL;
}
static void host_free(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx, (void)index, (void)nbytes;
  free(ptr);
}

static void start_slot(void) {
  lt_raw_allocator raw = {0};
  raw.alloc = sim_alloc;
  raw.free = sim_free;
  raw.mem_info = sim_mem_info;
  raw.current_stream = raw_current_stream;
  raw.record_event = sim_record_event;
  raw.event_done = sim_event_done;
  raw.event_wait = sim_event_nothing;
  raw.event_free = sim_event_nothing;
  raw.synchronize = raw_synchronize;
  lt_alloc_set_backend(LT_DEVICE_CUDA, &raw);
  lt_raw_allocator pinned = {0};
  pinned.alloc = host_alloc;
  pinned.free = host_free;
  lt_alloc_set_pinned_backend(&pinned);
  /* The CPU's kernels serve the simulated device: its memory is host memory. */
  static const lt_device_kernels kernels = {&lt_cpu_backend, &lt_cpu_nn_backend, &lt_cpu_optim_backend};
  lt_device_kernels_register(LT_DEVICE_CUDA, &kernels);
}

static int sim_device_count(void) {
  if (device_count < 0) {
    const char *env = getenv("LT_SIM_CUDA_DEVICES");
    int n = env ? atoi(env) : 2;
    device_count = n < 0 ? 0 : n > SIM_MAX_DEVICES ? SIM_MAX_DEVICES : n;
    if (device_count > 0) start_slot();
  }
  return device_count;
}

static int sim_current_device(void) { return current_device; }

static lt_status check_device(const char *fn, int index) {
  const int n = lt_cuda_device_count();
  if (index < 0 || index >= n)
    return lt_error(LT_ERR_DEVICE, "cuda.%s: device %d out of range (%d device%s)", fn, index, n,
                    n == 1 ? "" : "s");
  return LT_OK;
}

static lt_status sim_set_device(int index) {
  LT_TRY(check_device("set_device", index));
  current_device = index;
  return LT_OK;
}

static lt_status sim_synchronize(void) { return LT_OK; }
static const char *sim_last_alloc_error(void) { return NULL; }

/* ---- streams: ids 1..SIM_STREAMS per device, 0 the default ---- */

static lt_status check_stream(const char *fn, int device, lt_cuda_stream stream) {
  LT_TRY(check_device(fn, device));
  if (stream > SIM_STREAMS)
    return lt_error(LT_ERR_ARG, "cuda.%s: unknown stream %llu", fn, (unsigned long long)stream);
  return LT_OK;
}

static lt_status sim_stream_new(int device, lt_cuda_stream *out) {
  *out = 0;
  LT_TRY(check_device("stream_new", device));
  *out = 1 + next_stream[device]++ % SIM_STREAMS;
  return LT_OK;
}

static lt_cuda_stream sim_current_stream(int device) {
  return device >= 0 && device < lt_cuda_device_count() ? current_stream[device] : 0;
}

static lt_status sim_set_stream(int device, lt_cuda_stream stream) {
  LT_TRY(check_stream("set_stream", device, stream));
  current_stream[device] = stream;
  return LT_OK;
}

static lt_status sim_stream_synchronize(int device, lt_cuda_stream stream) {
  return check_stream("stream_synchronize", device, stream);
}

static lt_status sim_stream_query(int device, lt_cuda_stream stream, bool *done) {
  *done = true;
  return check_stream("stream_query", device, stream);
}

static lt_status sim_stream_wait_stream(int device, lt_cuda_stream waiter, lt_cuda_stream other) {
  LT_TRY(check_stream("stream_wait_stream", device, waiter));
  return check_stream("stream_wait_stream", device, other);
}

/* ---- events: done when recorded; timing from the host clock ---- */

struct lt_cuda_event {
  int device;
  bool timing, recorded;
  double ms;
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static lt_status sim_event_new(int device, bool enable_timing, lt_cuda_event **out) {
  *out = NULL;
  LT_TRY(check_device("event_new", device));
  lt_cuda_event *e = calloc(1, sizeof *e);
  if (!e) return lt_error(LT_ERR_OOM, "cuda.event_new: out of host memory");
  e->device = device;
  e->timing = enable_timing;
  *out = e;
  return LT_OK;
}

static void sim_event_free(lt_cuda_event *event) { free(event); }
static int sim_event_device(const lt_cuda_event *event) { return event ? event->device : -1; }

static lt_status sim_event_record(lt_cuda_event *event, lt_cuda_stream stream) {
  LT_TRY(check_stream("event_record", event->device, stream));
  event->recorded = true;
  event->ms = now_ms();
  return LT_OK;
}

static lt_status sim_event_synchronize(lt_cuda_event *event) {
  (void)event;
  return LT_OK;
}

static lt_status sim_event_query(lt_cuda_event *event, bool *done) {
  (void)event;
  *done = true;
  return LT_OK;
}

static lt_status sim_event_elapsed_ms(lt_cuda_event *start, lt_cuda_event *end, double *ms) {
  *ms = 0.0;
  if (!start->timing || !end->timing)
    return lt_error(LT_ERR_ARG, "cuda.elapsed_time: both events need enable_timing=true");
  if (!start->recorded || !end->recorded)
    return lt_error(LT_ERR_ARG, "cuda.elapsed_time: both events must be recorded first");
  *ms = end->ms - start->ms;
  return LT_OK;
}

static lt_status sim_stream_wait_event(int device, lt_cuda_stream stream, lt_cuda_event *event) {
  (void)event;
  return check_stream("stream_wait_event", device, stream);
}

static const lt_cuda_hooks sim_hooks = {
    "simulated", true, sim_device_count, sim_current_device, sim_set_device, sim_synchronize,
    sim_last_alloc_error, sim_stream_new, sim_current_stream, sim_set_stream,
    sim_stream_synchronize, sim_stream_query, sim_stream_wait_stream, sim_event_new,
    sim_event_free, sim_event_device, sim_event_record, sim_event_synchronize,
    sim_event_query, sim_event_elapsed_ms, sim_stream_wait_event,
};

__attribute__((constructor)) static void install_sim_hooks(void) { lt_cuda_set_hooks(&sim_hooks); }
