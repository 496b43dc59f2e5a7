/* The CUDA device slot. Built from the .cu files of engine/cuda when the toolkit is found,
 * otherwise from engine/cuda/no_cuda.c; either way lt runs without a GPU. */
#ifndef LT_CUDA_H
#define LT_CUDA_H

#include "lt/api.h"

#include <stdbool.h>
#include <stdint.h>

#include "lt/error.h"

LT_API bool lt_cuda_compiled(void);     /* was lt built with the CUDA backend */
LT_API int lt_cuda_device_count(void);  /* 0 with no driver or no device */
LT_API bool lt_cuda_is_available(void); /* compiled and at least one device */
LT_API int lt_cuda_current_device(void);
LT_API lt_status lt_cuda_set_device(int index);
LT_API lt_status lt_cuda_synchronize(void);

/* TensorFloat-32 tensor-core math for float32 GEMMs (matmul, linear) and for
 * cuDNN convolutions, as torch.backends.cuda.matmul.allow_tf32 and
 * torch.backends.cudnn.allow_tf32. Both are off by default in lt (an opt-in):
 * float32 results then agree with the CPU's to float32 rounding; on, they
 * keep about 10 mantissa bits of each product and run several times faster. */
LT_API void lt_cuda_set_matmul_tf32(bool on);
LT_API bool lt_cuda_matmul_tf32(void);
LT_API void lt_cuda_set_cudnn_tf32(bool on);
LT_API bool lt_cuda_cudnn_tf32(void);

/* ---- streams and events (torch.cuda.Stream, torch.cuda.Event) ----
 * A stream is a queue of device work; work on one stream runs in order, work
 * on two streams may overlap. Each device starts on its default stream, id 0
 * (the legacy default stream). lt_cuda_stream_new hands out one of a pool of
 * 32 non-blocking streams per device, round robin, as PyTorch's stream pool:
 * streams are never destroyed, so an id stays valid for the process and the
 * caching allocator may keep blocks tagged with it. The current stream is
 * per device and process-wide (Lua runs on one thread): every kernel, library
 * call and copy of lt goes to the current stream of its device. Each call
 * fails with LT_ERR_DEVICE when lt has no CUDA or the device is out of
 * range; device is N of cuda:N. */
typedef uintptr_t lt_cuda_stream;
LT_API lt_status lt_cuda_stream_new(int device, lt_cuda_stream *out);
LT_API lt_cuda_stream lt_cuda_current_stream(int device); /* 0 without CUDA */
LT_API lt_status lt_cuda_set_stream(int device, lt_cuda_stream stream);
LT_API lt_status lt_cuda_stream_synchronize(int device, lt_cuda_stream stream);
LT_API lt_status lt_cuda_stream_query(int device, lt_cuda_stream stream, bool *done);
/* Work queued later on waiter waits for the work queued on other so far. */
LT_API lt_status lt_cuda_stream_wait_stream(int device, lt_cuda_stream waiter, lt_cuda_stream other);

typedef struct lt_cuda_event lt_cuda_event; /* a cudaEvent_t and its device */
LT_API lt_status lt_cuda_event_new(int device, bool enable_timing, lt_cuda_event **out);
LT_API void lt_cuda_event_free(lt_cuda_event *event); /* NULL allowed */
LT_API int lt_cuda_event_device(const lt_cuda_event *event);
LT_API lt_status lt_cuda_event_record(lt_cuda_event *event, lt_cuda_stream stream);
LT_API lt_status lt_cuda_event_synchronize(lt_cuda_event *event);
LT_API lt_status lt_cuda_event_query(lt_cuda_event *event, bool *done);
/* Milliseconds between two recorded events made with enable_timing. */
LT_API lt_status lt_cuda_event_elapsed_ms(lt_cuda_event *start, lt_cuda_event *end, double *ms);
/* Work queued later on stream waits for the event's recorded work. */
LT_API lt_status lt_cuda_stream_wait_event(int device, lt_cuda_stream stream, lt_cuda_event *event);

/* The CUDA slot starts (raw allocator and kernel table installed) the first
 * time lt_cuda_device_count finds a device, which every path to a CUDA tensor
 * goes through (device parsing, availability checks). */

/* Why the last cudaMalloc/cudaFree/cudaMemGetInfo of the raw allocator failed
 * ("cuda: cudaMalloc(2097152 bytes): out of memory"), or NULL if none did: the
 * raw allocator can only answer NULL, and an out-of-memory error then says
 * only how many bytes were asked for. */
LT_API const char *lt_cuda_last_alloc_error(void);

#endif
