//! The CUDA emulator: a plan's CUDA kernels, the same bodies NVRTC compiles, built as C by the host compiler (with a
//! header that defines CUDA's built-ins) and run on the CPU with CUDA's execution model, so that every layout (block reductions with their barriers, tiled
//! matmuls with shared memory, two-dimensional grids) is checked against the reference engine on any machine.
//!
//! Blocks run one after another, last to first (and threads last to first), so that a result that depends on the
//! order of blocks or threads differs from the reference; on a GPU there is no order. A kernel without barriers runs its threads as plain calls; a kernel with
//! `__syncthreads()` runs each thread of a block as a fiber (`ucontext`) and switches at every barrier, so that
//! no thread passes a barrier before all have reached it, and shared memory (`__shared__`, a plain static of the
//! library: safe because launches of one library are serialized) is shared by the block. A barrier that some
//! threads of a block never reach is reported as an error (on a GPU it is undefined behaviour). Launch configurations are those of a device with [`EMU_SMS`] multiprocessors: small,
//! so that grid-stride loops and block loops wrap around.
//!
//! This is for checking, not speed (`--backend cuda-emu`).

use super::cuda_src::{render_body, render_groups, Dialect};
use crate::lower::Plan;

/// Multiprocessors of the emulated device.
pub const EMU_SMS: u32 = 2;
/// Threads of the emulator's block reductions (a GPU gets up to 256; the kernels work with any count).
pub const EMU_REDUCE_THREADS: u32 = 32;

pub(crate) const HEADER: &str = r#"#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <pthread.h>
#define FF_FN static inline
#define FF_DEV static
#define FF_SIMD
#define __shared__ static
struct ff_dim3 { unsigned x, y, z; };
static struct ff_dim3 threadIdx, blockIdx, blockDim, gridDim;
/* Per thread: the error of this thread's last launches (devices sharing a batch's library run on several). */
static __thread int ff_error;
static int ff_coop;
static unsigned ff_cap, ff_cur;
static int* ff_state;
static char* ff_stacks;
typedef void (*ff_body_fn)(void**, const int64_t*);
static ff_body_fn ff_body;
static void** ff_b;
static const int64_t* ff_p;
static const size_t FF_STACK = 64 * 1024;
static void ff_start(void);
#if defined(__x86_64__)
/* Fibers by a minimal context switch: callee-saved registers on the old stack, then the new stack. */
void ff_swap(void** from, void* to);
__asm__(".text\n.p2align 4\n.hidden ff_swap\n.globl ff_swap\nff_swap:\n"
    "pushq %rbp\npushq %rbx\npushq %r12\npushq %r13\npushq %r14\npushq %r15\n"
    "movq %rsp, (%rdi)\nmovq %rsi, %rsp\n"
    "popq %r15\npopq %r14\npopq %r13\npopq %r12\npopq %rbx\npopq %rbp\nret\n");
static void* ff_sched;
static void** ff_sp;
static void ff_fiber_init(unsigned t) {
  void** top = (void**)(ff_stacks + (size_t)(t + 1) * FF_STACK);
  top[-1] = 0; top[-2] = (void*)ff_start;
  ff_sp[t] = top - 8;
}
static void ff_to_fiber(unsigned t) { ff_swap(&ff_sched, ff_sp[t]); }
static void ff_to_sched(void) { ff_swap(&ff_sp[ff_cur], ff_sched); }
static void ff_alloc(unsigned n) { free(ff_sp); ff_sp = (void**)malloc(n * sizeof(void*)); }
#else
#include <ucontext.h>
static ucontext_t ff_sched;
static ucontext_t* ff_ctx;
static void ff_fiber_init(unsigned t) {
  getcontext(&ff_ctx[t]);
  ff_ctx[t].uc_stack.ss_sp = ff_stacks + (size_t)t * FF_STACK;
  ff_ctx[t].uc_stack.ss_size = FF_STACK;
  ff_ctx[t].uc_link = 0;
  makecontext(&ff_ctx[t], ff_start, 0);
}
static void ff_to_fiber(unsigned t) { swapcontext(&ff_sched, &ff_ctx[t]); }
static void ff_to_sched(void) { swapcontext(&ff_ctx[ff_cur], &ff_sched); }
static void ff_alloc(unsigned n) { free(ff_ctx); ff_ctx = (ucontext_t*)malloc(n * sizeof(ucontext_t)); }
#endif
static void ff_start(void) {
  ff_body(ff_b, ff_p);
  ff_state[ff_cur] = 2;
  ff_to_sched();
}
static void __syncthreads(void) {
  if (!ff_coop) { ff_error = 1; return; }
  ff_state[ff_cur] = 1;
  ff_to_sched();
}
/* Runs `body(b, p)` as every thread of a gx x gy x gz grid of bx-thread blocks. The emulator's state is this
   library's: one launch at a time. */
static void ff_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, int coop, ff_body_fn body, void** b,
                      const int64_t* p) {
  static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&one_at_a_time);
  gridDim = (struct ff_dim3){gx, gy, gz}; blockDim = (struct ff_dim3){bx, 1, 1};
  const unsigned nt = bx;
  if (coop && nt > ff_cap) {
    free(ff_stacks); free(ff_state);
    ff_stacks = (char*)malloc(nt * FF_STACK);
    ff_state = (int*)malloc(nt * sizeof(int));
    ff_alloc(nt);
    ff_cap = nt;
  }
  ff_coop = coop;
  /* Blocks, and threads within a block, run last to first: results that depend on the order show. */
  for (unsigned blk = gx * gy * gz; blk-- > 0;) {
    blockIdx = (struct ff_dim3){blk % gx, (blk / gx) % gy, blk / (gx * gy)};
    if (!coop) {
      for (unsigned t = nt; t-- > 0;) { threadIdx = (struct ff_dim3){t, 0, 0}; body(b, p); }
      continue;
    }
    ff_body = body; ff_b = b; ff_p = p;
    for (unsigned t = 0; t < nt; t++) { ff_fiber_init(t); ff_state[t] = 0; }
    unsigned alive = nt;
    while (alive) {
      unsigned waiting = 0, finished = 0;
      for (unsigned t = nt; t-- > 0;) {
        if (ff_state[t] == 2) continue;
        ff_cur = t; threadIdx = (struct ff_dim3){t, 0, 0};
        ff_to_fiber(t);
        if (ff_state[t] == 2) { alive--; finished++; } else waiting++;
      }
      if (waiting && finished) ff_error = 1;
    }
  }
  pthread_mutex_unlock(&one_at_a_time);
}
int ff_emu_error(void) { int e = ff_error; ff_error = 0; return e; }
"#;

/// The emulator's C source of a plan's kernels: each kernel `k` as `extern "C" void k(void** b, const int64_t* p)`
/// (the C backend's signature), launching the CUDA body with its configuration.
pub fn render(plan: &Plan) -> String {
    render_as(plan, EMU_SMS, EMU_REDUCE_THREADS)
}

/// [`render`] for a device of `sms` multiprocessors, block reductions of up to `reduce_threads` threads.
pub fn render_as(plan: &Plan, sms: u32, reduce_threads: u32) -> String {
    let d = Dialect::Emu { sms, reduce_threads };
    format!("{HEADER}{}{}", render_body(&plan.kernels, d), render_groups(&plan.kernels, &plan.groups, &plan.chained, d))
}

#[cfg(test)]
mod tests {
    use super::HEADER;

    /// Compiles `kernels` after the emulator's header and calls `name` on `buf` (one int64 buffer).
    fn run(kernels: &str, name: &str, buf: &mut [i64]) -> i32 {
        let lib = crate::backend::c::compile_emu(&format!("{HEADER}{kernels}")).expect("the emulator compiles");
        // SAFETY: the functions are defined above with these signatures, and `buf` outlives the call.
        unsafe {
            let f: libloading::Symbol<unsafe extern "C" fn(*const *mut std::ffi::c_void, *const i64)> =
                lib.get(name.as_bytes()).expect("kernel");
            let ptrs = [buf.as_mut_ptr() as *mut std::ffi::c_void];
            f(ptrs.as_ptr(), [0i64].as_ptr());
            let err: libloading::Symbol<unsafe extern "C" fn() -> i32> = lib.get(b"ff_emu_error").expect("check");
            err()
        }
    }

    #[test]
    fn barriers_order_the_threads_of_a_block() {
        // Each thread writes its slot, then reads its neighbour's: only correct if every write precedes every read.
        let src = r#"
static void body(void** b, const int64_t* p) {
  int64_t* out = (int64_t*)b[0];
  __shared__ int64_t s[64];
  s[threadIdx.x] = threadIdx.x + 100 * blockIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}
void k(void** b, const int64_t* p) { ff_launch(3, 1, 1, 64, 1, body, b, p); }
"#;
        let mut buf = vec![0i64; 192];
        assert_eq!(run(src, "k", &mut buf), 0);
        for (i, v) in buf.iter().enumerate() {
            let (b, t) = (i as i64 / 64, i as i64 % 64);
            assert_eq!(*v, (t + 1) % 64 + 100 * b, "thread {t} of block {b}");
        }
    }

    #[test]
    fn a_barrier_not_every_thread_reaches_is_an_error() {
        let src = r#"
static void body(void** b, const int64_t* p) {
  if (threadIdx.x != 0) __syncthreads();
  ((int64_t*)b[0])[threadIdx.x] = 1;
}
void k(void** b, const int64_t* p) { ff_launch(1, 1, 1, 32, 1, body, b, p); }
"#;
        let mut buf = vec![0i64; 32];
        assert_eq!(run(src, "k", &mut buf), 1);
    }
}
