//! The CUDA backend: the kernel IR rendered as CUDA C, compiled by NVRTC for the device's architecture, and launched
//! through the driver API (`cudarc`, loaded at run time: the crate builds and runs with no CUDA installed).
//!
//! How kernels map onto threads and blocks (grid-stride loops, a second grid dimension, block reductions, tiled
//! matmuls with epilogues) is [`super::cuda_src`]'s. The libraries are looked for before `cudarc` touches them,
//! since it panics when one is missing.

use std::rc::Rc;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::cuda_src::{group_config, launch_config, render_body, render_groups, Config, Dialect};
use crate::lower::exec::Device;
use crate::lower::kernel::Kernel;
use crate::lower::Plan;
use crate::tensor::{DType, Tensor};

/// The architecture CI compiles for (an H200 is sm_90).
pub const DEFAULT_ARCH: &str = "sm_90";

pub(crate) const HEADER: &str = r#"typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef unsigned char uint8_t;
typedef signed char int8_t;
typedef short int16_t;
#define INFINITY __longlong_as_double(0x7ff0000000000000ULL)
#define NAN __longlong_as_double(0x7ff8000000000000ULL)
#define INT64_MIN (-9223372036854775807LL - 1)
#define INT64_MAX 9223372036854775807LL
#define FF_FN __device__ static inline
#define FF_DEV __device__ static
#define FF_SIMD
"#;

/// The CUDA C source of a plan's kernels and kernel groups.
pub fn render(plan: &Plan) -> String {
    format!(
        "{}{}",
        render_kernels(&plan.kernels),
        render_groups(&plan.kernels, &plan.groups, &plan.chained, Dialect::Cuda)
    )
}

pub fn render_kernels(kernels: &[Kernel]) -> String {
    format!("{HEADER}{}", render_body(kernels, Dialect::Cuda))
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
    // No contraction into fused multiply-adds, IEEE division and square roots, no flushing of subnormals: each op
    // rounds as the reference interpreter's does (the C backend's -ffp-contract=off).
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some(arch),
        fmad: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        ftz: Some(false),
        ..Default::default()
    };
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
    groups: Vec<Group>,
}

/// A kernel group's entry point, configuration, and each member's (buffers, integers) counts.
type Group = (CudaFunction, LaunchConfig, Vec<(usize, usize)>);

fn driver_config(c: Config) -> LaunchConfig {
    LaunchConfig { grid_dim: c.grid, block_dim: (c.block, 1, 1), shared_mem_bytes: 0 }
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
            configs.push(driver_config(launch_config(k, sms)));
        }
        let mut groups = Vec::new();
        for (g, members) in plan.groups.iter().enumerate() {
            let f = module.load_function(&format!("g{g}")).map_err(|e| format!("CUDA: kernel group g{g}: {e:?}"))?;
            let ks: Vec<&Kernel> = members.iter().map(|&m| &plan.kernels[m]).collect();
            let c = driver_config(group_config(&ks, plan.chained[g], sms, 256));
            groups.push((f, c, ks.iter().map(|k| (k.args.len(), k.params)).collect()));
        }
        Ok(CudaDevice { stream: ctx.default_stream(), fns, configs, groups })
    }
}

fn bytes_of(t: &Tensor) -> Vec<u8> {
    let t = t.contiguous_copy();
    let b = t.buf.borrow();
    match &*b {
        crate::tensor::Buf::Bool(v) => v.iter().map(|&x| x as u8).collect(),
        crate::tensor::Buf::U8(v) => v.to_vec(),
        crate::tensor::Buf::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        crate::tensor::Buf::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
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
        DType::U8 => Buf::U8(bytes.to_vec().into()),
        DType::I8 => Buf::I8(bytes.iter().map(|&b| b as i8).collect()),
        DType::I16 => Buf::I16(bytes.chunks_exact(2).map(|c| i16::from_le_bytes(c.try_into().unwrap())).collect()),
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

    fn launch_group(&mut self, g: usize, bufs: &[&Self::Buf], params: &[i64]) -> Result<(), String> {
        let (f, config, counts) = &self.groups[g];
        let mut args = self.stream.launch_builder(f);
        args.arg(&params[0]);
        let (mut b, mut p) = (0, 1);
        for &(nb, np) in counts {
            for buf in &bufs[b..b + nb] {
                args.arg(buf.as_ref());
            }
            for q in &params[p..p + np] {
                args.arg(q);
            }
            b += nb;
            p += np;
        }
        // SAFETY: the group's parameters are the mask, then each member's buffers and integers in its rendered
        // order; members the mask leaves out are passed placeholders they never touch.
        unsafe { args.launch(*config) }.map_err(|e| format!("CUDA: launching kernel group g{g}: {e:?}"))?;
        Ok(())
    }

    fn same(a: &Self::Buf, b: &Self::Buf) -> bool {
        Rc::ptr_eq(a, b)
    }

    fn sync(&mut self) -> Result<(), String> {
        self.stream.synchronize().map_err(|e| format!("CUDA: {e:?}"))
    }
}
