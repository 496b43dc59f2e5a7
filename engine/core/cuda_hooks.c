/* The CUDA slot when lt is built without the toolkit: no devices. */
#include <stddef.h>

#include "lt/cuda.h"

bool lt_cuda_compiled(void) { return false; }
int lt_cuda_device_count(void) { return 0; }
bool lt_cuda_is_available(void) { return false; }
int lt_cuda_current_device(void) { return 0; }

lt_status lt_cuda_set_device(int index) {
  return lt_error(LT_ERR_DEVICE, "cuda.set_device: lt was built without CUDA (device %d)", index);
}

lt_status lt_cuda_synchronize(void) { return LT_OK; }

const char *lt_cuda_last_alloc_error(void) { return NULL; }

/* ---- streams and events: every call fails as lt/cuda.h says; the out
 * parameters are still set, so that a caller that ignores the status reads
 * a harmless value (stream 0, no event, done). ---- */

static lt_status no_cuda(const char *fn) {
  return lt_error(LT_ERR_DEVICE, "cuda.%s: lt was built without CUDA", fn);
}

lt_status lt_cuda_stream_new(int device, lt_cuda_stream *out) {
  (void)device;
  *out = 0;
  return no_cuda("stream_new");
}

lt_cuda_stream lt_cuda_current_stream(int device) {
  (void)device;
  return 0;
}

lt_status lt_cuda_set_stream(int device, lt_cuda_stream stream) {
  (void)device;
  (void)stream;
  return no_cuda("set_stream");
}

lt_status lt_cuda_stream_synchronize(int device, lt_cuda_stream stream) {
  (void)device;
  (void)stream;
  return no_cuda("stream_synchronize");
}

lt_status lt_cuda_stream_query(int device, lt_cuda_stream stream, bool *done) {
  (void)device;
  (void)stream;
  *done = true;
  return no_cuda("stream_query");
}

lt_status lt_cuda_stream_wait_stream(int device, lt_cuda_stream waiter, lt_cuda_stream other) {
  (void)device;
  (void)waiter;
  (void)other;
  return no_cuda("stream_wait_stream");
}

lt_status lt_cuda_event_new(int device, bool enable_timing, lt_cuda_event **out) {
  (void)device;
  (void)enable_timing;
  *out = NULL;
  return no_cuda("event_new");
}

/* No event can exist without CUDA; NULL is accepted as everywhere. */
void lt_cuda_event_free(lt_cuda_event *event) { (void)event; }

int lt_cuda_event_device(const lt_cuda_event *event) {
  (void)event;
  return -1;
}

lt_status lt_cuda_event_record(lt_cuda_event *event, lt_cuda_stream stream) {
  (void)event;
  (void)stream;
  return no_cuda("event_record");
}

lt_status lt_cuda_event_synchronize(lt_cuda_event *event) {
  (void)event;
  return no_cuda("event_synchronize");
}

lt_status lt_cuda_event_query(lt_cuda_event *event, bool *done) {
  (void)event;
  *done = true;
  return no_cuda("event_query");
}

lt_status lt_cuda_event_elapsed_ms(lt_cuda_event *start, lt_cuda_event *end, double *ms) {
  (void)start;
  (void)end;
  *ms = 0.0;
  return no_cuda("event_elapsed_ms");
}

lt_status lt_cuda_stream_wait_event(int device, lt_cuda_stream stream, lt_cuda_event *event) {
  (void)device;
  (void)stream;
  (void)event;
  return no_cuda("stream_wait_event");
}
