/* The CPU backend table. */
#include "cpu/cpu_index.h"
#include "cpu/cpu_kernels.h"

const lt_backend lt_cpu_backend = {
    .name = "cpu",
    .binary = cpu_binary,
    .unary = cpu_unary,
    .clamp = cpu_clamp,
    .where = cpu_where,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .read_element = cpu_read_element,
    .reduce = cpu_reduce,
    .reduce_index = cpu_reduce_index,
    .matmul = cpu_matmul,
    .index_select = cpu_index_select,
    .sort = cpu_sort,
    .gather = cpu_gather,
    .scatter = cpu_scatter,
};
