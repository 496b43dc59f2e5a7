/* Printing tensors in PyTorch's style. */
#ifndef LT_PRINT_H
#define LT_PRINT_H

#include "lt/api.h"

#include "lt/tensor.h"

/* Writes t as PyTorch prints it ("tensor([[1., 2.],\n        [3., 4.]])"),
 * summarised with "..." beyond 1000 elements (3 edge items per dimension),
 * with ", dtype=..." when not float32 / int64 as PyTorch does, and
 * ", device='cuda:0'" off the CPU. Returns a malloc'ed string (caller frees),
 * or NULL with an error set. */
LT_API char *lt_tensor_to_string(const lt_tensor *t);

#endif
