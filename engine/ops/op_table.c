/* The elementwise ops' rows of lt/ops.h as data: names, in-place names (a
 * storage keeps its last writer's name, so they are static strings),
 * autograd node names and properties. */
#include <assert.h>

#include "ops/op_table.h"

#define KIND_ARITH OPS_BINARY_ARITH
#define KIND_DIVIDE OPS_BINARY_DIVIDE
#define KIND_COMPARE OPS_BINARY_COMPARE
#define KIND_INTEGRAL OPS_BINARY_INTEGRAL
#define KIND_GRAD OPS_BINARY_GRAD
#define AUTOCAST_ANY false
#define AUTOCAST_FLOAT32 true
#define DTYPE_KEEP false
#define DTYPE_FLOAT true
#define SAVES_NOTHING OPS_SAVES_NOTHING
#define SAVES_INPUT OPS_SAVES_INPUT
#define SAVES_RESULT OPS_SAVES_RESULT

#define BINARY_ROW(ID, name, Node, kind, autocast) \
  [LT_OP_##ID] = {#name, #name "_", #Node, KIND_##kind, AUTOCAST_##autocast},
#define UNARY_ROW(ID, name, Node, dtype, saves, autocast) \
  [LT_OP_##ID] = {#name, #name "_", #Node, DTYPE_##dtype, SAVES_##saves, AUTOCAST_##autocast},

static const ops_binary_row binary_rows[] = {LT_BINARY_OPS(BINARY_ROW)};
static const ops_unary_row unary_rows[] = {LT_UNARY_OPS(UNARY_ROW)};

static_assert(sizeof binary_rows / sizeof binary_rows[0] == LT_NBINARY, "a row per binary op");
static_assert(sizeof unary_rows / sizeof unary_rows[0] == LT_NUNARY, "a row per unary op");

const ops_binary_row *ops_binary_row_of(lt_binary_op op) {
  return (unsigned)op < LT_NBINARY ? &binary_rows[op] : NULL;
}

const ops_unary_row *ops_unary_row_of(lt_unary_op op) {
  return (unsigned)op < LT_NUNARY ? &unary_rows[op] : NULL;
}

const char *lt_binary_op_name(lt_binary_op op) {
  const ops_binary_row *r = ops_binary_row_of(op);
  return r ? r->name : "unknown";
}

const char *lt_binary_op_inplace_name(lt_binary_op op) {
  const ops_binary_row *r = ops_binary_row_of(op);
  return r ? r->inplace_name : "unknown_";
}

const char *lt_unary_op_name(lt_unary_op op) {
  const ops_unary_row *r = ops_unary_row_of(op);
  return r ? r->name : "unknown";
}

const char *lt_unary_op_inplace_name(lt_unary_op op) {
  const ops_unary_row *r = ops_unary_row_of(op);
  return r ? r->inplace_name : "unknown_";
}

bool lt_binary_is_comparison(lt_binary_op op) {
  const ops_binary_row *r = ops_binary_row_of(op);
  return r && r->kind == OPS_BINARY_COMPARE;
}

bool lt_binary_is_method(lt_binary_op op) {
  const ops_binary_row *r = ops_binary_row_of(op);
  return r && r->kind != OPS_BINARY_GRAD;
}
