/* What an estimate (lt.memory.estimate) does to .grad slots, undone at its
 * end: the first change of each tensor's slot notes the tensor and the
 * gradient it held, and lt_grad_journal_restore puts every noted gradient
 * back (dropping what the estimate left there, which holds no data). A
 * gradient that only its slot held would have been freed by the change in a
 * real run: the estimate's allocator counts it freed although the journal
 * keeps it. */
#include <stdlib.h>

#include "lt/alloc.h"
#include "lt/autograd.h"

typedef struct journal_entry {
  lt_tensor *tensor;
  lt_tensor *old_grad; /* NULL: the slot was empty */
} journal_entry;

static journal_entry *entries;
static size_t count, capacity;

static bool noted(const lt_tensor *t) {
  for (size_t i = count; i-- > 0;)
    if (entries[i].tensor == t) return true;
  return false;
}

lt_status lt_grad_journal_note(lt_tensor *t) {
  if (!lt_estimating() || noted(t)) return LT_OK;
  if (count == capacity) {
    size_t cap = capacity ? capacity * 2 : 64;
    journal_entry *grown = realloc(entries, cap * sizeof *grown);
    if (!grown) return lt_error(LT_ERR_OOM, "estimate: out of host memory for the gradient journal");
    entries = grown;
    capacity = cap;
  }
  lt_tensor *old = t->grad;
  if (old) {
    if (old->refcount == 1 && old->storage->refcount == 1 && !old->storage->meta)
      lt_alloc_estimate_count_free(old->storage->block);
    lt_tensor_retain(old);
  }
  lt_tensor_retain(t);
  entries[count++] = (journal_entry){t, old};
  return LT_OK;
}

void lt_grad_journal_restore(void) {
  /* Newest first, so that the oldest note of a slot wins. */
  for (size_t i = count; i-- > 0;) {
    lt_tensor *t = entries[i].tensor;
    lt_tensor *left = t->grad;
    t->grad = entries[i].old_grad;
    if (left) lt_tensor_release(left);
    lt_tensor_release(t);
  }
  count = 0;
}
