// Copy (device<->device with broadcasting and conversion, host<->device),
// fill and single-element reads.
//
// ops/ sends every copy that touches a CUDA tensor here, whichever side is
// the host. Host<->device goes straight through cudaMemcpyAsync when both
// sides are contiguous views of one dtype and one shape; anything else is
// staged: the
// host side through a contiguous host temporary (the CPU backend does the
// gathering), the device side through a contiguous device temporary (the
// kernel below does broadcasting and conversion), so the bus only ever moves
// dense bytes.
//
// Everything is queued on the current stream of the device doing the work
// (cuda_stream()). A blocking copy that involves the host (copy_ without
// non_blocking, item) synchronizes that stream before returning, as PyTorch
// does: the host may then read what was written and reuse what was read.
// It waits for that stream only: a tensor produced on another stream must be
// waited for by the caller (stream_wait_stream, an event), as in PyTorch.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_kernels.h"

#define GRID_STRIDE_LOOP(i, n)                                                        \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);          \
       i += (int64_t)blockDim.x * gridDim.x)

// Same dtype: move the element's bytes, so values (NaN payloads included)
// come through bit for bit.
template <typename T> __global__ void move_kernel(cuda_geom g) {
  GRID_STRIDE_LOOP(i, g.numel) {
    int64_t off[CUDA_MAX_OPS];
    cuda_geom_offsets(g, i, off);
    *(T *)(g.data[0] + off[0]) = *(const T *)(g.data[1] + off[1]);
  }
}

// Conversions go through the source's compute type, so each value is rounded
// once (int64 -> float32 directly, not via double), as on the CPU.
template <typename C> __global__ void convert_kernel(cuda_geom g) {
  GRID_STRIDE_LOOP(i, g.numel) {
    int64_t off[CUDA_MAX_OPS];
    cuda_geom_offsets(g, i, off);
    cuda_store<C>(g.data[0] + off[0], g.dtype[0], cuda_load<C>(g.data[1] + off[1], g.dtype[1]));
  }
}

__global__ void fill_kernel(cuda_geom g, double value) {
  GRID_STRIDE_LOOP(i, g.numel) {
    int64_t off[CUDA_MAX_OPS];
    cuda_geom_offsets(g, i, off);
    cuda_store<double>(g.data[0] + off[0], g.dtype[0], value);
  }
}

static bool on_cuda(const lt_tensor *t) { return t->storage->device.type == LT_DEVICE_CUDA; }

static bool same_shape(const lt_tensor *a, const lt_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

// dst and src both on one CUDA device.
static lt_status device_copy(lt_tensor *dst, const lt_tensor *src) {
  const int64_t n = lt_numel(dst);
  if (n == 0) return LT_OK;
  cuda_device_guard guard(dst->storage->device);
  const cudaStream_t stream = cuda_stream();
  if (dst->dtype == src->dtype && same_shape(dst, src) && lt_is_contiguous(dst) &&
      lt_is_contiguous(src)) {
    if (cuda_bytes(dst) == cuda_bytes(src)) return LT_OK; // copy_ onto itself
    CUDA_TRY("copy_", cudaMemcpyAsync(cuda_bytes(dst), cuda_bytes(src), lt_nbytes(dst),
                                      cudaMemcpyDeviceToDevice, stream));
    return LT_OK;
  }
  const lt_tensor *ops[2] = {dst, src};
  cuda_geom g;
  cuda_geom_init(&g, ops, 2);
  const unsigned blocks = cuda_blocks_for(g.numel);
  if (dst->dtype == src->dtype) {
    switch (lt_dtype_size(dst->dtype)) {
      case 1: move_kernel<uint8_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
      case 2: move_kernel<uint16_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
      case 4: move_kernel<uint32_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
      default: move_kernel<uint64_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    }
    return cuda_check_launch("copy_", "move_kernel");
  }
  switch (src->dtype) {
    case LT_FLOAT64: convert_kernel<double><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    case LT_FLOAT32:
    case LT_FLOAT16:
    case LT_BFLOAT16: convert_kernel<float><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    default: convert_kernel<int64_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
  }
  return cuda_check_launch("copy_", "convert_kernel");
}

// ---- staging between host and device ----

// A view like t over other memory: same shape, strides and dtype, first
// element at data + offset elements, on dev. Kernels and the geometry read
// only these fields.
struct staged_view {
  lt_storage storage;
  lt_tensor tensor;
};

static void stage_view(staged_view *v, const lt_tensor *like, char *data, int64_t offset,
                       lt_device dev, bool contiguous) {
  memset(v, 0, sizeof *v);
  v->storage.refcount = 1;
  v->storage.data = data;
  v->storage.device = dev;
  v->tensor = *like;
  v->tensor.refcount = 1;
  v->tensor.storage = &v->storage;
  v->tensor.offset = offset;
  v->tensor.grad = NULL;
  v->tensor.autograd = NULL;
  if (contiguous) {
    int64_t st = 1;
    for (int d = like->ndim - 1; d >= 0; d--) {
      v->tensor.stride[d] = st;
      st *= like->shape[d];
    }
  }
}

// The bytes a view touches, relative to its first element: [lo, hi).
static void view_span(const lt_tensor *t, int64_t *lo, int64_t *hi) {
  const int64_t es = (int64_t)lt_dtype_size(t->dtype);
  *lo = 0;
  *hi = es;
  for (int d = 0; d < t->ndim; d++) {
    const int64_t reach = (t->shape[d] - 1) * t->stride[d] * es;
    if (reach < 0) *lo += reach;
    else *hi += reach;
  }
}

// Scatters n dense elements of es bytes into the strided host view t.
static void host_scatter(const lt_tensor *t, const char *src) {
  const int64_t n = lt_numel(t), es = (int64_t)lt_dtype_size(t->dtype);
  char *base = cuda_bytes(t);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
      off += (rest % t->shape[d]) * t->stride[d];
      rest /= t->shape[d];
    }
    memcpy(base + off * es, src + i * es, (size_t)es);
  }
}

// Host src -> CUDA dst.
static lt_status upload(lt_tensor *dst, const lt_tensor *src) {
  cuda_device_guard guard(dst->storage->device);
  if (lt_numel(dst) == 0) return LT_OK;
  const cudaStream_t stream = cuda_stream();
  const bool direct = dst->dtype == src->dtype && same_shape(dst, src) &&
                      lt_is_contiguous(dst) && lt_is_contiguous(src);
  if (direct) {
    // Blocking: the host buffer may be changed or freed as soon as this
    // returns. From pageable memory the runtime has staged the bytes when
    // cudaMemcpyAsync returns, but from pinned memory (a blocking copy_ of a
    // pinned tensor) the DMA engine reads it later: the stream is waited for.
    CUDA_TRY("copy_", cudaMemcpyAsync(cuda_bytes(dst), cuda_bytes(src), lt_nbytes(dst),
                                      cudaMemcpyHostToDevice, stream));
    CUDA_TRY("copy_", cudaStreamSynchronize(stream));
    return LT_OK;
  }
  // Move the span of host bytes src covers, unchanged, into a device buffer
  // and let the device kernel gather, broadcast and convert from it: no host
  // loop, and a broadcast source crosses the bus once. (A narrow view of a
  // large host tensor moves its whole span; fine for a first version.)
  int64_t lo, hi;
  view_span(src, &lo, &hi);
  void *buf;
  lt_block *block;
  LT_TRY(lt_alloc(dst->storage->device, (size_t)(hi - lo), LT_CAT_OTHER, &buf, &block));
  lt_status st = LT_OK;
  cudaError_t e = cudaMemcpyAsync(buf, cuda_bytes(src) + lo, (size_t)(hi - lo),
                                  cudaMemcpyHostToDevice, stream);
  if (e != cudaSuccess) st = cuda_fail("copy_", "cudaMemcpyAsync(HostToDevice)", e);
  // Waited for before the kernel is queued (for the same reason as above):
  // once the host bytes are on the device, the gather can run on its own.
  if (st == LT_OK && (e = cudaStreamSynchronize(stream)) != cudaSuccess)
    st = cuda_fail("copy_", "cudaStreamSynchronize", e);
  if (st == LT_OK) {
    staged_view v;
    stage_view(&v, src, (char *)buf, -lo / (int64_t)lt_dtype_size(src->dtype), dst->storage->device, false);
    st = device_copy(dst, &v.tensor);
  }
  // The caching allocator may hand the buffer out again at once, but only to
  // an allocation on this stream (it was allocated here), whose work runs
  // after the gather kernel: no wait is needed.
  lt_free(block);
  return st;
}

// CUDA src -> host dst.
static lt_status download(lt_tensor *dst, const lt_tensor *src) {
  cuda_device_guard guard(src->storage->device);
  if (lt_numel(dst) == 0) return LT_OK;
  const cudaStream_t stream = cuda_stream();
  const bool direct = dst->dtype == src->dtype && same_shape(dst, src) &&
                      lt_is_contiguous(dst) && lt_is_contiguous(src);
  if (direct) {
    // Blocking: queued after the kernels of this stream that produce src,
    // and waited for, so that the host reads the bytes when this returns.
    CUDA_TRY("copy_", cudaMemcpyAsync(cuda_bytes(dst), cuda_bytes(src), lt_nbytes(dst),
                                      cudaMemcpyDeviceToHost, stream));
    CUDA_TRY("copy_", cudaStreamSynchronize(stream));
    return LT_OK;
  }
  // Broadcast and convert on the device into a dense buffer of dst's shape
  // and dtype, then move those bytes; a strided dst is scattered on the host.
  const size_t nbytes = lt_nbytes(dst);
  void *buf;
  lt_block *block;
  LT_TRY(lt_alloc(src->storage->device, nbytes, LT_CAT_OTHER, &buf, &block));
  staged_view v;
  stage_view(&v, dst, (char *)buf, 0, src->storage->device, true);
  lt_status st = device_copy(&v.tensor, src);
  const bool dense = lt_is_contiguous(dst);
  char *host = NULL;
  if (st == LT_OK && !dense) {
    host = (char *)malloc(nbytes);
    if (!host) st = lt_error(LT_ERR_OOM, "cuda: copy_: no host memory for a %zu-byte staging buffer", nbytes);
  }
  if (st == LT_OK) {
    // The conversion kernel (device_copy, same device, same stream) runs
    // first; the host touches the bytes only after the wait.
    cudaError_t e = cudaMemcpyAsync(dense ? cuda_bytes(dst) : host, buf, nbytes,
                                    cudaMemcpyDeviceToHost, stream);
    if (e != cudaSuccess) st = cuda_fail("copy_", "cudaMemcpyAsync(DeviceToHost)", e);
    else if ((e = cudaStreamSynchronize(stream)) != cudaSuccess)
      st = cuda_fail("copy_", "cudaStreamSynchronize", e);
  }
  if (st == LT_OK && !dense) host_scatter(dst, host);
  free(host);
  lt_free(block);
  return st;
}

// A new event (no timing) recorded on stream of dev, with dev made current:
// an event belongs to the device current when it is made and may be
// recorded only on a stream of that device (and stream 0 means the current
// device's).
static lt_status record_on(lt_device dev, cudaStream_t stream, cudaEvent_t *out) {
  *out = NULL;
  cuda_device_guard guard(dev);
  if (guard.error != cudaSuccess) return cuda_fail("copy_", guard.error_call, guard.error);
  cudaEvent_t ev;
  CUDA_TRY("copy_", cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  const cudaError_t e = cudaEventRecord(ev, stream);
  if (e != cudaSuccess) {
    (void)cudaEventDestroy(ev);
    return cuda_fail("copy_", "cudaEventRecord", e);
  }
  *out = ev;
  return LT_OK;
}

// Queues on stream (of dev) a wait for ev, then destroys ev: the runtime
// keeps an event alive while a stream still waits on it.
static lt_status wait_and_destroy(lt_device dev, cudaStream_t stream, cudaEvent_t ev) {
  cuda_device_guard guard(dev);
  lt_status st = LT_OK;
  cudaError_t e = guard.error;
  if (e != cudaSuccess)
    st = cuda_fail("copy_", guard.error_call, e);
  else if ((e = cudaStreamWaitEvent(stream, ev, 0)) != cudaSuccess)
    st = cuda_fail("copy_", "cudaStreamWaitEvent", e);
  if ((e = cudaEventDestroy(ev)) != cudaSuccess && st == LT_OK)
    st = cuda_fail("copy_", "cudaEventDestroy", e);
  return st;
}

// Moves nbytes from sdata on sd to dbuf on dd with cudaMemcpyPeerAsync on
// dd's current stream, fenced both ways against sd's current stream:
//   before the move, dd's stream waits for what sd's stream has queued so far
//   (the kernels that wrote src, the staging copy of a strided src);
//   after it, sd's stream waits for the move, so that nothing queued there
//   later overtakes the read: a write to src, or the reuse of src's or the
//   staging buffer's block, which the caching allocator hands out again only
//   to allocations on sd's stream (where both were allocated).
// dbuf was allocated on dd's stream and dst is written there next, so that
// side is ordered by stream order alone. Nothing here blocks the host. As
// for any op, the current streams are the only ones considered: work on
// src queued on some other stream of sd is the caller's to wait for, and a
// src allocated on another stream of sd is the caller's to mark with
// record_stream before it is freed (PyTorch's rules too).
static lt_status peer_move(void *dbuf, lt_device dd, const void *sdata, lt_device sd,
                           size_t nbytes) {
  const cudaStream_t ss = cuda_stream_of(sd.index), ds = cuda_stream_of(dd.index);
  cudaEvent_t src_ready, moved;
  LT_TRY(record_on(sd, ss, &src_ready));
  LT_TRY(wait_and_destroy(dd, ds, src_ready));
  {
    cuda_device_guard guard(dd);
    if (guard.error != cudaSuccess) return cuda_fail("copy_", guard.error_call, guard.error);
    CUDA_TRY("copy_", cudaMemcpyPeerAsync(dbuf, dd.index, sdata, sd.index, nbytes, ds));
  }
  lt_status st = record_on(dd, ds, &moved);
  if (st == LT_OK) st = wait_and_destroy(sd, ss, moved);
  if (st != LT_OK) {
    // The move is queued but sd's stream could not be fenced after it: wait
    // for it here instead, so that the caller may give back the buffers it
    // reads. The error already reported is the one that matters.
    cuda_device_guard guard(dd);
    (void)cudaStreamSynchronize(ds);
    (void)cudaGetLastError();
  }
  return st;
}

// Between two CUDA devices: src made dense on its own device (unless it is),
// its bytes moved with cudaMemcpyPeerAsync (over NVLink or PCIe, through the
// host when the devices have no peer access; peer_move orders it against
// both devices' current streams), then broadcast and converted into dst on
// dst's device by the same kernels as a same-device copy.
static lt_status peer_copy(lt_tensor *dst, const lt_tensor *src) {
  if (lt_numel(dst) == 0) return LT_OK;
  const lt_device sd = src->storage->device, dd = dst->storage->device;
  const size_t nbytes = lt_nbytes(src);
  lt_status st = LT_OK;
  lt_block *sblock = NULL, *dblock = NULL;
  const char *sdata = cuda_bytes(src);
  if (!lt_is_contiguous(src)) {
    // Allocated on, and written by a kernel on, sd's current stream.
    void *sbuf;
    LT_TRY(lt_alloc(sd, nbytes, LT_CAT_OTHER, &sbuf, &sblock));
    staged_view v;
    stage_view(&v, src, (char *)sbuf, 0, sd, true);
    st = device_copy(&v.tensor, src);
    sdata = (const char *)sbuf;
  }
  void *dbuf = NULL;
  if (st == LT_OK) st = lt_alloc(dd, nbytes, LT_CAT_OTHER, &dbuf, &dblock);
  if (st == LT_OK) st = peer_move(dbuf, dd, sdata, sd, nbytes);
  if (st == LT_OK) {
    staged_view v;
    stage_view(&v, src, (char *)dbuf, 0, dd, true);
    st = device_copy(dst, &v.tensor); // on dd's current stream, after the move
  }
  // Both buffers may go back to their pools at once: each is handed out
  // again only on the stream it was allocated on, which the fences above
  // order after the move (and dd's after the gather into dst).
  if (dblock) lt_free(dblock);
  if (sblock) lt_free(sblock);
  return st;
}

lt_status cuda_copy(lt_tensor *dst, const lt_tensor *src) {
  const bool d = on_cuda(dst), s = on_cuda(src);
  if (d && s) {
    if (dst->storage->device.index != src->storage->device.index) return peer_copy(dst, src);
    return device_copy(dst, src);
  }
  if (d) return upload(dst, src);
  if (s) return download(dst, src);
  return cuda_not_implemented("copy_ between two host tensors"); // ops/ never sends one
}

void cuda_wait_pending_copy(void *event) {
  cudaEvent_t e = (cudaEvent_t)event;
  (void)cudaEventSynchronize(e);
  (void)cudaEventDestroy(e);
  (void)cudaGetLastError(); // a failed wait (a dead context) must not poison the next call
}

// Marks host storage s as in use by the copy just queued on stream: an event
// after it, waited for when s is released (lt_storage_release), so that the
// pinned pool never hands out pages a copy still reads or writes. A storage
// keeps one event, so a newer one must also cover the older: when the older
// has not completed (it may be on another stream, even another device's),
// stream waits for it before the new event is recorded. That delays later
// work on stream only behind a copy of the same host pages that is still in
// flight, which the host would have had to wait for anyway.
static lt_status mark_pending(lt_storage *s, cudaStream_t stream) {
  cudaEvent_t old = (cudaEvent_t)s->pending_copy;
  if (old) {
    const cudaError_t q = cudaEventQuery(old);
    if (q == cudaErrorNotReady) {
      (void)cudaGetLastError(); // an answer, not an error
      CUDA_TRY("copy_", cudaStreamWaitEvent(stream, old, 0));
    } else if (q != cudaSuccess) {
      return cuda_fail("copy_", "cudaEventQuery", q);
    }
  }
  cudaEvent_t e;
  CUDA_TRY("copy_", cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  cudaError_t r = cudaEventRecord(e, stream);
  if (r != cudaSuccess) {
    (void)cudaEventDestroy(e);
    return cuda_fail("copy_", "cudaEventRecord", r);
  }
  if (old) (void)cudaEventDestroy(old); // the wait above keeps it alive as needed
  s->pending_copy = (void *)e;
  return LT_OK;
}

// non_blocking (lt_to_device_ex): a dense copy between pinned host memory and
// a device is queued with cudaMemcpyAsync on the device's current stream and
// returns at once; every other copy blocks as copy_ does (pageable memory
// cannot be read by the DMA engine after the call returns, so the driver
// would stage it synchronously anyway).
lt_status cuda_copy_non_blocking(lt_tensor *dst, const lt_tensor *src) {
  const bool d = on_cuda(dst), s = on_cuda(src);
  const lt_tensor *host = d && !s ? src : (!d && s ? dst : NULL);
  if (!host || !host->storage->pinned || dst->dtype != src->dtype || !same_shape(dst, src) ||
      !lt_is_contiguous(dst) || !lt_is_contiguous(src))
    return cuda_copy(dst, src);
  cuda_device_guard guard((d ? dst : src)->storage->device);
  if (lt_numel(dst) == 0) return LT_OK;
  const cudaStream_t stream = cuda_stream();
  CUDA_TRY("copy_", cudaMemcpyAsync(cuda_bytes(dst), cuda_bytes(src), lt_nbytes(dst),
                                    d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                    stream));
  // The event goes on the stream the copy was queued on: only then does its
  // completion mean the copy is done.
  return mark_pending(host->storage, stream);
}

lt_status cuda_fill(lt_tensor *dst, double value) {
  const int64_t n = lt_numel(dst);
  if (n == 0) return LT_OK;
  cuda_device_guard guard(dst->storage->device);
  const cudaStream_t stream = cuda_stream();
  if (value == 0.0 && !signbit(value) && lt_is_contiguous(dst)) {
    // Zero is all-zero bytes in every dtype: the common zero_() is a memset.
    CUDA_TRY("fill_", cudaMemsetAsync(cuda_bytes(dst), 0, lt_nbytes(dst), stream));
    return LT_OK;
  }
  const lt_tensor *ops[1] = {dst};
  cuda_geom g;
  cuda_geom_init(&g, ops, 1);
  // Converted on the device with the same rules as lt_store_double (16-bit
  // floats through float), so a fill gives the same bits on both devices.
  fill_kernel<<<cuda_blocks_for(g.numel), CUDA_THREADS, 0, stream>>>(g, value);
  return cuda_check_launch("fill_", "fill_kernel");
}

// item(): the host needs the value, so the read is queued after the work of
// the current stream and waited for.
lt_status cuda_read_element(const lt_tensor *t, void *host_dst) {
  cuda_device_guard guard(t->storage->device);
  const cudaStream_t stream = cuda_stream();
  CUDA_TRY("item", cudaMemcpyAsync(host_dst, cuda_bytes(t), lt_dtype_size(t->dtype),
                                   cudaMemcpyDeviceToHost, stream));
  CUDA_TRY("item", cudaStreamSynchronize(stream));
  return LT_OK;
}
