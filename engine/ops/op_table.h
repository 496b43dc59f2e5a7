/* The properties of each elementwise op, from its row in lt/ops.h
 * (ops/op_table.c): what the ops (elementwise.c), their formulas
 * (autograd/formulas_elementwise.c) and autocast read instead of switches
 * of their own. */
#ifndef LT_OPS_OP_TABLE_H
#define LT_OPS_OP_TABLE_H

#include <stdbool.h>

#include "lt/ops.h"

typedef enum { OPS_BINARY_ARITH, OPS_BINARY_DIVIDE, OPS_BINARY_COMPARE, OPS_BINARY_INTEGRAL,
               OPS_BINARY_GRAD } ops_binary_kind;
typedef enum { OPS_SAVES_NOTHING, OPS_SAVES_INPUT, OPS_SAVES_RESULT } ops_saves;

typedef struct ops_binary_row {
  const char *name, *inplace_name, *node_name;
  ops_binary_kind kind;
  bool autocast_float32; /* runs in float32 under autocast */
} ops_binary_row;

typedef struct ops_unary_row {
  const char *name, *inplace_name, *node_name;
  bool float_only; /* integer inputs give float32 */
  ops_saves saves; /* what the backward keeps */
  bool autocast_float32;
} ops_unary_row;

/* The op's row; NULL outside the enum. */
const ops_binary_row *ops_binary_row_of(lt_binary_op op);
const ops_unary_row *ops_unary_row_of(lt_unary_op op);

#endif
