/* The lt engine: include this one header. */
#ifndef LT_LT_H
#define LT_LT_H

#include "lt/alloc.h"
#include "lt/attention.h"
#include "lt/autocast.h"
#include "lt/autograd.h"
#include "lt/device.h"
#include "lt/dtype.h"
#include "lt/error.h"
#include "lt/nn.h"
#include "lt/ops.h"
#include "lt/print.h"
#include "lt/rng.h"
#include "lt/sort.h"
#include "lt/tensor.h"
#include "lt/threads.h"

#define LT_VERSION "0.1.0"

#endif
