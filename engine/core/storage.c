/* Refcounted storages over the caching allocator. */
#include <stdlib.h>

#include "lt/tensor.h"

static void (*pending_wait)(void *marker);

void lt_storage_set_pending_wait(void (*wait)(void *marker)) { pending_wait = wait; }

lt_status lt_storage_new(lt_device dev, size_t nbytes, lt_category cat, lt_storage **out) {
  lt_storage *s = calloc(1, sizeof *s);
  if (!s) return lt_error(LT_ERR_OOM, "out of host memory for a storage header");
  lt_status st = lt_alloc(dev, nbytes, cat, &s->data, &s->block);
  if (st != LT_OK) {
    free(s);
    return st;
  }
  const lt_device pinned = lt_pinned_pool();
  s->pinned = lt_device_eq(dev, pinned);
  s->refcount = 1;
  s->nbytes = nbytes;
  s->meta = lt_estimating();
  s->device = s->pinned ? lt_cpu() : dev; /* pinned tensors are CPU tensors */
  *out = s;
  return LT_OK;
}

void lt_storage_retain(lt_storage *s) { s->refcount++; }

lt_status lt_storage_record_stream(lt_storage *s, lt_stream_id stream) {
  if (!s) return lt_error(LT_ERR_ARG, "record_stream: no storage");
  return lt_block_record_stream(s->block, stream);
}

size_t lt_storage_release(lt_storage *s) {
  if (!s || --s->refcount > 0) return 0;
  if (s->pending_copy && pending_wait) pending_wait(s->pending_copy);
  size_t given_back = lt_free(s->block);
  free(s);
  return given_back;
}
