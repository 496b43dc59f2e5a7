/* Presenting one operand run to a compute loop in the compute kind: directly
 * when it already is a contiguous (or broadcast) run of the kind's C type,
 * else gathered and converted into a stack buffer. The loops then take each
 * input as (pointer, step) with step 1 (a run) or 0 (one repeated value). */
#ifndef LT_CPU_OPERAND_H
#define LT_CPU_OPERAND_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/cpu_convert.h"

/* Whether element i of (p, stride, dt) can be read as kind's C type at
 * p + i * stride without conversion or gathering. */
static inline bool cpu_operand_direct(cpu_kind k, int64_t stride, lt_dtype dt) {
  return dt == cpu_kind_native(k) && (stride == 0 || stride == (int64_t)cpu_kind_size(k));
}

/* A view of n elements of (p, stride, dt) in the kind: returns the pointer
 * and sets *step (0 or 1); uses buf (CPU_BUF elements) when it must. */
static inline const void *cpu_operand_view(cpu_kind k, const char *p, int64_t stride,
                                           lt_dtype dt, int64_t n, void *buf, int64_t *step) {
  *step = stride == 0 ? 0 : 1;
  if (cpu_operand_direct(k, stride, dt)) return p;
  cpu_load(k, buf, p, stride, dt, stride == 0 ? 1 : n);
  return buf;
}

#endif
