/* lt/cuda.h: each function calls the hooks installed now (core/cuda_hooks.h).
 * The default hooks are a slot without CUDA: no devices, and every stream or
 * event call fails as lt/cuda.h says. */
#include <stddef.h>

#include "core/cuda_hooks.h"

/* A CUDA build installs the runtime's hooks, so the slot without CUDA exists only in a
 * build without it. */
#if !LT_HAVE_CUDA
static int none_device_count(void) { return 0; }
static int none_current_device(void) { return 0; }

static lt_status none_set_device(int index) {
  return lt_error(LT_ERR_DEVICE, "cuda.set_device: lt was built without CUDA (device %d)", index);
}

static lt_status none_synchronize(void) { return LT_OK; }

static const char *none_last_alloc_error(void) { return NULL; }

/* ---- streams and events: every call fails as lt/cuda.h says; the out
 * parameters are still set, so that a caller that ignores the status reads
 * a harmless value (stream 0, no event, done). ---- */

static lt_status no_cuda(const char *fn) {
  return lt_error(LT_ERR_DEVICE, "cuda.%s: lt was built without CUDA", fn);
}

static lt_status none_stream_new(int device, lt_cuda_stream *out) {
  (void)device;
  *out = 0;
  return no_cuda("stream_new");
}

static lt_cuda_stream none_current_stream(int device) {
  (void)device;
  return 0;
}

static lt_status none_set_stream(int device, lt_cuda_stream stream) {
  (void)device;
  (void)stream;
  return no_cuda("set_stream");
}

static lt_status none_stream_synchronize(int device, lt_cuda_stream stream) {
  (void)device;
  (void)stream;
  return no_cuda("stream_synchronize");
}

static lt_status none_stream_query(int device, lt_cuda_stream stream, bool *done) {
  (void)device;
  (void)stream;
  *done = true;
  return no_cuda("stream_query");
}

static lt_status none_stream_wait_stream(int device, lt_cuda_stream waiter, lt_cuda_stream other) {
  (void)device;
  (void)waiter;
  (void)other;
  return no_cuda("stream_wait_stream");
}

static lt_status none_event_new(int device, bool enable_timing, lt_cuda_event **out) {
  (void)device;
  (void)enable_timing;
  *out = NULL;
  return no_cuda("event_new");
}

/* No event can exist without CUDA; NULL is accepted as everywhere. */
static void none_event_free(lt_cuda_event *event) { (void)event; }

static int none_event_device(const lt_cuda_event *event) {
  (void)event;
  return -1;
}

static lt_status none_event_record(lt_cuda_event *event, lt_cuda_stream stream) {
  (void)event;
  (void)stream;
  return no_cuda("event_record");
}

static lt_status none_event_synchronize(lt_cuda_event *event) {
  (void)event;
  return no_cuda("event_synchronize");
}

static lt_status none_event_query(lt_cuda_event *event, bool *done) {
  (void)event;
  *done = true;
  return no_cuda("event_query");
}

static lt_status none_event_elapsed_ms(lt_cuda_event *start, lt_cuda_event *end, double *ms) {
  (void)start;
  (void)end;
  *ms = 0.0;
  return no_cuda("event_elapsed_ms");
}

static lt_status none_stream_wait_event(int device, lt_cuda_stream stream, lt_cuda_event *event) {
  (void)device;
  (void)stream;
  (void)event;
  return no_cuda("stream_wait_event");
}

static const lt_cuda_hooks no_cuda_hooks = {
    "none", false, none_device_count, none_current_device, none_set_device, none_synchronize,
    none_last_alloc_error, none_stream_new, none_current_stream, none_set_stream,
    none_stream_synchronize, none_stream_query, none_stream_wait_stream, none_event_new,
    none_event_free, none_event_device, none_event_record, none_event_synchronize,
    none_event_query, none_event_elapsed_ms, none_stream_wait_event,
};
#endif

static const lt_cuda_hooks *installed;

void lt_cuda_set_hooks(const lt_cuda_hooks *hooks) { installed = hooks; }

/* The hooks in force: those installed, else the build's own. */
static const lt_cuda_hooks *hooks(void) {
  if (!installed) {
#if LT_HAVE_CUDA
    installed = lt_cuda_runtime_hooks();
#else
    installed = &no_cuda_hooks;
#endif
  }
  return installed;
}

/* ---- lt/cuda.h ---- */

bool lt_cuda_compiled(void) { return hooks()->compiled; }
int lt_cuda_device_count(void) { return hooks()->device_count(); }
bool lt_cuda_is_available(void) { return hooks()->compiled && hooks()->device_count() > 0; }
int lt_cuda_current_device(void) { return hooks()->current_device(); }
lt_status lt_cuda_set_device(int index) { return hooks()->set_device(index); }
lt_status lt_cuda_synchronize(void) { return hooks()->synchronize(); }
const char *lt_cuda_last_alloc_error(void) { return hooks()->last_alloc_error(); }

lt_status lt_cuda_stream_new(int device, lt_cuda_stream *out) { return hooks()->stream_new(device, out); }
lt_cuda_stream lt_cuda_current_stream(int device) { return hooks()->current_stream(device); }
lt_status lt_cuda_set_stream(int device, lt_cuda_stream stream) { return hooks()->set_stream(device, stream); }
lt_status lt_cuda_stream_synchronize(int device, lt_cuda_stream stream) {
  return hooks()->stream_synchronize(device, stream);
}
lt_status lt_cuda_stream_query(int device, lt_cuda_stream stream, bool *done) {
  return hooks()->stream_query(device, stream, done);
}
lt_status lt_cuda_stream_wait_stream(int device, lt_cuda_stream waiter, lt_cuda_stream other) {
  return hooks()->stream_wait_stream(device, waiter, other);
}

lt_status lt_cuda_event_new(int device, bool enable_timing, lt_cuda_event **out) {
  return hooks()->event_new(device, enable_timing, out);
}
void lt_cuda_event_free(lt_cuda_event *event) { hooks()->event_free(event); }
int lt_cuda_event_device(const lt_cuda_event *event) { return hooks()->event_device(event); }
lt_status lt_cuda_event_record(lt_cuda_event *event, lt_cuda_stream stream) {
  return hooks()->event_record(event, stream);
}
lt_status lt_cuda_event_synchronize(lt_cuda_event *event) { return hooks()->event_synchronize(event); }
lt_status lt_cuda_event_query(lt_cuda_event *event, bool *done) { return hooks()->event_query(event, done); }
lt_status lt_cuda_event_elapsed_ms(lt_cuda_event *start, lt_cuda_event *end, double *ms) {
  return hooks()->event_elapsed_ms(start, end, ms);
}
lt_status lt_cuda_stream_wait_event(int device, lt_cuda_stream stream, lt_cuda_event *event) {
  return hooks()->stream_wait_event(device, stream, event);
}
