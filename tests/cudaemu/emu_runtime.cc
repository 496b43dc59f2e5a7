// The CUDA runtime of the emulator (tests only): the cuda* functions lt calls,
// over host memory, and the kernel scheduler behind emu_cuda.h's launch.
//
// Why: no GPU runs lt's CUDA code in CI, and the simulated slot
// (tests/simdev) swaps the kernels for the CPU's. Here lt's own CUDA sources,
// kernels included, run on the CPU, so that a wrong index, a missing
// barrier, a launch on another device's stream or a bad cuBLAS/cuDNN call
// shows up before a GPU ever sees the code.
//
// The model:
// - LT_EMU_CUDA_DEVICES devices (default 2), LT_EMU_CUDA_MEMORY bytes each
//   (default 4 GiB). Device memory is whole pages of host memory, all one
//   bits when fresh, and out of the host's reach except while device work
//   runs (see open_device_memory).
// - Streams are queues (see CUstream_st) and events mark a place in one.
//   Using a stream or event of one device while another is current is an
//   error where CUDA makes it one (kernel launches, event records).
// - A kernel runs block by block; each thread runs on a fiber (a stack of
//   its own) until it waits at __syncthreads or a warp shuffle, and the
//   barrier opens when every thread it names has arrived. Threads that can
//   never meet (a barrier some threads skip, a shuffle with an exited lane)
//   are reported as a launch failure instead of hanging.
// - Errors are kept for cudaGetLastError as the runtime keeps them.
// - LT_EMU_THREAD_ORDER=reverse starts a block's threads last first.
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "emu_cuda.h"

// EMU_ASAN: the program runs under AddressSanitizer, which must be told of
// every stack switch. Set by CMake in sanitizer builds, which compile this
// file itself without instrumentation (the scheduler is most of an emulated
// launch; the kernels it runs are instrumented).
#if defined(__SANITIZE_ADDRESS__) && !defined(EMU_ASAN)
#define EMU_ASAN 1
#endif
#if EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#else
#define EMU_ASAN 0
#endif

// A stream is a queue of work (kernels, copies, fills, waits) that runs in
// order when the host needs it (a synchronize, a blocking copy, a query, a
// wait of another stream's work that reaches it), never sooner: so work that
// the program forgot to order after another stream's, and host memory read
// or written while a copy that uses it is still queued, give wrong results
// instead of working by luck. LT_EMU_STREAMS=eager runs everything at once.
struct CUstream_st {
  int device;
  std::deque<std::function<void()>> queue;
  uint64_t submitted = 0, completed = 0; // work items queued and run
  bool running = false;
};
struct CUevent_st {
  int device;
  unsigned flags;
  bool recorded;
  CUstream_st *stream; // where it was last recorded
  uint64_t seq;        // complete once stream->completed reaches it
};

namespace {

const int max_devices = 8;

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

// The allocation table, the streams and the scheduler. Recursive: running a
// stream's work can run another's (a wait) and check pointers.
std::recursive_mutex state_lock;
using hold_t = std::lock_guard<std::recursive_mutex>;
std::map<void *, std::pair<int, size_t>> allocations; // ptr -> (device, bytes)
std::map<void *, size_t> pinned;                         // cudaHostAlloc: ptr -> bytes
size_t used_bytes[max_devices];

cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

long env_long(const char *name, long fallback) {
  const char *s = getenv(name);
  if (!s || !*s) return fallback;
  char *end;
  long v = strtol(s, &end, 10);
  return *end ? fallback : v;
}

int device_count() {
  long n = env_long("LT_EMU_CUDA_DEVICES", 2);
  return n < 0 ? 0 : n > max_devices ? max_devices : (int)n;
}

size_t device_bytes() { return (size_t)env_long("LT_EMU_CUDA_MEMORY", 4L << 30); }

bool valid_device(int d) { return d >= 0 && d < device_count(); }

bool lazy() {
  static const bool v = [] {
    const char *o = getenv("LT_EMU_STREAMS");
    return !(o && strcmp(o, "eager") == 0);
  }();
  return v;
}

std::vector<CUstream_st *> streams; // every live stream, the default ones included
CUstream_st *default_streams[max_devices];
cudaError_t deferred_error = cudaSuccess; // a queued kernel that failed, for the next sync

// 0, cudaStreamLegacy and cudaStreamPerThread mean the current device's
// default stream.
CUstream_st *stream_of(cudaStream_t s) {
  if (s == 0 || s == cudaStreamLegacy || s == cudaStreamPerThread) {
    CUstream_st *&d = default_streams[current_device];
    if (!d) {
      d = new CUstream_st();
      d->device = current_device;
      streams.push_back(d);
    }
    return d;
  }
  return s;
}

int stream_device(cudaStream_t s) { return stream_of(s)->device; }

// Device memory is out of the host's reach (PROT_NONE) except while device
// work runs: a queued kernel, copy or fill, or an emulated library call. On
// a GPU the host cannot read cudaMalloc'd memory through a pointer; here it
// could, so a host-side read of a device tensor would go unnoticed.
// LT_EMU_HOST_ACCESS=1 leaves it readable (to debug the emulator itself).
int device_window = 0;

bool protect_device_memory() {
  static const bool v = [] {
    const char *o = getenv("LT_EMU_HOST_ACCESS");
    return !(o && strcmp(o, "1") == 0);
  }();
  return v;
}

size_t page_round(size_t bytes) {
  const size_t page = 4096;
  return (bytes + page - 1) & ~(page - 1);
}

void set_device_access(int prot) {
  if (!protect_device_memory()) return;
  for (auto &a : allocations)
    if (mprotect(a.first, page_round(a.second.second), prot) != 0) {
      perror("cuda emulator: mprotect");
      abort();
    }
}

void open_device_memory() {
  if (device_window++ == 0) set_device_access(PROT_READ | PROT_WRITE);
}

void close_device_memory() {
  if (--device_window == 0) set_device_access(PROT_NONE);
}

// Runs s's queued work until `upto` items in all have run.
void run_until(CUstream_st *s, uint64_t upto) {
  if (s->running && s->completed < upto) {
    fprintf(stderr, "cuda emulator: streams wait on each other in a cycle\n");
    abort();
  }
  s->running = true;
  open_device_memory();
  while (s->completed < upto) {
    std::function<void()> work = std::move(s->queue.front());
    s->queue.pop_front();
    work();
    s->completed++;
  }
  close_device_memory();
  s->running = false;
}

void run_all(CUstream_st *s) { run_until(s, s->submitted); }

void run_every_stream() {
  for (size_t i = 0; i < streams.size(); i++) run_all(streams[i]);
}

void enqueue(CUstream_st *s, std::function<void()> work) {
  s->queue.push_back(std::move(work));
  s->submitted++;
  if (!lazy()) run_all(s);
}

// The device whose cudaMalloc'd memory p points into, or -1.
int device_of(const void *p) {
  auto it = allocations.upper_bound((void *)p);
  if (it == allocations.begin()) return -1;
  --it;
  return (const char *)p < (const char *)it->first + it->second.second ? it->second.first : -1;
}

bool is_device_memory(const void *p) { return device_of(p) >= 0; }

bool is_pinned(const void *p) {
  auto h = pinned.upper_bound((void *)p);
  if (h == pinned.begin()) return false;
  --h;
  return (const char *)p < (const char *)h->first + h->second;
}

cudaError_t take_deferred() {
  cudaError_t e = deferred_error;
  deferred_error = cudaSuccess;
  return e == cudaSuccess ? e : fail(e);
}

// ---- fibers ----

const size_t stack_bytes = EMU_ASAN ? (512u << 10) : (128u << 10);

// A thread of the block being run: not started yet, running (or ready to
// run again), waiting at a barrier, or finished.
enum thread_state { UNSTARTED, RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };

// Switching stacks: emu_switch saves the callee-saved registers on the
// current stack, stores the stack pointer in *from and continues on to,
// where the registers of an earlier switch (or a fresh frame made by
// fresh_stack) are waiting. It is ucontext's swapcontext without the signal
// mask, whose system call made swapcontext most of an emulated launch.
extern "C" void emu_switch(void **from, void *to);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".type emu_switch, @function\n"
        "emu_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, .-emu_switch\n");

struct thread {
  thread_state state = UNSTARTED;
  uint3 tid;
  int linear = 0; // x + y * bx + z * bx * by: the lane is linear % 32
  int fiber = -1; // the fiber it runs on, once started
  const char *bar_file = nullptr; // where it waits at __syncthreads
  int bar_line = 0;
};

// A fiber runs threads one after another, taking the next unstarted one
// when its thread finishes, until a thread waits at a barrier (the fiber
// then waits with it) or none is left (the fiber is free again). So a
// kernel without barriers runs a whole block on one fiber, with two
// switches, and a block needs only as many stacks as threads wait at once.
struct fiber {
  void *sp = nullptr; // saved stack pointer while the fiber is suspended
  char *stack = nullptr;
  bool busy = false;
};

struct block_run {
  std::vector<thread> threads;
  std::vector<fiber> fibers;
  void *scheduler_sp = nullptr;
  const emu::kernel_body *body = nullptr;
  unsigned nthreads = 0, next_unstarted = 0, done = 0;
  // LT_EMU_THREAD_ORDER=reverse: threads start, and leave barriers, last
  // first. Code that reads what another thread wrote without a barrier
  // between works in at most one of the two orders.
  bool reverse = false;
  bool barrier_met = false; // a thread of this block waited at a barrier
  // Threads a barrier let go, resumed in this order (a queue: ready_head
  // is the next one).
  std::vector<unsigned> ready;
  size_t ready_head = 0;
  // The block barrier: how many wait, and where (the first one's place).
  unsigned block_waiting = 0;
  const char *block_file = nullptr;
  int block_line = 0;
  std::vector<unsigned> warp_waiting; // per warp, at its current shuffle
  int running = -1;       // the thread running now
  int running_fiber = -1; // and its fiber
  // Warp exchange slots: what each lane put in at its current shuffle.
  std::vector<uint64_t> slots;
  const char *error = nullptr; // why the block could not finish
  char message[512];
#if EMU_ASAN
  const void *sched_stack_bottom = nullptr;
  size_t sched_stack_size = 0;
#endif
};

block_run run;

// The first frame of every fiber (entered by emu_switch's ret). It never
// returns: with no thread left to start, it switches back for good.
extern "C" void emu_fiber_entry() {
  const int me = run.running_fiber;
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &run.sched_stack_bottom, &run.sched_stack_size);
#endif
  while (run.next_unstarted < run.nthreads) {
    const unsigned k = run.next_unstarted++;
    const unsigned t = run.reverse ? run.nthreads - 1 - k : k;
    thread &th = run.threads[t];
    th.state = RUNNABLE;
    th.fiber = me;
    run.running = (int)t;
    emu::coords.thread = th.tid;
    run.body->run();
    run.threads[t].state = DONE;
    run.done++;
  }
  run.fibers[me].busy = false;
#if EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, run.sched_stack_bottom, run.sched_stack_size);
#endif
  emu_switch(&run.fibers[me].sp, run.scheduler_sp);
  abort(); // a free fiber is started afresh, never resumed
}

// A stack whose first switch enters emu_fiber_entry with the ABI's
// alignment: rsp + 8 a multiple of 16 at the entry, as after a call.
void *fresh_stack(char *stack, size_t bytes) {
  uintptr_t top = ((uintptr_t)(stack + bytes)) & ~(uintptr_t)15;
  void **sp = (void **)top;
  *--sp = nullptr;                             // the entry's return address: none
  *--sp = (void *)&emu_fiber_entry;            // where emu_switch's ret goes
  for (int r = 0; r < 6; r++) *--sp = nullptr; // rbp rbx r12 r13 r14 r15
  return sp;
}

// From the running thread's fiber back to the scheduler; returns when the
// scheduler resumes the thread.
void yield_to_scheduler() {
  fiber &f = run.fibers[run.running_fiber];
#if EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, run.sched_stack_bottom, run.sched_stack_size);
#endif
  emu_switch(&f.sp, run.scheduler_sp);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, &run.sched_stack_bottom, &run.sched_stack_size);
#endif
}

// Switches to fiber i (a suspended thread's, or a fresh one) until it yields.
void switch_to_fiber(int i) {
  fiber &f = run.fibers[i];
  run.running_fiber = i;
#if EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, stack_bytes);
#endif
  emu_switch(&run.scheduler_sp, f.sp);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  run.running = -1;
  run.running_fiber = -1;
}

void resume_thread(unsigned t) {
  run.running = (int)t;
  emu::coords.thread = run.threads[t].tid;
  switch_to_fiber(run.threads[t].fiber);
}

// A free fiber, made fresh (a new one when all are busy).
int start_fiber() {
  int i = 0;
  while (i < (int)run.fibers.size() && run.fibers[i].busy) i++;
  if (i == (int)run.fibers.size()) {
    run.fibers.emplace_back();
    void *p = mmap(nullptr, stack_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      fprintf(stderr, "cuda emulator: cannot map a fiber stack\n");
      abort();
    }
    run.fibers[i].stack = (char *)p;
  }
  run.fibers[i].busy = true;
  run.fibers[i].sp = fresh_stack(run.fibers[i].stack, stack_bytes);
  return i;
}

// Why a block whose threads all started cannot go on: CUDA requires every
// thread of the block to reach the same __syncthreads (hardware that counts
// exited threads as arrived hides the bug, until it does not), and a
// full-mask shuffle to be reached by all 32 lanes.
void explain_deadlock() {
  if (run.block_waiting && run.done)
    snprintf(run.message, sizeof run.message,
             "%u threads wait at __syncthreads (%s:%d) that %u exited threads never reach",
             run.block_waiting, run.block_file, run.block_line, run.done);
  else
    snprintf(run.message, sizeof run.message,
             "threads wait at barriers that cannot open (a __syncthreads that some threads "
             "skip, or a warp shuffle whose lanes did not all arrive)");
  run.error = run.message;
}

// Runs one block; false (with run.error set) when its threads deadlock.
bool run_block(dim3 block) {
  const unsigned n = block.x * block.y * block.z;
  run.nthreads = n;
  run.next_unstarted = run.done = run.block_waiting = 0;
  run.ready.clear();
  run.ready_head = 0;
  run.warp_waiting.assign((n + 31) / 32, 0);
  if (run.threads.size() < n) run.threads.resize(n);
  run.slots.assign(((n + 31) / 32) * 32, 0);
  for (unsigned i = 0; i < n; i++) {
    thread &t = run.threads[i];
    t.state = UNSTARTED;
    t.linear = (int)i;
    t.fiber = -1;
    t.tid = make_uint3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
  }
  for (fiber &f : run.fibers) f.busy = false; // an abandoned block's too
  for (;;) {
    // Threads a barrier let go, then every thread not started yet: a fresh
    // fiber runs them until one waits at a barrier.
    while (run.ready_head < run.ready.size() && !run.error)
      resume_thread(run.ready[run.ready_head++]);
    if (run.error) return false;
    if (run.next_unstarted < n) {
      switch_to_fiber(start_fiber());
      continue;
    }
    if (run.done == n) return true;
    if (run.ready_head == run.ready.size()) {
      explain_deadlock();
      return false;
    }
  }
}

// Lets every thread of [lo, hi) go on (they all wait at one barrier).
void release(unsigned lo, unsigned hi) {
  for (unsigned k = lo; k < hi; k++) {
    const unsigned i = run.reverse ? hi - 1 - (k - lo) : k;
    run.threads[i].state = RUNNABLE;
    run.ready.push_back(i);
  }
}

cudaError_t check_config(dim3 grid, dim3 block, size_t shmem) {
  const uint64_t threads = (uint64_t)block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
    return cudaErrorInvalidConfiguration;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535)
    return cudaErrorInvalidConfiguration;
  if (shmem > 48 * 1024) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

namespace emu {

coords_t coords;

int lane_id() {
  assert(run.running >= 0 && "a warp function outside a kernel");
  return run.threads[run.running].linear & 31;
}

void syncthreads(const char *file, int line) {
  assert(run.running >= 0 && "__syncthreads outside a kernel");
  thread &t = run.threads[run.running];
  run.barrier_met = true;
  if (run.block_waiting == 0) {
    run.block_file = file, run.block_line = line;
  } else if (line != run.block_line || (file != run.block_file && strcmp(file, run.block_file))) {
    snprintf(run.message, sizeof run.message,
             "threads wait at different __syncthreads (%s:%d and %s:%d)", run.block_file,
             run.block_line, file, line);
    run.error = run.message;
    yield_to_scheduler(); // never resumed: the block is abandoned
  }
  t.state = AT_BLOCK_BARRIER;
  // The last thread in opens it; a thread that exited never arrives.
  if (++run.block_waiting == run.nthreads) {
    run.block_waiting = 0;
    release(0, run.nthreads);
  }
  yield_to_scheduler();
}

// Waits until all 32 lanes of the warp at warp_base have arrived.
static void warp_barrier(int me, unsigned warp_base) {
  run.barrier_met = true;
  run.threads[me].state = AT_WARP_BARRIER;
  if (++run.warp_waiting[warp_base / 32] == 32) {
    run.warp_waiting[warp_base / 32] = 0;
    release(warp_base, warp_base + 32);
  }
  yield_to_scheduler();
}

uint64_t warp_exchange(unsigned mask, uint64_t bits, int src_lane, const char *what) {
  assert(run.running >= 0 && "a warp shuffle outside a kernel");
  const int me = run.running;
  const unsigned linear = (unsigned)run.threads[me].linear;
  const unsigned warp_base = linear & ~31u;
  if (mask != 0xffffffffu || warp_base + 32 > run.nthreads) {
    // lt's kernels shuffle whole warps only; anything else is a bug there.
    run.error = mask != 0xffffffffu ? "a shuffle with a partial mask"
                                    : "a full-mask shuffle in a warp with fewer than 32 threads";
    (void)what;
    yield_to_scheduler(); // never resumed: the block is abandoned
  }
  run.slots[linear] = bits;
  warp_barrier(me, warp_base); // every lane has put its value in
  const uint64_t got = run.slots[warp_base + (unsigned)src_lane];
  warp_barrier(me, warp_base); // every lane has read before any writes again
  return got;
}

bool kernel_may_touch(const void *p, const char *file, int line, int arg) {
  hold_t hold(state_lock);
  const int dev = device_of(p);
  if (dev == current_device || (dev < 0 && is_pinned(p))) return true;
  if (dev >= 0)
    fprintf(stderr,
            "cuda emulator: kernel launched at %s:%d: argument %d points into cuda:%d's memory "
            "while cuda:%d is current\n",
            file, line, arg, dev, current_device);
  else
    fprintf(stderr,
            "cuda emulator: kernel launched at %s:%d: argument %d (%p) is not device memory\n",
            file, line, arg, p);
  last_error = cudaErrorIllegalAddress;
  return false;
}

// The kernels' __shared__ variables (emu_cuda.h), bounded by the linker.
extern "C" char __start_emu_shared[] __attribute__((weak));
extern "C" char __stop_emu_shared[] __attribute__((weak));

// A block starts with shared memory holding garbage, as on a GPU: all one
// bits (NaN, -1), so a read of what the block did not write shows.
static void poison_shared() {
  const uintptr_t lo = (uintptr_t)__start_emu_shared, hi = (uintptr_t)__stop_emu_shared;
  if (lo && hi > lo) memset(__start_emu_shared, 0xFF, hi - lo);
}

// Runs every block of a queued launch.
static void execute_kernel(const char *file, int line, dim3 grid, dim3 block,
                           const kernel_body &body) {
  static const bool reverse = [] {
    const char *o = getenv("LT_EMU_THREAD_ORDER");
    return o && strcmp(o, "reverse") == 0;
  }();
  run.reverse = reverse;
  run.body = &body;
  run.error = nullptr;
  coords.grid_dim = grid;
  coords.block_dim = block;
  // Every block should start with garbage; the fill is skipped after a
  // block that met no barrier (a kernel without them, which has no use for
  // shared memory), so that elementwise launches stay cheap.
  bool poison = true;
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++) {
        coords.block = make_uint3(x, y, z);
        if (poison) poison_shared();
        run.barrier_met = false;
        const bool ok = run_block(block);
        poison = run.barrier_met;
        if (!ok) {
          fprintf(stderr, "cuda emulator: kernel launched at %s:%d, block (%u,%u,%u): %s\n", file,
                  line, x, y, z, run.error);
          // A kernel that cannot finish is a device fault, reported by the
          // next call that waits for the stream (and by cudaGetLastError).
          deferred_error = last_error = cudaErrorLaunchFailure;
          return;
        }
      }
}

void run_kernel(const char *file, int line, dim3 grid, dim3 block, size_t shmem,
                cudaStream_t stream, kernel_body *body) {
  std::unique_ptr<kernel_body> owned(body);
  cudaError_t e = check_config(grid, block, shmem);
  if (e != cudaSuccess) {
    fail(e);
    return;
  }
  if (!valid_device(current_device)) {
    fail(cudaErrorInvalidDevice);
    return;
  }
  hold_t hold(state_lock);
  if (stream_device(stream) != current_device) {
    // The runtime refuses a stream of another device for a launch.
    fail(cudaErrorInvalidResourceHandle);
    return;
  }
  std::shared_ptr<kernel_body> k(owned.release());
  enqueue(stream_of(stream), [=] { execute_kernel(file, line, grid, block, *k); });
}

}  // namespace emu

// ---- the runtime API ----

extern "C" {

// An emulated library call's device work: the stream's queue first, then
// device memory open until emu_library_end.
void emu_library_begin(cudaStream_t stream) {
  state_lock.lock(); // held until emu_library_end
  run_all(stream_of(stream));
  open_device_memory();
}

void emu_library_end(void) {
  close_device_memory();
  state_lock.unlock();
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return "unknown error (emulator)";
  }
}

cudaError_t cudaGetDeviceCount(int *count) {
  *count = device_count();
  return *count ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  switch (attr) { // an H200's
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = 132; return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; return cudaSuccess;
    case cudaDevAttrWarpSize: *value = 32; return cudaSuccess;
    default: return fail(cudaErrorInvalidValue);
  }
}

cudaError_t cudaDeviceSynchronize(void) {
  if (!valid_device(current_device)) return fail(cudaErrorInvalidDevice);
  hold_t hold(state_lock);
  for (CUstream_st *st : streams)
    if (st->device == current_device) run_all(st);
  return take_deferred();
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  *ptr = nullptr;
  if (!valid_device(current_device)) return fail(cudaErrorInvalidDevice);
  if (bytes == 0) return cudaSuccess;
  hold_t hold(state_lock);
  if (bytes > device_bytes() - used_bytes[current_device]) return fail(cudaErrorMemoryAllocation);
  // Whole pages, so that the host's access can be taken away (above).
  void *p = mmap(nullptr, page_round(bytes), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
  // Fresh device memory holds garbage on a GPU: here all one bits (NaN in
  // every float type, -1 in integers), so a kernel that reads what nothing
  // wrote gives a result the comparison with the CPU cannot miss.
  memset(p, 0xFF, bytes);
  if (device_window == 0 && protect_device_memory()) mprotect(p, page_round(bytes), PROT_NONE);
  allocations[p] = std::make_pair(current_device, bytes);
  used_bytes[current_device] += bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
  if (!ptr) return cudaSuccess;
  hold_t hold(state_lock);
  run_every_stream(); // cudaFree waits for the device, and queued work may use ptr
  auto it = allocations.find(ptr);
  if (it == allocations.end()) return fail(cudaErrorInvalidValue);
  used_bytes[it->second.first] -= it->second.second;
  munmap(ptr, page_round(it->second.second));
  allocations.erase(it);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
  if (!valid_device(current_device)) return fail(cudaErrorInvalidDevice);
  hold_t hold(state_lock);
  *total = device_bytes();
  *free_bytes = *total - used_bytes[current_device];
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags) {
  (void)flags;
  *ptr = aligned_alloc(256, ((bytes ? bytes : 1) + 255) & ~(size_t)255);
  if (!*ptr) return fail(cudaErrorMemoryAllocation);
  hold_t hold(state_lock);
  pinned[*ptr] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr) {
  if (!ptr) return cudaSuccess;
  hold_t hold(state_lock);
  run_every_stream(); // as cudaFree: queued copies may still read it
  if (!pinned.erase(ptr)) return fail(cudaErrorInvalidValue);
  free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  (void)kind; // the pointers say what they are
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  hold_t hold(state_lock);
  CUstream_st *s = stream_of(stream);
  const bool src_host = !is_device_memory(src) && !is_pinned(src);
  const bool dst_host = !is_device_memory(dst) && !is_pinned(dst);
  if (src_host) {
    // From pageable memory the runtime stages the bytes before it returns;
    // they reach the device in stream order.
    std::shared_ptr<std::vector<char>> staged(
        new std::vector<char>((const char *)src, (const char *)src + bytes));
    enqueue(s, [=] { memcpy(dst, staged->data(), bytes); });
    return cudaSuccess;
  }
  if (dst_host) {
    // Into pageable memory it returns once the copy is done.
    enqueue(s, [=] { memmove(dst, src, bytes); });
    run_all(s);
    return take_deferred();
  }
  enqueue(s, [=] { memmove(dst, src, bytes); }); // device or pinned memory: queued
  return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src, int src_device,
                                size_t bytes, cudaStream_t stream) {
  if (!valid_device(dst_device) || !valid_device(src_device)) return fail(cudaErrorInvalidDevice);
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  hold_t hold(state_lock);
  enqueue(stream_of(stream), [=] { memmove(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!dst) return fail(cudaErrorInvalidValue);
  hold_t hold(state_lock);
  enqueue(stream_of(stream), [=] { memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset2DAsync(void *dst, size_t pitch, int value, size_t width, size_t height,
                              cudaStream_t stream) {
  if (width > pitch && height > 1) return fail(cudaErrorInvalidValue);
  hold_t hold(state_lock);
  enqueue(stream_of(stream), [=] {
    for (size_t r = 0; r < height; r++) memset((char *)dst + r * pitch, value, width);
  });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  (void)flags; // lt's are non-blocking; the legacy stream's implicit waits are not emulated
  if (!valid_device(current_device)) return fail(cudaErrorInvalidDevice);
  hold_t hold(state_lock);
  CUstream_st *s = new CUstream_st();
  s->device = current_device;
  streams.push_back(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int *device) {
  hold_t hold(state_lock);
  *device = stream_device(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return fail(cudaErrorInvalidResourceHandle);
  hold_t hold(state_lock);
  run_all(stream); // its queued work still completes
  for (size_t i = 0; i < streams.size(); i++)
    if (streams[i] == stream) streams.erase(streams.begin() + (long)i);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  hold_t hold(state_lock);
  run_all(stream_of(stream));
  return take_deferred();
}

// Unfinished work is not ready now, and runs, so that a loop of queries ends.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  hold_t hold(state_lock);
  CUstream_st *s = stream_of(stream);
  if (s->completed == s->submitted) return cudaSuccess;
  run_all(s);
  return cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  (void)flags;
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  hold_t hold(state_lock);
  if (!event->recorded) return cudaSuccess; // nothing to wait for
  CUstream_st *other = event->stream;
  const uint64_t seq = event->seq; // the record current now, as CUDA takes it
  enqueue(stream_of(stream), [=] { run_until(other, seq); });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  if (!valid_device(current_device)) return fail(cudaErrorInvalidDevice);
  *event = new CUevent_st{current_device, flags, false, nullptr, 0};
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  hold_t hold(state_lock);
  CUstream_st *s = stream_of(stream);
  // "event and stream must be on the same device" (the runtime's rule).
  if (s->device != event->device) return fail(cudaErrorInvalidResourceHandle);
  event->recorded = true;
  event->stream = s;
  event->seq = s->submitted; // complete when the work queued so far has run
  return cudaSuccess;
}

// As cudaStreamQuery: not ready while its work is queued, which then runs.
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  hold_t hold(state_lock);
  if (!event->recorded || event->stream->completed >= event->seq) return cudaSuccess;
  run_until(event->stream, event->seq);
  return cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  hold_t hold(state_lock);
  if (event->recorded) run_until(event->stream, event->seq);
  return take_deferred();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start || !end) return fail(cudaErrorInvalidResourceHandle);
  if ((start->flags | end->flags) & cudaEventDisableTiming) return fail(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle);
  hold_t hold(state_lock);
  if (start->stream->completed < start->seq || end->stream->completed < end->seq)
    return fail(cudaErrorNotReady);
  *ms = 0.0f; // the emulator has no clock of the device's
  return cudaSuccess;
}

}  // extern "C"
