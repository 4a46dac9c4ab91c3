//! CUDA C for the kernel IR: how each kernel maps onto threads and blocks ([`Layout`]), its launch configuration,
//! and the source text, written once for two dialects: CUDA (for NVRTC) and the emulator's C (the same kernel bodies
//! compiled by the host C compiler and run by `emu`, so that the CUDA kernels are checked on any machine).
//!
//! Layouts, chosen per kernel from its sizes alone (the rendered source does not depend on the device):
//! - `Flat`: one thread per output element, a grid-stride loop over the flattened domain.
//! - `Rows`: the leading domain dim on the grid's second dimension (`blockIdx.y`: a vectorized loop's iterations,
//!   a batch), the rest on `x`; one launch covers every row without dividing by the inner size.
//! - `BlockReduce`: one block per output element; its threads split the reduction, then combine in shared memory
//!   (ties of argmax/argmin go to the lower index, NaN propagates, as the serial fold does).
//! - `Tiled`: a matmul (a sum of `a(.., m, k) * b(.., k, n)` over k) in 16x16 output tiles; each block stages
//!   16x16 tiles of both operands, prologues applied, in shared memory. The epilogue runs on the result tile.
//!
//! Index width, also from sizes alone ([`width`]): 32-bit (`int` indices, `unsigned` coordinates recovered by
//! division by constants, which compile to multiplications) where every index value of the kernel fits; else 64-bit.
//!
//! Between `Flat` and `BlockReduce` a small model decides: sequential steps per thread times waves of the device
//! (2048 resident threads, 8 blocks of 256 per multiprocessor), the block form paying log2(block) barriers.

use std::fmt::Write;

use super::source::{helpers, point_body, store_result};
use crate::lower::index::{contiguous, with_width, Width};
use crate::lower::kernel::{c_type, reduction_parts, render, Expr, Kernel, RedOp, PRELUDE};
use crate::tensor::ops::Binary;
use crate::tensor::DType;

/// Multiprocessors of an H200: the device the layouts are modelled on (the launch uses the real count).
pub const MODEL_SMS: u32 = 132;
const TILE: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Flat,
    Rows,
    BlockReduce,
    Tiled,
}

/// Grid (x, y, z) and block sizes of one launch (blocks are one-dimensional).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub grid: (u32, u32, u32),
    pub block: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// CUDA C for NVRTC.
    Cuda,
    /// C for the host compiler, run by the emulator with the configurations of a device of `sms` multiprocessors
    /// and block reductions of at most `reduce_threads` threads.
    Emu { sms: u32, reduce_threads: u32 },
}

fn outputs(k: &Kernel) -> usize {
    k.domain.iter().product()
}

fn count(k: &Kernel) -> usize {
    k.reduce.as_ref().map_or(1, |r| r.extents.iter().product())
}

/// Whether expression `e` reads domain or reduction variable `v`.
pub fn uses_var(e: &Expr, v: usize) -> bool {
    match e {
        Expr::Load { at, .. } | Expr::Local { at, .. } | Expr::Index(at) | Expr::NonNeg(at) => at.mentions(v),
        Expr::Const(..) | Expr::Acc(_) => false,
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => uses_var(a, v),
        Expr::Binary(_, _, _, a, b) => uses_var(a, v) || uses_var(b, v),
        Expr::Where(c, a, b) => uses_var(c, v) || uses_var(a, v) || uses_var(b, v),
        Expr::Gather { at, index, .. } => at.mentions(v) || uses_var(index, v),
        Expr::Dot(d) => d.a_at.mentions(v) || d.b_at.mentions(v),
    }
}

/// The two operands of a matmul-shaped reduction: a sum over one variable k of `a * b` (tiles multiply in double), where `a` does
/// not read the last domain variable (n) and `b` does not read the one before (m).
fn matmul_operands(k: &Kernel) -> Option<(&Expr, &Expr)> {
    let red = k.reduce.as_ref()?;
    let d = k.domain.len();
    if red.op != RedOp::Sum || red.extents.len() != 1 || d < 2 {
        return None;
    }
    let Expr::Binary(Binary::Mul, DType::F64 | DType::F32, _, a, b) = &k.value else { return None };
    let (m, n) = (d - 2, d - 1);
    (!uses_var(a, n) && !uses_var(b, m)).then_some((&**a, &**b))
}

/// How kernel `k` maps onto the GPU.
pub fn layout(k: &Kernel) -> Layout {
    let d = k.domain.len();
    if k.flat || (k.reduce.is_none() && k.ordered()) {
        return Layout::Flat;
    }
    if k.reduce.is_none() {
        let rest: usize = k.domain.iter().skip(1).product();
        return if d >= 2 && (2..=65535).contains(&k.domain[0]) && rest >= 128 { Layout::Rows } else { Layout::Flat };
    }
    if matmul_operands(k).is_some() && k.domain[d - 2] >= TILE && k.domain[d - 1] >= TILE && count(k) >= TILE {
        return Layout::Tiled;
    }
    let (out, n) = (outputs(k) as f64, count(k) as f64);
    let sms = MODEL_SMS as f64;
    let serial = n * (out / (sms * 2048.0)).ceil();
    let block = block_for(count(k)) as f64;
    let coop = ((n / block).ceil() + block.log2()) * (out / (sms * 8.0)).ceil();
    if n >= 32.0 && coop < serial {
        Layout::BlockReduce
    } else {
        Layout::Flat
    }
}

fn block_for(count: usize) -> u32 {
    count.next_power_of_two().clamp(32, 256) as u32
}

fn threads_for(n: usize) -> u32 {
    if n >= 256 {
        256
    } else {
        (n.max(1).div_ceil(32) * 32) as u32
    }
}

/// The launch configuration of kernel `k` on a device with `sms` multiprocessors: at most 16 blocks per
/// multiprocessor (grid-stride loops cover the rest).
pub fn launch_config(k: &Kernel, sms: u32) -> Config {
    config(k, sms, 256)
}

/// [`launch_config`] with block reductions using at most `reduce_threads` threads (any count works: the kernels
/// loop over the block size; the emulator uses fewer to run faster).
pub fn config(k: &Kernel, sms: u32, reduce_threads: u32) -> Config {
    let cap = (sms.max(1) * 16) as usize;
    let grid = |units: usize, cap: usize| units.clamp(1, cap.max(1)) as u32;
    match layout(k) {
        // A scatter may write one element from several points: one thread runs them in order (correct first; on a
        // GPU this is slow for large scatters).
        Layout::Flat if k.ordered() => Config { grid: (1, 1, 1), block: 1 },
        Layout::Flat => {
            let total = outputs(k);
            let block = threads_for(total);
            Config { grid: (grid(total.div_ceil(block as usize), cap), 1, 1), block }
        }
        Layout::Rows => {
            let rows = k.domain[0];
            let rest: usize = k.domain[1..].iter().product();
            let block = threads_for(rest);
            // No rows (a zero-size dim): one layer, whose grid-stride loop over the rows runs no iteration (a grid
            // of zero blocks is not a valid launch).
            let y = rows.clamp(1, 65535);
            Config { grid: (grid(rest.div_ceil(block as usize), cap / y), y as u32, 1), block }
        }
        Layout::BlockReduce => {
            Config { grid: (grid(outputs(k), cap), 1, 1), block: block_for(count(k)).min(reduce_threads.max(1)) }
        }
        Layout::Tiled => Config { grid: (grid(tiles(k), cap), 1, 1), block: (TILE * TILE) as u32 },
    }
}

fn tiles(k: &Kernel) -> usize {
    let d = k.domain.len();
    k.domain[..d - 2].iter().product::<usize>() * k.domain[d - 2].div_ceil(TILE) * k.domain[d - 1].div_ceil(TILE)
}

/// Divisions and modulos of 32-bit indices that may be negative (floor semantics, as `ff_div` / `ff_mod`).
const PRELUDE32: &str =
    "FF_FN int ff_div32(int a, int b) { int q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
FF_FN int ff_mod32(int a, int b) { int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
";

/// The index width of kernel `k`: 32-bit where every index value it computes fits in an `int` (its points, the
/// loops of its layout, every load, store and view-inverse index), decided from its sizes alone; else 64-bit.
pub fn width(k: &Kernel) -> Width {
    let limit = i32::MAX as usize - TILE;
    let sizes = outputs(k) <= limit && count(k) <= limit && k.domain.iter().all(|&n| n <= limit);
    let views = k.views.iter().all(|(shape, strides)| {
        let n: u128 = shape.iter().map(|&d| d as u128).product();
        let reach: u128 =
            shape.iter().zip(strides).map(|(&d, &st)| d.saturating_sub(1) as u128 * st.unsigned_abs() as u128).sum();
        n <= limit as u128 && reach <= limit as u128
    });
    let exprs = k.store.fits_i32()
        && expr_fits(&k.value)
        && k.epilogue.as_ref().is_none_or(|(_, e)| expr_fits(e))
        && k.pre.iter().all(|p| width(p) == Width::I32);
    if sizes && views && exprs {
        Width::I32
    } else {
        Width::I64
    }
}

fn expr_fits(e: &Expr) -> bool {
    match e {
        Expr::Load { at, .. } | Expr::Local { at, .. } | Expr::Index(at) | Expr::NonNeg(at) => at.fits_i32(),
        Expr::Gather { at, index, .. } => at.fits_i32() && expr_fits(index),
        // The dot's own steps are 64-bit (`ff_dotf`); its first positions are index forms.
        Expr::Dot(d) => d.a_at.fits_i32() && d.b_at.fits_i32(),
        Expr::Const(..) | Expr::Acc(_) => true,
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => expr_fits(a),
        Expr::Binary(_, _, _, a, b) => expr_fits(a) && expr_fits(b),
        Expr::Where(c, a, b) => expr_fits(c) && expr_fits(a) && expr_fits(b),
    }
}

/// The C type of index variables of width `w`.
fn ity(w: Width) -> &'static str {
    match w {
        Width::I64 => "int64_t",
        Width::I32 => "int",
    }
}

/// `i<v> = ...` for each `(v, extent)`, unravelling the linear index `from` (last variable fastest), which is less
/// than the extents' product. At 32 bits, `unsigned` divisions and modulos by constants (multiplications on the
/// device), none for extents of 1 nor for the outermost variable.
fn unravel_vars(s: &mut String, vars: &[(usize, usize)], from: &str, ind: &str, w: Width) {
    if w == Width::I64 {
        let _ = writeln!(s, "{ind}int64_t rest = {from}; (void)rest;");
        for &(v, n) in vars.iter().rev() {
            let _ = writeln!(s, "{ind}int64_t i{v} = rest % {n}; rest /= {n};");
        }
        return;
    }
    let outer = vars.iter().position(|&(_, n)| n > 1);
    let _ = writeln!(s, "{ind}unsigned rest = {from}; (void)rest;");
    for (j, &(v, n)) in vars.iter().enumerate().rev() {
        if n <= 1 {
            let _ = writeln!(s, "{ind}const int i{v} = 0; (void)i{v};");
        } else if Some(j) == outer {
            let _ = writeln!(s, "{ind}const int i{v} = (int)rest;");
        } else {
            let _ = writeln!(s, "{ind}const int i{v} = (int)(rest % {n}u); rest /= {n}u;");
        }
    }
}

/// The view-inverse helpers of a 32-bit kernel (as [`crate::lower::kernel::view_helpers`], in `unsigned`), with
/// the `vi<k>` names visible inside it, and their `#undef`s.
fn helpers32(k: &Kernel) -> (String, String) {
    let (mut def, mut undef) = (String::new(), String::new());
    for (n, (shape, strides)) in k.views.iter().enumerate() {
        let cs = contiguous(shape);
        let mut dims: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] > 1).collect();
        dims.sort_by_key(|&d| std::cmp::Reverse(strides[d]));
        let name = format!("{}_vi{n}", k.name);
        let _ = writeln!(def, "FF_FN int {name}(int r) {{");
        if shape.contains(&0) {
            let _ = writeln!(def, "  (void)r; return -1;\n}}");
        } else {
            let _ =
                writeln!(def, "  unsigned u, q; int out = 0;\n  if (r < 0) return -1;\n  u = (unsigned)r; (void)q;");
            for d in dims {
                let _ = writeln!(
                    def,
                    "  q = u / {st}u; if (q >= {m}u) return -1; u -= q * {st}u; out += (int)q * {c};",
                    st = strides[d],
                    m = shape[d],
                    c = cs[d]
                );
            }
            let _ = writeln!(def, "  return u == 0 ? out : -1;\n}}");
        }
        let _ = writeln!(def, "#define vi{n} {name}");
        let _ = writeln!(undef, "#undef vi{n}");
    }
    (def, undef)
}

/// The source of every kernel in `kernels` (without a header: [`super::cuda`] and [`super::emu`] add theirs).
pub fn render_body(kernels: &[Kernel], dialect: Dialect) -> String {
    let mut s = body_prelude();
    for k in kernels {
        s.push_str(&render_kernel(k, dialect));
    }
    s
}

/// What the kernels of [`render_body`] follow: the prelude's helpers, in 64-bit and 32-bit indices.
pub fn body_prelude() -> String {
    format!("{PRELUDE}{PRELUDE32}")
}

/// The source of kernel `k` (its entry point named `k.name`, its helpers after it), after [`body_prelude`].
pub fn render_kernel(k: &Kernel, dialect: Dialect) -> String {
    let mut s = String::new();
    let w = width(k);
    with_width(w, || kernel_source(&mut s, k, w, dialect));
    s
}

/// The source of kernel `k` with indices of width `w`.
fn kernel_source(s: &mut String, k: &Kernel, w: Width, dialect: Dialect) {
    let (def, undef) = if w == Width::I32 { helpers32(k) } else { helpers(k, "FF_FN") };
    let lay = layout(k);
    let bits = if w == Width::I32 { 32 } else { 64 };
    let _ = writeln!(s, "\n/* {}: {} point(s), {lay:?}, {bits}-bit indices */", k.name, outputs(k));
    s.push_str(&def);
    let mut params: Vec<String> = k
        .args
        .iter()
        .enumerate()
        .map(|(n, d)| format!("{}{}* a{n}", if n == 0 { "" } else { "const " }, c_type(*d)))
        .collect();
    params.extend((0..k.params).map(|n| format!("int64_t p{n}")));
    let _ = writeln!(s, "FF_DEV void {}_dev({}) {{", k.name, params.join(", "));
    if k.params > 0 {
        let list: Vec<String> = (0..k.params).map(|n| format!("p{n}")).collect();
        let _ = writeln!(s, "  const int64_t p[{}] = {{{}}}; (void)p;", k.params, list.join(", "));
    }
    // In 64-bit indices: the pres' loop variables are `int64_t`.
    s.push_str(&with_width(Width::I64, || super::source::pre_values_cuda(k)));
    match lay {
        Layout::Flat => flat(s, k, w),
        Layout::Rows => rows(s, k, w),
        Layout::BlockReduce => block_reduce(s, k, w),
        Layout::Tiled => tiled(s, k, w),
    }
    s.push_str("}\n");
    s.push_str(&undef);
    let args: Vec<String> =
        (0..k.args.len()).map(|n| format!("a{n}")).chain((0..k.params).map(|n| format!("p{n}"))).collect();
    match dialect {
        Dialect::Cuda => {
            let _ = writeln!(
                s,
                "extern \"C\" __global__ void {name}({}) {{ {name}_dev({}); }}",
                params.join(", "),
                args.join(", "),
                name = k.name
            );
        }
        Dialect::Emu { sms, reduce_threads } => {
            let c = config(k, sms, reduce_threads);
            let _ = writeln!(
                s,
                "static void {name}_thread(void** b, const int64_t* p) {{ (void)p; {name}_dev({}); }}\n\
                 void {name}(void** b, const int64_t* p) {{ ff_launch({}, {}, {}, {}, {}, {name}_thread, b, p); }}",
                host_args(k, 0, 0).join(", "),
                c.grid.0,
                c.grid.1,
                c.grid.2,
                c.block,
                u8::from(coop(k)),
                name = k.name
            );
        }
    }
}

/// Whether a kernel's threads meet at barriers.
fn coop(k: &Kernel) -> bool {
    matches!(layout(k), Layout::BlockReduce | Layout::Tiled) || !k.pre.is_empty()
}

/// A kernel's arguments read from the C calling convention's `void** b` and `const int64_t* p`, from offsets.
fn host_args(k: &Kernel, b0: usize, p0: usize) -> Vec<String> {
    let mut args: Vec<String> = k
        .args
        .iter()
        .enumerate()
        .map(|(n, d)| format!("({}{}*)b[{}]", if n == 0 { "" } else { "const " }, c_type(*d), b0 + n))
        .collect();
    args.extend((0..k.params).map(|n| format!("p[{}]", p0 + n)));
    args
}

/// The launch configuration of a group: the widest grid and block of its members, one grid layer per member. A
/// chain's members share one iteration space (one domain, or a single point as `[1]` and `[]`), hence one layout
/// (flat where one is a reduction, `Kernel::flat`) and configuration (`lower::chain`): each thread runs every member
/// at its points, so what an earlier member wrote at a point is there for a later one.
pub fn group_config(members: &[&Kernel], chained: bool, sms: u32, reduce_threads: u32) -> Config {
    if chained {
        return config(members[0], sms, reduce_threads);
    }
    let cs: Vec<Config> = members.iter().map(|k| config(k, sms, reduce_threads)).collect();
    Config {
        grid: (
            cs.iter().map(|c| c.grid.0).max().unwrap_or(1),
            cs.iter().map(|c| c.grid.1).max().unwrap_or(1),
            members.len() as u32,
        ),
        block: cs.iter().map(|c| c.block).max().unwrap_or(32),
    }
}

/// The entry points of a plan's kernel groups (`g<n>`): the third grid dimension picks the member, the mask (first
/// parameter) says which members run. Members that do not use the second grid dimension run on its first layer.
pub fn render_groups(kernels: &[Kernel], groups: &[Vec<usize>], chained: &[bool], dialect: Dialect) -> String {
    let mut s = String::new();
    for (g, members) in groups.iter().enumerate() {
        let ks: Vec<&Kernel> = members.iter().map(|&m| &kernels[m]).collect();
        let chain = chained.get(g).copied().unwrap_or(false);
        s.push_str(&render_group(&format!("g{g}"), &ks, chain, dialect));
    }
    s
}

/// The entry point `name` of a kernel group of `members` (called by their names), as [`render_groups`] renders it;
/// a chain's members run one after another in every thread, in order.
pub fn render_group(name: &str, members: &[&Kernel], chained: bool, dialect: Dialect) -> String {
    let mut s = String::new();
    let mut cases = String::new();
    let mut params = vec!["int64_t mask".to_string()];
    let (mut b0, mut p0) = (0, 1);
    for (j, k) in members.iter().enumerate() {
        let layer = if layout(k) == Layout::Rows || chained { String::new() } else { " && blockIdx.y == 0".into() };
        let args: Vec<String> = match dialect {
            Dialect::Cuda => {
                let mut a: Vec<String> = (0..k.args.len()).map(|n| format!("m{j}a{n}")).collect();
                a.extend((0..k.params).map(|n| format!("m{j}p{n}")));
                params.extend(
                    k.args
                        .iter()
                        .enumerate()
                        .map(|(n, d)| format!("{}{}* m{j}a{n}", if n == 0 { "" } else { "const " }, c_type(*d))),
                );
                params.extend((0..k.params).map(|n| format!("int64_t m{j}p{n}")));
                a
            }
            Dialect::Emu { .. } => host_args(k, b0, p0),
        };
        b0 += k.args.len();
        p0 += k.params;
        let mut call = format!("if ((mask >> {j}) & 1{layer}) {}_dev({});", k.name, args.join(", "));
        if chained && j > 0 && !k.pre.is_empty() {
            // Every thread has finished the earlier members before this one's pres write their shared arrays: two
            // members of one body (a batch's library names kernels by their source) share them (heldout15's
            // `mamba2_step`: the second step's pres overwrote the first's while its points still read them).
            call = format!("__syncthreads(); {call}");
        }
        let _ = if chained { writeln!(cases, "    {call}") } else { writeln!(cases, "    case {j}: {call} break;") };
    }
    let body = if chained { cases } else { format!("  switch (blockIdx.z) {{\n{cases}  }}\n") };
    match dialect {
        Dialect::Cuda => {
            let _ = writeln!(s, "\nextern \"C\" __global__ void {name}({}) {{\n{body}}}", params.join(", "));
        }
        Dialect::Emu { sms, reduce_threads } => {
            let c = group_config(members, chained, sms, reduce_threads);
            let any_coop = members.iter().any(|k| coop(k));
            let _ = writeln!(
                s,
                "\nstatic void {name}_thread(void** b, const int64_t* p) {{\n  const int64_t mask = p[0];\n{body}}}\n\
                 void {name}(void** b, const int64_t* p) {{ ff_launch({}, {}, {}, {}, {}, {name}_thread, b, p); }}",
                c.grid.0,
                c.grid.1,
                c.grid.2,
                c.block,
                u8::from(any_coop)
            );
        }
    }
    s
}

/// The head of a grid-stride loop of `t` over `[start, n)` by `step`, in width `w` (`unsigned` at 32 bits: `n`
/// is below 2^31 and a step below 2^31, so `t` does not wrap).
fn stride_loop(s: &mut String, w: Width, start: &str, n: usize, step: &str) {
    let _ = match w {
        Width::I64 => writeln!(s, "  for (int64_t t = {start}; t < {n}LL; t += {step}) {{"),
        Width::I32 => writeln!(s, "  for (unsigned t = {start}; t < {n}u; t += {step}) {{"),
    };
}

fn flat(s: &mut String, k: &Kernel, w: Width) {
    let total = outputs(k);
    match w {
        Width::I64 => stride_loop(
            s,
            w,
            "blockIdx.x * (int64_t)blockDim.x + threadIdx.x",
            total,
            "(int64_t)gridDim.x * blockDim.x",
        ),
        Width::I32 => stride_loop(s, w, "blockIdx.x * blockDim.x + threadIdx.x", total, "gridDim.x * blockDim.x"),
    }
    let vars: Vec<(usize, usize)> = k.domain.iter().copied().enumerate().collect();
    unravel_vars(s, &vars, "t", "    ", w);
    s.push_str(&point_body(k, "    "));
    s.push_str("  }\n");
}

fn rows(s: &mut String, k: &Kernel, w: Width) {
    let rest: usize = k.domain[1..].iter().product();
    let _ = writeln!(s, "  for ({} i0 = blockIdx.y; i0 < {}; i0 += gridDim.y) {{", ity(w), k.domain[0]);
    match w {
        Width::I64 => {
            stride_loop(s, w, "blockIdx.x * (int64_t)blockDim.x + threadIdx.x", rest, "(int64_t)gridDim.x * blockDim.x")
        }
        Width::I32 => stride_loop(s, w, "blockIdx.x * blockDim.x + threadIdx.x", rest, "gridDim.x * blockDim.x"),
    }
    let vars: Vec<(usize, usize)> = k.domain.iter().copied().enumerate().skip(1).collect();
    unravel_vars(s, &vars, "t", "    ", w);
    s.push_str(&point_body(k, "    "));
    s.push_str("  }\n  }\n");
}

/// How two partial results combine (`acc`, `arg` with `v`, `r`): the serial update, and for argmax/argmin the
/// lower index on ties (the serial fold keeps the first).
fn combine(op: RedOp, acc_t: &str) -> String {
    let (_, update, _) = reduction_parts(op, acc_t, 1);
    match op {
        RedOp::ArgMax => {
            "if (v > acc || (v != v && acc == acc) || ((v == acc || (v != v && acc != acc)) && r < arg)) { acc = v; arg = r; }".into()
        }
        RedOp::ArgMin => {
            "if (v < acc || (v != v && acc == acc) || ((v == acc || (v != v && acc != acc)) && r < arg)) { acc = v; arg = r; }".into()
        }
        _ => update,
    }
}

fn block_reduce(s: &mut String, k: &Kernel, w: Width) {
    let red = k.reduce.as_ref().expect("a reduction");
    let acc_t = if k.value.dtype().is_float() { "double" } else { "int64_t" };
    let n = count(k);
    let (init, update, fin) = reduction_parts(red.op, acc_t, n);
    let base = k.domain.len();
    let _ = writeln!(s, "  __shared__ {acc_t} ff_sv[256];\n  __shared__ int64_t ff_sa[256];");
    stride_loop(s, w, "blockIdx.x", outputs(k), "gridDim.x");
    let vars: Vec<(usize, usize)> = k.domain.iter().copied().enumerate().collect();
    unravel_vars(s, &vars, "t", "    ", w);
    let _ = writeln!(s, "    {acc_t} acc = {init}; int64_t arg = 0;");
    match w {
        Width::I64 => {
            let _ = writeln!(s, "    for (int64_t r = threadIdx.x; r < {n}LL; r += blockDim.x) {{");
            let _ = writeln!(s, "      int64_t q = r; (void)q;");
            for (j, &m) in red.extents.iter().enumerate().rev() {
                let _ = writeln!(s, "      int64_t i{v} = q % {m}; q /= {m};", v = base + j);
            }
        }
        Width::I32 => {
            let _ = writeln!(s, "    for (unsigned r = threadIdx.x; r < {n}u; r += blockDim.x) {{");
            let vars: Vec<(usize, usize)> =
                red.extents.iter().copied().enumerate().map(|(j, m)| (base + j, m)).collect();
            unravel_vars(s, &vars, "r", "      ", w);
        }
    }
    let _ = writeln!(s, "      {acc_t} v = ({acc_t})({});\n      {update}\n    }}", render(&k.value, "a"));
    let _ = writeln!(s, "    ff_sv[threadIdx.x] = acc; ff_sa[threadIdx.x] = arg;\n    __syncthreads();");
    let _ = writeln!(s, "    unsigned w = 1; while (w < blockDim.x) w <<= 1;");
    let _ = writeln!(s, "    for (unsigned h = w >> 1; h > 0; h >>= 1) {{");
    let _ = writeln!(s, "      if (threadIdx.x < h && threadIdx.x + h < blockDim.x) {{");
    let _ = writeln!(s, "        {acc_t} v = ff_sv[threadIdx.x + h]; int64_t r = ff_sa[threadIdx.x + h];");
    let _ = writeln!(s, "        acc = ff_sv[threadIdx.x]; arg = ff_sa[threadIdx.x];");
    let _ = writeln!(s, "        {}", combine(red.op, acc_t));
    let _ = writeln!(
        s,
        "        ff_sv[threadIdx.x] = acc; ff_sa[threadIdx.x] = arg;\n      }}\n      __syncthreads();\n    }}"
    );
    let _ = writeln!(
        s,
        "    if (threadIdx.x == 0) {{\n      acc = ff_sv[0]; arg = ff_sa[0];\n      {}\n    }}\n    __syncthreads();\n  }}",
        store_result(k, &fin)
    );
}

fn tiled(s: &mut String, k: &Kernel, w: Width) {
    let (a, b) = matmul_operands(k).expect("a matmul");
    let d = k.domain.len();
    let (m, n, kv) = (d - 2, d - 1, d);
    let (bm, bn, bk) = (k.domain[m], k.domain[n], count(k));
    let (tm, tn) = (bm.div_ceil(TILE), bn.div_ceil(TILE));
    let fin =
        if k.reduce.as_ref().is_some_and(|r| r.op == RedOp::Mean) { format!("acc / {bk}.0") } else { "acc".into() };
    let _ = writeln!(
        s,
        "  __shared__ double ff_ta[{TILE}][{}];\n  __shared__ double ff_tb[{TILE}][{}];",
        TILE + 1,
        TILE + 1
    );
    let _ = writeln!(s, "  const int tx = threadIdx.x % {TILE}, ty = threadIdx.x / {TILE};");
    stride_loop(s, w, "blockIdx.x", tiles(k), "gridDim.x");
    let mut vars: Vec<(usize, usize)> = k.domain[..m].iter().copied().enumerate().collect();
    vars.push((m, tm));
    vars.push((n, tn));
    unravel_vars(s, &vars, "t", "    ", w);
    let it = ity(w);
    let _ = writeln!(s, "    const {it} m0 = i{m} * {TILE}, n0 = i{n} * {TILE};");
    let _ = writeln!(s, "    double acc = 0;");
    let _ = writeln!(s, "    for ({it} k0 = 0; k0 < {bk}; k0 += {TILE}) {{");
    let _ = writeln!(
        s,
        "      {{ {it} i{m} = m0 + ty, i{kv} = k0 + tx; ff_ta[ty][tx] = (i{m} < {bm} && i{kv} < {bk}) ? (double)({}) : 0.0; }}",
        render(a, "a")
    );
    let _ = writeln!(
        s,
        "      {{ {it} i{kv} = k0 + ty, i{n} = n0 + tx; ff_tb[ty][tx] = (i{kv} < {bk} && i{n} < {bn}) ? (double)({}) : 0.0; }}",
        render(b, "a")
    );
    let _ = writeln!(s, "      __syncthreads();");
    let _ = writeln!(
        s,
        "      for (int kk = 0; kk < {TILE} && k0 + kk < {bk}; kk++) acc += (double)(ff_ta[ty][kk] * ff_tb[kk][tx]);"
    );
    let _ = writeln!(s, "      __syncthreads();\n    }}");
    let _ = writeln!(s, "    {{ {it} i{m} = m0 + ty, i{n} = n0 + tx;");
    let _ = writeln!(s, "    if (i{m} < {bm} && i{n} < {bn}) {}\n    }}\n  }}", store_result(k, &fin));
}
