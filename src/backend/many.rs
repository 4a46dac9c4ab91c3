//! Many plans' kernels in one library (or one NVRTC program), for whoever compiles many plans at once: the tests,
//! the fuzzer, a corpus's compile check.
//!
//! Why: a small plan's C library costs more in the compiler's start, the shared header (`vmath.h` and the prelude,
//! parsed every time), the assembler and the linker than in its kernels, and NVRTC takes about a third of a second
//! per program whatever it holds. A batch pays for those once.
//!
//! What is shared: the header, once; then each distinct kernel and kernel group, once, as a function whose symbol
//! is named after the SHA-256 of its source (`ff_k<hex>`, `ff_g<hex>`). Kernels equal in several plans (an eager
//! and an unfunctionalized plan share most of theirs) are compiled once, and two different kernels never share a
//! name (were two to clash, [`source`] refuses the batch). Each plan is handed the symbols of its kernels and
//! groups ([`Symbols`]), which a device looks up in the one library, shared by all.
//!
//! What is not changed: each unit is the text the plan's own source has (rendered by the same functions, with only
//! the names changed), compiled with the same flags through the same kernel cache ([`super::cache`]): the same
//! kernels, the same arithmetic, the same results. A batch that does not compile is compiled again plan by plan,
//! so that the plan the compiler rejects is the one that gets the error, and the others still load.

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::c::{self, CDevice, Symbols};
use super::cuda_src::{self, Dialect};
use super::{cuda, emu, Loaded, Target};
use crate::lower::kernel::Kernel;
use crate::lower::Plan;

/// The kernels of many plans as one source.
#[derive(Clone, Debug)]
pub struct Source {
    pub text: String,
    /// Per plan, in the order given: the symbols of its kernels and groups in `text`.
    pub symbols: Vec<Symbols>,
    /// Distinct kernels and groups in `text`.
    pub units: usize,
}

/// The name a unit is rendered with to be hashed (the hash then names it).
const PLACEHOLDER: &str = "ff_unit";

/// Everything a unit's source depends on besides the kernel: the backend's dialect.
fn dialect(target: Target) -> Option<Dialect> {
    match target {
        Target::C => None,
        Target::CudaEmu => Some(Dialect::Emu { sms: emu::EMU_SMS, reduce_threads: emu::EMU_REDUCE_THREADS }),
        Target::Cuda => Some(Dialect::Cuda),
    }
}

fn header(target: Target) -> String {
    match target {
        Target::C => c::header(),
        Target::CudaEmu => format!("{}{}", emu::HEADER, cuda_src::body_prelude()),
        Target::Cuda => format!("{}{}", cuda::HEADER, cuda_src::body_prelude()),
    }
}

fn render_kernel(k: &Kernel, target: Target) -> String {
    match dialect(target) {
        None => c::render_kernel(k),
        Some(d) => cuda_src::render_kernel(k, d),
    }
}

fn render_group(name: &str, members: &[&Kernel], chained: bool, target: Target) -> String {
    match dialect(target) {
        None => c::render_group(name, members),
        Some(d) => cuda_src::render_group(name, members, chained, d),
    }
}

/// A unit rendered under the name its own source hashes to: (name, source).
fn unit(prefix: &str, render: impl Fn(&str) -> String) -> (String, String) {
    let digest = Sha256::digest(render(PLACEHOLDER).as_bytes());
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("{prefix}{hex}");
    let text = render(&name);
    (name, text)
}

/// The source of `plans`' kernels and groups for `target` (the C backend, the emulator or NVRTC): the header once,
/// each distinct unit once, in the order of first use. `Err` if two different units would share a symbol.
pub fn source(plans: &[&Plan], target: Target) -> Result<Source, String> {
    let (units, symbols) = distinct_units(plans, target)?;
    let mut text = header(target);
    units.iter().for_each(|(_, u)| text.push_str(u));
    Ok(Source { text, symbols, units: units.len() })
}

/// The distinct kernels and groups of `plans` for `target` (symbol, source), each once, in the order of first use,
/// and per plan the symbols of its own (a group calls its members by their symbols). `Err` if two different units
/// would share a symbol.
#[allow(clippy::type_complexity)]
pub fn distinct_units(plans: &[&Plan], target: Target) -> Result<(Vec<(String, String)>, Vec<Symbols>), String> {
    let mut text = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut add = |name: &str, unit: String, text: &mut Vec<(String, String)>| -> Result<(), String> {
        match seen.get(name) {
            Some(other) if *other != unit => Err(format!("two different kernels hash to the symbol {name}")),
            Some(_) => Ok(()),
            None => {
                text.push((name.to_string(), unit.clone()));
                seen.insert(name.to_string(), unit);
                Ok(())
            }
        }
    };
    let mut symbols = Vec::new();
    for p in plans {
        let mut renamed: Vec<Kernel> = Vec::new();
        for k in &p.kernels {
            let (name, src) = unit("ff_k", |n| render_kernel(&Kernel { name: n.to_string(), ..k.clone() }, target));
            add(&name, src, &mut text)?;
            renamed.push(Kernel { name, ..k.clone() });
        }
        let mut groups = Vec::new();
        for (g, members) in p.groups.iter().enumerate() {
            let ks: Vec<&Kernel> = members.iter().map(|&m| &renamed[m]).collect();
            let (name, src) = unit("ff_g", |n| render_group(n, &ks, p.chained[g], target));
            add(&name, src, &mut text)?;
            groups.push(name);
        }
        symbols.push(Symbols { kernels: renamed.into_iter().map(|k| k.name).collect(), groups });
    }
    Ok((text, symbols))
}

/// Compiles units (sources from [`distinct_units`], each group after its members) as one NVRTC program for `arch`.
pub fn check_cuda_units(units: &[&str], arch: &'static str) -> Result<(), String> {
    let mut text = header(Target::Cuda);
    units.iter().for_each(|u| text.push_str(u));
    cuda::compile(&text, arch).map(|_| ())
}

/// Plans' kernels compiled for the C backend or the CUDA emulator: one library for the whole batch, or, where that
/// does not compile, one per plan. Shared between threads; [`Compiled::device`] makes each plan's device.
pub struct Compiled {
    target: Target,
    /// Per plan: the library holding its kernels and their symbols there, or why it has none.
    entries: Vec<Result<(Arc<libloading::Library>, Symbols), String>>,
    /// Whether the plans share one library (else each was compiled on its own).
    pub batched: bool,
}

impl Compiled {
    /// Compiles `plans` for `target` (`Target::C` or `Target::CudaEmu`; a GPU's kernels load per plan, see [`load`]).
    pub fn new(plans: &[&Plan], target: Target) -> Compiled {
        let compile = match target {
            Target::C => c::compile,
            Target::CudaEmu => c::compile_emu,
            Target::Cuda => {
                let e = "a batch of plans compiles C libraries: for the C backend or the CUDA emulator".to_string();
                return Compiled { target, entries: plans.iter().map(|_| Err(e.clone())).collect(), batched: false };
            }
        };
        let batch = source(plans, target).and_then(|s| Ok((Arc::new(compile(&s.text)?), s.symbols)));
        match batch {
            Ok((lib, symbols)) => {
                Compiled { target, entries: symbols.into_iter().map(|s| Ok((lib.clone(), s))).collect(), batched: true }
            }
            Err(why) => {
                crate::log::log(crate::log::Stage::Compile, || {
                    format!("a batch of {} plans did not compile ({why}); compiling each on its own", plans.len())
                });
                let own = |p: &Plan| -> Result<_, String> {
                    let src = if target == Target::C { c::render(p) } else { emu::render(p) };
                    Ok((Arc::new(compile(&src)?), Symbols::of(p)))
                };
                Compiled { target, entries: plans.iter().map(|p| own(p)).collect(), batched: false }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A device (its own buffers) running plan `i`'s kernels, or why that plan's kernels did not compile.
    pub fn device(&self, i: usize) -> Result<Loaded, String> {
        let (lib, symbols) = self.entries[i].as_ref().map_err(|e| e.clone())?;
        Ok(Loaded::C(CDevice::load(lib.clone(), symbols, self.target == Target::CudaEmu)?))
    }
}

/// Loads each plan on `target`, the C libraries compiled as one batch ([`Compiled`]); on a GPU, one by one.
pub fn load(plans: &[&Plan], target: Target) -> Vec<Result<Loaded, String>> {
    if target == Target::Cuda {
        return plans.iter().map(|p| Loaded::new(p, target)).collect();
    }
    let compiled = Compiled::new(plans, target);
    (0..plans.len()).map(|i| compiled.device(i)).collect()
}

/// Compiles each batch of `batches` on a thread of its own (C libraries for the C backend and the emulator build
/// in separate compiler processes, at the same time).
pub fn compile_all(batches: &[(Vec<&Plan>, Target)]) -> Vec<Compiled> {
    std::thread::scope(|s| {
        let handles: Vec<_> = batches.iter().map(|(plans, t)| s.spawn(move || Compiled::new(plans, *t))).collect();
        handles.into_iter().map(|h| h.join().expect("a compiling thread panicked")).collect()
    })
}

/// Compile-checks plans' CUDA kernels with NVRTC for `arch` as one program: per plan, `Ok`, or NVRTC's error on
/// that plan's own source (compiled on its own when the batch does not compile).
pub fn check_cuda(plans: &[&Plan], arch: &'static str) -> Vec<Result<(), String>> {
    let batch = source(plans, Target::Cuda).and_then(|s| cuda::compile(&s.text, arch).map(|_| ()));
    match batch {
        Ok(()) => plans.iter().map(|_| Ok(())).collect(),
        Err(_) => plans.iter().map(|p| cuda::compile(&cuda::render(p), arch).map(|_| ())).collect(),
    }
}
