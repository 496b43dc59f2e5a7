/* Grad mode: one flag per thread, on by default (so the zero-initialised
 * thread-local means "enabled"). */
#include "lt/autograd.h"

static _Thread_local bool grad_disabled;

bool lt_is_grad_enabled(void) { return !grad_disabled; }

bool lt_set_grad_enabled(bool enabled) {
  bool previous = !grad_disabled;
  grad_disabled = !enabled;
  return previous;
}
