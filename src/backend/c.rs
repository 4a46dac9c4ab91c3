//! The C backend: every kernel of a plan rendered as a C function in one translation unit, compiled with the system
//! C compiler (`$CC`, else `cc`) at `-O3` for the host CPU (see [`FLAGS`]), loaded with `dlopen`, and run on host buffers.
//!
//! Compiled libraries are cached by a hash of their source under `$FUNCFUSE_CACHE` (default: the system temp
//! directory), so a plan compiles once per machine.

use std::fmt::Write;
use std::path::PathBuf;

use super::source::{buffer_decls, helpers, point_body, prelude, row_reduction};
use crate::lower::exec::Device;
use crate::lower::kernel::Kernel;
use crate::lower::Plan;
use crate::tensor::{Buf, DType, Tensor};

type KernelFn = unsafe extern "C" fn(*const *mut std::ffi::c_void, *const i64);

/// The C source of a plan's kernels and kernel groups.
pub fn render(plan: &Plan) -> String {
    let mut s = render_kernels(&plan.kernels);
    for (g, members) in plan.groups.iter().enumerate() {
        let _ = writeln!(
            s,
            "\n/* group g{g}: one call for independent kernels */\nvoid g{g}(void** b, const int64_t* p) {{"
        );
        let (mut b0, mut p0) = (0, 1);
        for (j, &m) in members.iter().enumerate() {
            let k = &plan.kernels[m];
            let _ = writeln!(s, "  if ((p[0] >> {j}) & 1) {}(b + {b0}, p + {p0});", k.name);
            b0 += k.args.len();
            p0 += k.params;
        }
        s.push_str("}\n");
    }
    s
}

pub fn render_kernels(kernels: &[Kernel]) -> String {
    let mut s = String::from("#include <stdint.h>\n#include <math.h>\n");
    s.push_str(&prelude("static inline"));
    for k in kernels {
        let (def, undef) = helpers(k, "static inline");
        let _ = writeln!(s, "\n/* {}: {} point(s) */", k.name, k.domain.iter().product::<usize>());
        s.push_str(&def);
        let attr =
            if row_reduction(k, "").is_some() { "" } else { "__attribute__((optimize(\"no-tree-loop-vectorize\"))) " };
        let _ = writeln!(s, "{attr}void {}(void** b, const int64_t* p) {{\n  (void)p;", k.name);
        s.push_str(&buffer_decls(k));
        if let Some(body) = row_reduction(k, "  ") {
            s.push_str(&body);
            s.push_str("}\n");
            s.push_str(&undef);
            continue;
        }
        let mut ind = String::from("  ");
        for (v, &n) in k.domain.iter().enumerate() {
            let _ = writeln!(s, "{ind}for (int64_t i{v} = 0; i{v} < {n}; i{v}++) {{");
            ind.push_str("  ");
        }
        s.push_str(&point_body(k, &ind));
        for _ in &k.domain {
            ind.truncate(ind.len() - 2);
            let _ = writeln!(s, "{ind}}}");
        }
        s.push_str("}\n");
        s.push_str(&undef);
    }
    s
}

/// Compiler flags: `-O3` for the host CPU, and no contraction into fused multiply-adds (results round as the
/// reference interpreter's do). Kernels other than row reductions are compiled without the loop vectorizer:
/// GCC 12's miscompiled a fused predicated select (`corpus/micro/views.py::write_through_unsqueeze`).
const FLAGS: &[&str] = &["-O3", "-march=native", "-ffp-contract=off", "-fPIC", "-shared", "-w"];

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn cache_dir() -> PathBuf {
    std::env::var_os("FUNCFUSE_CACHE").map(PathBuf::from).unwrap_or_else(|| std::env::temp_dir().join("funcfuse-cache"))
}

/// Flags of the CUDA emulator's C (`-O1`: it is compiled once per plan and run for checking).
const EMU_FLAGS: &[&str] = &["-std=gnu11", "-O1", "-ffp-contract=off", "-pthread", "-fPIC", "-shared", "-w"];

/// Compiles C source to a shared library (or finds it in the cache); returns its path.
pub fn compile(source: &str) -> Result<PathBuf, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    // `FUNCFUSE_CFLAGS` replaces the flags (for experiments; results are checked all the same).
    let flags: Vec<String> = match std::env::var("FUNCFUSE_CFLAGS") {
        Ok(f) => f.split_whitespace().map(String::from).chain(["-fPIC", "-shared", "-w"].map(String::from)).collect(),
        Err(_) => FLAGS.iter().map(|s| s.to_string()).collect(),
    };
    build(source, &cc, &flags, "c")
}

/// Compiles the CUDA emulator's C source to a shared library; returns its path.
pub fn compile_emu(source: &str) -> Result<PathBuf, String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    build(source, &cc, &EMU_FLAGS.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "emu")
}

/// Compiles C source into the cache folder `folder`.
fn build(source: &str, cc: &str, flags: &[String], folder: &str) -> Result<PathBuf, String> {
    let dir = cache_dir().join(folder);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // The key covers the compiler and its flags as well as the source.
    let stem = format!("{:016x}", fnv(&format!("{cc} {}\n{source}", flags.join(" "))));
    let lib = dir.join(format!("{stem}.so"));
    if lib.exists() {
        return Ok(lib);
    }
    static SERIAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let unique = format!("{}-{}", std::process::id(), SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let src = dir.join(format!("{stem}.{unique}.c"));
    std::fs::write(&src, source).map_err(|e| format!("{}: {e}", src.display()))?;
    let tmp = dir.join(format!("{stem}.{unique}.so"));
    let out = std::process::Command::new(cc)
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .arg("-lm")
        .output()
        .map_err(|e| format!("cannot run the C compiler `{cc}`: {e}"))?;
    let _ = std::fs::remove_file(&src);
    if !out.status.success() {
        return Err(format!("the C compiler rejected the kernels:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    std::fs::rename(&tmp, &lib).map_err(|e| format!("{}: {e}", lib.display()))?;
    Ok(lib)
}

/// Host buffers and compiled kernels (C, or the CUDA emulator's).
pub struct CDevice {
    _lib: libloading::Library,
    fns: Vec<KernelFn>,
    groups: Vec<KernelFn>,
    /// The emulator's check for a barrier that not every thread of a block reached.
    emu_error: Option<unsafe extern "C" fn() -> i32>,
}

impl CDevice {
    /// Compiles and loads the kernels of `plan`.
    pub fn new(plan: &Plan) -> Result<CDevice, String> {
        CDevice::load(&compile(&render(plan))?, plan, false)
    }

    /// Compiles and loads the CUDA kernels of `plan` for the emulator ([`super::emu`]).
    pub fn emulated(plan: &Plan) -> Result<CDevice, String> {
        CDevice::emulated_as(plan, super::emu::EMU_SMS, super::emu::EMU_REDUCE_THREADS)
    }

    /// [`CDevice::emulated`] with the launch configurations of a device of `sms` multiprocessors and block
    /// reductions of up to `reduce_threads` threads (`emulated_as(plan, 132, 256)`: an H200's).
    pub fn emulated_as(plan: &Plan, sms: u32, reduce_threads: u32) -> Result<CDevice, String> {
        CDevice::load(&compile_emu(&super::emu::render_as(plan, sms, reduce_threads))?, plan, true)
    }

    fn load(path: &std::path::Path, plan: &Plan, emulated: bool) -> Result<CDevice, String> {
        // SAFETY: the library is one we just compiled from our own source; it has no initializers.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))?;
        let mut fns = Vec::new();
        for k in &plan.kernels {
            // SAFETY: every kernel is rendered with exactly this signature.
            let f: libloading::Symbol<KernelFn> =
                unsafe { lib.get(k.name.as_bytes()) }.map_err(|e| format!("kernel {}: {e}", k.name))?;
            fns.push(*f);
        }
        let mut groups = Vec::new();
        for g in 0..plan.groups.len() {
            // SAFETY: every group is rendered with exactly this signature.
            let f: libloading::Symbol<KernelFn> =
                unsafe { lib.get(format!("g{g}").as_bytes()) }.map_err(|e| format!("kernel group g{g}: {e}"))?;
            groups.push(*f);
        }
        let emu_error = if emulated {
            // SAFETY: the emulator's header defines this function with this signature.
            let f: libloading::Symbol<unsafe extern "C" fn() -> i32> =
                unsafe { lib.get(b"ff_emu_error") }.map_err(|e| format!("the emulator: {e}"))?;
            Some(*f)
        } else {
            None
        };
        Ok(CDevice { _lib: lib, fns, groups, emu_error })
    }
}

fn ptr(t: &Tensor) -> *mut std::ffi::c_void {
    let mut b = t.buf.borrow_mut();
    match &mut *b {
        Buf::Bool(v) => v.as_mut_ptr() as *mut _,
        Buf::I32(v) => v.as_mut_ptr() as *mut _,
        Buf::I64(v) => v.as_mut_ptr() as *mut _,
        Buf::F32(v) => v.as_mut_ptr() as *mut _,
        Buf::F64(v) => v.as_mut_ptr() as *mut _,
    }
}

impl Device for CDevice {
    type Buf = Tensor;

    fn upload(&mut self, t: &Tensor) -> Result<Tensor, String> {
        Ok(t.contiguous_copy())
    }

    fn download(&mut self, b: &Tensor, _: DType, shape: &[usize]) -> Result<Tensor, String> {
        Ok(b.restride(shape.to_vec(), crate::tensor::contiguous_strides(shape), 0))
    }

    fn alloc(&mut self, d: DType, n: usize) -> Result<Tensor, String> {
        Tensor::zeros(d, &[n])
    }

    fn copy(&mut self, b: &Tensor, _: DType, _: usize) -> Result<Tensor, String> {
        Ok(b.contiguous_copy())
    }

    fn launch(&mut self, k: usize, bufs: &[&Tensor], params: &[i64]) -> Result<(), String> {
        let f = self.fns[k];
        self.call(f, bufs, params).map_err(|e| format!("emulated CUDA kernel {k}: {e}"))
    }

    fn launch_group(&mut self, g: usize, bufs: &[&Tensor], params: &[i64]) -> Result<(), String> {
        let f = self.groups[g];
        self.call(f, bufs, params).map_err(|e| format!("emulated CUDA kernel group g{g}: {e}"))
    }

    fn same(a: &Tensor, b: &Tensor) -> bool {
        a.same_storage(b)
    }
}

impl CDevice {
    /// Calls a kernel (or group); the error is the emulator's, if it saw one.
    fn call(&mut self, f: KernelFn, bufs: &[&Tensor], params: &[i64]) -> Result<(), &'static str> {
        let ptrs: Vec<*mut std::ffi::c_void> = bufs.iter().map(|t| ptr(t)).collect();
        // SAFETY: the kernel reads and writes within the buffers' sizes, which the planner derived from the same
        // shapes the buffers were allocated with; buffers are contiguous and live for the call.
        unsafe { f(ptrs.as_ptr(), params.as_ptr()) };
        // SAFETY: a function of the loaded library taking nothing.
        if self.emu_error.is_some_and(|f| unsafe { f() } != 0) {
            return Err("a __syncthreads() that not every thread of a block reached");
        }
        Ok(())
    }
}
