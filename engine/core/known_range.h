/* Known ranges of int64 storages. Class labels and embedding indices must be
 * range-checked before a kernel reads through them, and on a device that
 * check would copy them to the host each step, making the host wait for the
 * device. Most such tensors reach the device by a host copy (a batch moved
 * with :to("cuda")) or by a gather from one (index_select over a dataset
 * already on the device): the host saw every element on the way, so the
 * storage keeps their least and greatest value, valid until the next
 * in-place write bumps its version (every writer bumps it, as autograd
 * requires). An op that knows bounds of what it wrote notes them too
 * (max_pool2d's indices lie in their input plane). A check whose range holds
 * then reads nothing. */
#ifndef LT_CORE_KNOWN_RANGE_H
#define LT_CORE_KNOWN_RANGE_H

#include <stdbool.h>
#include <stdint.h>

#include "lt/tensor.h"

/* Notes that every element of t's storage lies in [lo, hi] (bounds, not
 * necessarily reached). Ignored unless t is int64 and covers its whole
 * storage contiguously. */
void lt_known_range_note(const lt_tensor *t, int64_t lo, int64_t hi);

/* True when t (int64) is known, without reading it, to hold only values in
 * [lo, hi]. */
bool lt_known_range_within(const lt_tensor *t, int64_t lo, int64_t hi);

/* Likewise, for values in [lo, hi] or equal to except (an ignore_index). */
bool lt_known_range_within_except(const lt_tensor *t, int64_t lo, int64_t hi, int64_t except);

/* dst, a new tensor of elements taken from src's storage (a copy, a gather),
 * gets src's known range, if any. */
void lt_known_range_inherit(const lt_tensor *dst, const lt_tensor *src);

/* Notes the range of t's n elements v (host memory, t's own values, e.g.
 * the source of a host-to-device copy into t), with the bounds of the rest
 * at either end (a second pass, when the values differ). */
void lt_known_range_scan(const lt_tensor *t, const int64_t *v, int64_t n);

#endif
