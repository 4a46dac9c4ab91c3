//! Backends: renderers of the kernel IR and the devices that run plans.
//!
//! `c` renders C, compiles it with the system C compiler and runs it in this process (`dlopen`); `cuda` renders
//! CUDA C for NVRTC. Both render expressions with [`crate::lower::kernel::render`], so the two agree on arithmetic.
//! `device` is the switch between them: [`Target`] names a backend, [`Loaded`] is a plan's kernels loaded on it.
//! `many` compiles the kernels of many plans into one library (for the tests, the fuzzer, compile checks).

pub mod c;
pub mod cache;
pub mod cuda;
pub mod cuda_src;
mod device;
pub mod emu;
pub mod extrema;
pub mod gemm;
pub mod many;
pub mod microkernel;
pub mod source;
mod split;
pub mod tile;

pub use device::{plan_for_run, run_c, run_loaded, run_on, Loaded, Target};
