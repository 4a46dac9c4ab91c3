//! The CUDA backend: the kernel IR rendered as CUDA C, compiled by NVRTC for the device's architecture, and launched
//! through the driver API (`cudarc`, loaded at run time: the crate builds and runs with no CUDA installed).
//!
//! Every kernel runs one thread per output element in a grid-stride loop over its flattened domain; reduction
//! kernels fold their inner loop in each thread (no block-level cooperation yet). Block and grid sizes come from
//! the domain size, not a fixed 512. The libraries are looked for before `cudarc` touches them, since it panics
//! when one is missing.

use std::fmt::Write;
use std::rc::Rc;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::source::{helpers, point_body};
use crate::lower::exec::Device;
use crate::lower::kernel::{c_type, Kernel, PRELUDE};
use crate::lower::Plan;
use crate::tensor::{DType, Tensor};

/// The architecture CI compiles for (an H200 is sm_90).
pub const DEFAULT_ARCH: &str = "sm_90";

const HEADER: &str = r#"typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef unsigned char uint8_t;
#define INFINITY __longlong_as_double(0x7ff0000000000000ULL)
#define NAN __longlong_as_double(0x7ff8000000000000ULL)
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
#define FF_FN __device__ static inline
#define FF_SIMD
"#;

/// The CUDA C source of a plan's kernels.
pub fn render(plan: &Plan) -> String {
    render_kernels(&plan.kernels)
}

pub fn render_kernels(kernels: &[Kernel]) -> String {
    let mut s = String::from(HEADER);
    s.push_str(PRELUDE);
    for k in kernels {
        let (def, undef) = helpers(k, "__device__ static inline");
        let total: usize = k.domain.iter().product();
        let _ = writeln!(s, "\n/* {}: {total} point(s) */", k.name);
        s.push_str(&def);
        let mut params: Vec<String> = k
            .args
            .iter()
            .enumerate()
            .map(|(n, d)| format!("{}{}* a{n}", if n == 0 { "" } else { "const " }, c_type(*d)))
            .collect();
        params.extend((0..k.params).map(|n| format!("int64_t p{n}")));
        let _ = writeln!(s, "extern \"C\" __global__ void {}({}) {{", k.name, params.join(", "));
        if k.params > 0 {
            let list: Vec<String> = (0..k.params).map(|n| format!("p{n}")).collect();
            let _ = writeln!(s, "  const int64_t p[{}] = {{{}}};", k.params, list.join(", "));
        }
        let _ = writeln!(
            s,
            "  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < {total}LL; t += (int64_t)gridDim.x * blockDim.x) {{"
        );
        let _ = writeln!(s, "    int64_t rest = t; (void)rest;");
        for (v, &n) in k.domain.iter().enumerate().rev() {
            let _ = writeln!(s, "    int64_t i{v} = rest % {n}; rest /= {n};");
        }
        s.push_str(&point_body(k, "    "));
        s.push_str("  }\n}\n");
        s.push_str(&undef);
    }
    s
}

/// Whether a shared library of one of `cudarc`'s candidate names loads (so that `cudarc` will not panic).
fn library_loads(name: &str) -> bool {
    cudarc::get_lib_name_candidates(name).iter().any(|n| {
        // SAFETY: loading NVIDIA's library runs its initializers only, as cudarc itself would.
        unsafe { libloading::Library::new(n) }.is_ok()
    })
}

pub fn nvrtc_available() -> bool {
    library_loads("nvrtc")
}

pub fn driver_available() -> bool {
    library_loads("cuda")
}

/// Compiles CUDA source to PTX with NVRTC for `arch`; the error carries NVRTC's log.
pub fn compile(source: &str, arch: &'static str) -> Result<cudarc::nvrtc::Ptx, String> {
    if !nvrtc_available() {
        return Err("NVRTC (libnvrtc) was not found: install CUDA or `pip install nvidia-cuda-nvrtc` and add its \
                    lib folder to LD_LIBRARY_PATH"
            .into());
    }
    let opts = cudarc::nvrtc::CompileOptions { arch: Some(arch), ..Default::default() };
    cudarc::nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| format!("NVRTC rejected the kernels: {e:?}"))
}

thread_local! {
    static CONTEXT: std::cell::RefCell<Option<Arc<CudaContext>>> = const { std::cell::RefCell::new(None) };
}

/// The CUDA context of device 0, made once per thread; a clear error without a driver or a device.
pub fn context() -> Result<Arc<CudaContext>, String> {
    if let Some(c) = CONTEXT.with(|c| c.borrow().clone()) {
        return Ok(c);
    }
    if !driver_available() {
        return Err(
            "no CUDA driver (libcuda) on this machine: --backend cuda needs an NVIDIA GPU; use --backend c".into()
        );
    }
    let n = CudaContext::device_count().map_err(|e| format!("CUDA: {e:?}"))?;
    if n < 1 {
        return Err("no CUDA device found: --backend cuda needs an NVIDIA GPU; use --backend c".into());
    }
    let c = CudaContext::new(0).map_err(|e| format!("CUDA: {e:?}"))?;
    CONTEXT.with(|slot| *slot.borrow_mut() = Some(c.clone()));
    Ok(c)
}

/// Device buffers (bytes) and a plan's loaded kernels.
pub struct CudaDevice {
    stream: Arc<CudaStream>,
    fns: Vec<CudaFunction>,
    configs: Vec<LaunchConfig>,
}

/// Block and grid for a kernel of `total` points: small kernels get one small block, large ones 256-thread blocks,
/// at most 16 per multiprocessor (the grid-stride loop covers the rest).
pub fn launch_config(total: usize, sms: u32) -> LaunchConfig {
    let block = if total >= 256 { 256 } else { (total.max(1).div_ceil(32) * 32) as u32 };
    let grid = (total.div_ceil(block as usize) as u32).clamp(1, sms.max(1) * 16);
    LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 }
}

impl CudaDevice {
    pub fn new(plan: &Plan) -> Result<CudaDevice, String> {
        let ctx = context()?;
        let (major, minor) = ctx.compute_capability().map_err(|e| format!("CUDA: {e:?}"))?;
        let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
        let ptx = compile(&render(plan), arch)?;
        let module = ctx.load_module(ptx).map_err(|e| format!("CUDA: loading the kernels: {e:?}"))?;
        let sms = ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .unwrap_or(32) as u32;
        let mut fns = Vec::new();
        let mut configs = Vec::new();
        for k in &plan.kernels {
            fns.push(module.load_function(&k.name).map_err(|e| format!("CUDA: kernel {}: {e:?}", k.name))?);
            configs.push(launch_config(k.domain.iter().product(), sms));
        }
        Ok(CudaDevice { stream: ctx.default_stream(), fns, configs })
    }
}

fn bytes_of(t: &Tensor) -> Vec<u8> {
    let t = t.contiguous_copy();
    let b = t.buf.borrow();
    match &*b {
        crate::tensor::Buf::Bool(v) => v.iter().map(|&x| x as u8).collect(),
        crate::tensor::Buf::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        crate::tensor::Buf::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        crate::tensor::Buf::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        crate::tensor::Buf::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

fn tensor_of(bytes: &[u8], d: DType, shape: &[usize]) -> Result<Tensor, String> {
    use crate::tensor::Buf;
    let buf = match d {
        DType::Bool => Buf::Bool(bytes.iter().map(|&b| b != 0).collect()),
        DType::I32 => Buf::I32(bytes.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()),
        DType::I64 => Buf::I64(bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()),
        DType::F32 => Buf::F32(bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()),
        DType::F64 => Buf::F64(bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()),
        other => return Err(format!("dtype {} on the GPU", other.name())),
    };
    Ok(Tensor::from_buf(buf, shape.to_vec()))
}

impl Device for CudaDevice {
    type Buf = Rc<CudaSlice<u8>>;

    fn upload(&mut self, t: &Tensor) -> Result<Self::Buf, String> {
        let bytes = bytes_of(t);
        let bytes = if bytes.is_empty() { vec![0u8] } else { bytes };
        Ok(Rc::new(self.stream.clone_htod(&bytes).map_err(|e| format!("CUDA: {e:?}"))?))
    }

    fn download(&mut self, b: &Self::Buf, d: DType, shape: &[usize]) -> Result<Tensor, String> {
        let bytes = self.stream.clone_dtoh(b.as_ref()).map_err(|e| format!("CUDA: {e:?}"))?;
        let n = shape.iter().product::<usize>() * d.size();
        tensor_of(&bytes[..n], d, shape)
    }

    fn alloc(&mut self, d: DType, n: usize) -> Result<Self::Buf, String> {
        Ok(Rc::new(self.stream.alloc_zeros::<u8>((n * d.size()).max(1)).map_err(|e| format!("CUDA: {e:?}"))?))
    }

    fn copy(&mut self, b: &Self::Buf, _: DType, _: usize) -> Result<Self::Buf, String> {
        Ok(Rc::new(self.stream.clone_dtod(b.as_ref()).map_err(|e| format!("CUDA: {e:?}"))?))
    }

    fn launch(&mut self, k: usize, bufs: &[&Self::Buf], params: &[i64]) -> Result<(), String> {
        let mut args = self.stream.launch_builder(&self.fns[k]);
        for b in bufs {
            args.arg(b.as_ref());
        }
        for p in params {
            args.arg(p);
        }
        // SAFETY: the kernel's parameters are exactly the buffers and integers pushed, in its rendered order, and
        // every index it computes stays inside the buffers the planner sized from the same shapes.
        unsafe { args.launch(self.configs[k]) }.map_err(|e| format!("CUDA: launching kernel {k}: {e:?}"))?;
        Ok(())
    }

    fn same(a: &Self::Buf, b: &Self::Buf) -> bool {
        Rc::ptr_eq(a, b)
    }

    fn sync(&mut self) -> Result<(), String> {
        self.stream.synchronize().map_err(|e| format!("CUDA: {e:?}"))
    }
}
