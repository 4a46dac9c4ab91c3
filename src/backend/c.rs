//! The C backend: every kernel of a plan rendered as a C function in one translation unit, compiled with the system
//! C compiler (`$CC`, else `cc`) at `-O3` for the host CPU (see [`FLAGS`]), loaded with `dlopen`, and run on host buffers.
//!
//! Compiled libraries are kept in the user's private kernel cache ([`super::cache`]), so a plan compiles once.

use std::fmt::Write;
use std::rc::Rc;
use std::sync::Arc;

use hashbrown::HashMap;

use super::extrema::extrema_reduction;
use super::gemm::dot_reduction;

/// The run of a long row (`source::long_row`) each row reduction takes.
const ROW_RUN: usize = 4096;
use super::microkernel::{gemm, GEMM_PRELUDE};
use super::source::{buffer_decls, helpers, point_body, prelude, row_reduction, LANE_GROUP};
use crate::lower::exec::Device;
use crate::lower::index::{ravel, Idx};
use crate::lower::kernel::{c_type, Dot, Expr, Kernel, MAX_DOT_POINTS};
use crate::lower::Plan;
use crate::tensor::{DType, Tensor};

type KernelFn = unsafe extern "C" fn(*const *mut std::ffi::c_void, *const i64);

/// The C source of a plan's kernels and kernel groups.
pub fn render(plan: &Plan) -> String {
    let mut s = render_kernels(&plan.kernels);
    for (g, members) in plan.groups.iter().enumerate() {
        let ks: Vec<&Kernel> = members.iter().map(|&m| &plan.kernels[m]).collect();
        s.push_str(&render_group(&format!("g{g}"), &ks));
    }
    s
}

/// The header, then each kernel. A kernel whose text is that of an earlier one but for its name (an unrolled
/// loop's steps at the same shapes: minGPT's generation loop renders 1,955 kernels of 419 texts) is a call of the
/// earlier one, so that the compiler sees each text once.
pub fn render_kernels(kernels: &[Kernel]) -> String {
    let mut s = header();
    let mut first: HashMap<String, &str> = HashMap::new();
    for k in kernels {
        let text = render_kernel(&Kernel { name: SAME_NAME.into(), ..k.clone() });
        match first.get(&text) {
            Some(earlier) => {
                let _ = writeln!(s, "\n/* {}: as {earlier} */", k.name);
                let _ = writeln!(s, "void {}(void** b, const int64_t* p) {{\n  {earlier}(b, p);\n}}", k.name);
            }
            None => {
                s.push_str(&text.replace(SAME_NAME, &k.name));
                first.insert(text, &k.name);
            }
        }
    }
    s
}

/// The name kernels are rendered with to compare their texts (an identifier no kernel or helper has).
const SAME_NAME: &str = "ffSAMEff";

/// What every C source starts with: the includes, the vectorizable math ([`VMATH`]) and the prelude.
pub fn header() -> String {
    let mut s = String::from("#include <stdint.h>\n#include <math.h>\n#define FF_VMATH\n");
    s.push_str(VMATH);
    s.push_str(GEMM_PRELUDE);
    s.push_str(super::tile::TRANSPOSE_PRELUDE);
    s.push_str(&prelude("static inline"));
    s
}

/// Kernel `k` as the C function `k.name` (its helpers named after it), after [`header`].
pub fn render_kernel(k: &Kernel) -> String {
    let mut s = String::new();
    let (def, undef) = helpers(k, "static inline");
    let _ = writeln!(s, "\n/* {}: {} point(s) */", k.name, k.domain.iter().product::<usize>());
    s.push_str(&def);
    let _ = writeln!(s, "void {}(void** b, const int64_t* p) {{\n  (void)p;", k.name);
    s.push_str(&buffer_decls(k));
    // A kernel of no points (a zero-size dim of its output) writes nothing: its loop nest would name the
    // variables of the dims it leaves out, and layouts assume at least one point.
    if k.domain.contains(&0) {
        s.push_str("  (void)b;\n}\n");
        s.push_str(&undef);
        return s;
    }
    s.push_str(&pre_values(k));
    // Each piece of the domain (of a reduction's output domain) gets its own loop nest: a reduction's row
    // layout where that pays, else the plain nest. A reduction's piece is a block of its own (its accumulators).
    // A scatter runs its points in row-major order, in one nest (see `Kernel::ordered`).
    let pieces = match crate::lower::specialize::pieces(k) {
        // Each piece's adjacent loops that its index forms move together run as one (longer rows to vectorize).
        Some(ps) if !k.ordered() => ps.iter().map(|p| crate::lower::coalesce::coalesce(&p.kernel(k))).collect(),
        _ => vec![k.clone()],
    };
    for (n, piece) in pieces.iter().enumerate() {
        if pieces.len() > 1 {
            let _ = writeln!(s, "  /* piece {n}: {:?} */", piece.domain);
        }
        if k.reduce.is_some() {
            s.push_str("  {\n");
        }
        // A row too long for one row reduction's accumulators runs as several (`source::long_row`).
        let cut;
        let runs = match super::source::long_row(piece).filter(|_| gemm(piece, "  ").is_none()) {
            Some(v) => {
                cut = crate::lower::specialize::runs(piece, v, ROW_RUN);
                &cut[..]
            }
            None => std::slice::from_ref(piece),
        };
        for piece in runs {
            let layout = gemm(piece, "  ")
                .or_else(|| row_reduction(piece, "  "))
                .or_else(|| dot_reduction(piece, "  "))
                .or_else(|| extrema_reduction(piece, "  "))
                .or_else(|| super::tile::transposed(piece))
                .unwrap_or_else(|| nest(piece));
            // (each run's accumulators in a scope of their own)
            let (open, close) = if runs.len() > 1 { ("  {\n", "  }\n") } else { ("", "") };
            s.push_str(open);
            s.push_str(&with_trig_fixup(piece, layout));
            s.push_str(close);
        }
        if k.reduce.is_some() {
            s.push_str("  }\n");
        }
    }
    s.push_str("}\n");
    s.push_str(&undef);
    s
}

/// An elementwise piece's `layout` with its f32 sines and cosines vectorized: `ff_sin32` (`vmath.h`'s `ff_sinf` for
/// |x| < 2^30, libm's `sinf` beyond) calls libm inside the loop, which keeps GCC from vectorizing it (DETR's sine
/// position embedding: 18 ns an element). The layout calls `ff_sinf`/`ff_cosf` instead, and a second nest
/// computes again, with `ff_sin32`, every point where an argument is not below 2^30 (or is NaN), so each point gets
/// the bits it had. Not for a kernel in place, which may have overwritten what the point reads, nor an ordered one.
fn with_trig_fixup(k: &Kernel, layout: String) -> String {
    let Some(cond) = (k.reduce.is_none() && !k.in_place && !k.ordered()).then(|| large_trig(&k.value)).flatten() else {
        return layout;
    };
    let mut s = layout.replace("ff_sin32(", "ff_sinf(").replace("ff_cos32(", "ff_cosf(");
    let loops: Vec<(usize, usize)> = k.domain.iter().copied().enumerate().filter(|&(_, n)| n != 1).collect();
    let body = format!("if ({cond}) {{ {} }}", point_body(k, "").trim_end());
    s.push_str(&point_loops("{", &loops, &body));
    s
}

/// The C condition that some f32 sine or cosine `e` evaluates has an argument not below 2^30 in magnitude (or NaN),
/// evaluated only where `e` evaluates it (a select's arm only where it is taken); `None` where `e` has none.
fn large_trig(e: &Expr) -> Option<String> {
    use crate::tensor::ops::Unary;
    let any = |parts: Vec<Option<String>>| {
        let parts: Vec<String> = parts.into_iter().flatten().collect();
        (!parts.is_empty()).then(|| format!("({})", parts.join(" || ")))
    };
    match e {
        Expr::Unary(Unary::Sin | Unary::Cos, DType::F32, a) => {
            let here = format!("!(fabsf((float)({})) < 0x1p30f)", crate::lower::kernel::render(a, "a"));
            any(vec![Some(here), large_trig(a)])
        }
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => large_trig(a),
        Expr::Binary(_, _, _, a, b) => any(vec![large_trig(a), large_trig(b)]),
        Expr::Where(c, a, b) => {
            let arms = match (large_trig(a), large_trig(b)) {
                (None, None) => None,
                (x, y) => Some(format!(
                    "({} ? {} : {})",
                    crate::lower::kernel::render(c, "a"),
                    x.unwrap_or_else(|| "0".into()),
                    y.unwrap_or_else(|| "0".into())
                )),
            };
            any(vec![large_trig(c), arms])
        }
        Expr::Gather { index, .. } => large_trig(index),
        _ => None,
    }
}

/// The statements computing a kernel's pres ([`Kernel::pre`]) before its loop nest: pre `s` into the local array
/// `fv<s>`, in a block whose `a0` is that array, by the layout its own kernel would take (the pre reads the
/// kernel's other arguments).
fn pre_values(k: &Kernel) -> String {
    let mut s = String::new();
    for (slot, p) in k.pre.iter().enumerate() {
        let t = c_type(p.out_dtype);
        let n = p.domain.iter().product::<usize>().max(1);
        let _ = writeln!(s, "  {t} fv{slot}[{n}];\n  {{\n  {t}* a0 = fv{slot};");
        let layout = gemm(p, "  ")
            .or_else(|| row_reduction(p, "  "))
            .or_else(|| dot_reduction(p, "  "))
            .or_else(|| extrema_reduction(p, "  "))
            .unwrap_or_else(|| nest(p));
        s.push_str(&layout);
        s.push_str("  }\n");
    }
    s
}

/// A kernel group as the C function `name`: one call for independent kernels (the members, by their names), bit
/// `j` of `p[0]` saying whether member `j` runs; each member's buffers and integers follow the previous one's.
pub fn render_group(name: &str, members: &[&Kernel]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n/* group {name}: one call for independent kernels */\nvoid {name}(void** b, const int64_t* p) {{"
    );
    let (mut b0, mut p0) = (0, 1);
    for (j, k) in members.iter().enumerate() {
        let _ = writeln!(s, "  if ((p[0] >> {j}) & 1) {}(b + {b0}, p + {p0});", k.name);
        b0 += k.args.len();
        p0 += k.params;
    }
    s.push_str("}\n");
    s
}

/// A kernel's loop nest: one loop per domain variable (loops of one iteration left out: their variable appears in
/// no expression), the point's body inside; an elementwise kernel's innermost loop gets [`inner_loop_pragmas`].
fn nest(k: &Kernel) -> String {
    let mut s = String::new();
    let loops: Vec<(usize, usize)> = k.domain.iter().copied().enumerate().filter(|&(_, n)| n != 1).collect();
    let (original, dotted);
    original = k;
    let k = match dot_prepass(k, &loops) {
        Some((pre, kernel)) => {
            // A block of its own: the arrays are the piece's.
            s.push_str("  {\n");
            s.push_str(&pre);
            dotted = kernel;
            &dotted
        }
        None => k,
    };
    let mut ind = String::from("  ");
    for (j, &(v, n)) in loops.iter().enumerate() {
        // A scatter's points may write one element (duplicate indices): no `ivdep` for it.
        if j + 1 == loops.len() && k.reduce.is_none() && !k.ordered() {
            s.push_str(&inner_loop_pragmas(&ind));
        }
        let _ = writeln!(s, "{ind}for (int64_t i{v} = 0; i{v} < {n}; i{v}++) {{");
        ind.push_str("  ");
    }
    s.push_str(&point_body(k, &ind));
    for _ in &loops {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    if !std::ptr::eq(k, original) {
        s.push_str("  }\n");
    }
    s
}

/// For an elementwise kernel whose value holds dot products (a matmul fused into it, [`Expr::Dot`]): statements
/// that compute every dot at every point before the nest, the reduction outermost and the points inside it (so the
/// innermost loop streams a row of the matmul's right operand, vectorized, as the GEMV layout does), each product
/// added to partial sum `k % 4` of its point and the partial sums combined as [`Expr::Dot`] says (the same bits as
/// `ff_dotf`); and the kernel with each dot read from its array. `None` where there is no dot (or it would not fit
/// the stack: the dots are then computed per point by `ff_dotf`).
fn dot_prepass(k: &Kernel, loops: &[(usize, usize)]) -> Option<(String, Kernel)> {
    let mut dots = Vec::new();
    collect_dots(&k.value, &mut dots);
    let points: usize = k.domain.iter().product();
    if dots.is_empty() || k.reduce.is_some() || k.ordered() || points > MAX_DOT_POINTS {
        return None;
    }
    let vars: Vec<Idx> = k.domain.iter().enumerate().map(|(v, &n)| Idx::var(v, n)).collect();
    let pos = ravel(&vars, &k.domain);
    // Dots that read the same row of `a` and rows of `b` at a constant distance (the chunks of one matmul's
    // result) are computed together, so each index's row of `b` is read as one run.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (d, dot) in dots.iter().enumerate() {
        let joins = |g: &Vec<usize>| {
            let f = &dots[g[0]];
            g.len() < DOT_BLOCK
                && (f.a, &f.a_at, f.a_step, f.b, f.b_step, f.len)
                    == (dot.a, &dot.a_at, dot.a_step, dot.b, dot.b_step, dot.len)
                && dot.b_at.add(&f.b_at.scale(-1)).as_const().is_some()
        };
        match groups.iter_mut().find(|g| joins(g)) {
            Some(g) => g.push(d),
            None => groups.push(vec![d]),
        }
    }
    let mut s = String::new();
    for d in 0..dots.len() {
        let _ = writeln!(s, "  float ffd{d}[{points}]; const float* a{} = ffd{d};", k.args.len() + d);
    }
    for g in &groups {
        s.push_str(&dot_group(&dots, g, points, loops, &pos.render()));
    }
    let mut out = k.clone();
    let mut next = k.args.len();
    out.value = replace_dots(&k.value, &mut |_| {
        next += 1;
        Expr::Load { arg: next - 1, at: pos.clone(), dtype: DType::F32 }
    });
    Some((s, out))
}

/// At most this many dots are computed in one pass over their operands (each with 4 partial sums per point).
const DOT_BLOCK: usize = 4;

/// The statements computing the dots `group` (indices into `dots`, all reading one row of `a`) into `ffd<d>`.
fn dot_group(dots: &[Dot], group: &[usize], points: usize, loops: &[(usize, usize)], p: &str) -> String {
    let f = &dots[group[0]];
    let n = group.len();
    let mut s = format!("  {{\n  float ffl[4][{n}][{points}];\n");
    let _ = writeln!(s, "  for (int64_t q = 0; q < {}; q++) ((float*)ffl)[q] = 0.0f;", 4 * n * points);
    let a = format!("a{}[{} + kk * {}]", f.a, f.a_at.render(), f.a_step);
    let b = |d: usize| format!("a{}[{} + kk * {}]", dots[d].b, dots[d].b_at.render(), dots[d].b_step);
    // Groups of LANE_GROUP indices per lane: each point's partial sums are loaded once per group, fed their
    // indices in increasing order and stored (as the GEMV layout's `grouped_lanes`); the rest one at a time.
    let lanes_group = 4 * LANE_GROUP;
    let full = f.len - f.len % lanes_group;
    let mut body = String::new();
    for (j, _) in group.iter().enumerate() {
        let _ = write!(body, "float t{j} = fl[{j}][{p}]; ");
    }
    for g in 0..LANE_GROUP {
        let _ = write!(body, "{{ int64_t kk = q + {o} + ln; float av = {a};", o = 4 * g);
        for (j, &d) in group.iter().enumerate() {
            let _ = write!(body, " t{j} += av * {};", b(d));
        }
        body.push_str(" } ");
    }
    for (j, _) in group.iter().enumerate() {
        let _ = write!(body, "fl[{j}][{p}] = t{j}; ");
    }
    let head = format!(
        "for (int64_t q = 0; q < {full}; q += {lanes_group}) for (int ln = 0; ln < 4; ln++) {{\n    float (*fl)[{points}] = ffl[ln];"
    );
    s.push_str(&point_loops(&head, loops, &body));
    let mut body = format!("float av = {a};");
    for (j, &d) in group.iter().enumerate() {
        let _ = write!(body, " fl[{j}][{p}] += av * {};", b(d));
    }
    let head = format!("for (int64_t kk = {full}; kk < {}; kk++) {{\n    float (*fl)[{points}] = ffl[kk & 3];", f.len);
    s.push_str(&point_loops(&head, loops, &body));
    for (j, &d) in group.iter().enumerate() {
        let _ = writeln!(
            s,
            "  for (int64_t q = 0; q < {points}; q++) ffd{d}[q] = (ffl[0][{j}][q] + ffl[1][{j}][q]) + (ffl[2][{j}][q] + ffl[3][{j}][q]);"
        );
    }
    s.push_str("  }\n");
    s
}

/// `head {` then the loops over the points (`loops`, the innermost vectorized) around `body`, then `}`.
fn point_loops(head: &str, loops: &[(usize, usize)], body: &str) -> String {
    let mut s = format!("  {head}\n");
    let mut ind = String::from("    ");
    for (j, &(v, n)) in loops.iter().enumerate() {
        if j + 1 == loops.len() {
            s.push_str(&inner_loop_pragmas(&ind));
        }
        let _ = writeln!(s, "{ind}for (int64_t i{v} = 0; i{v} < {n}; i{v}++) {{");
        ind.push_str("  ");
    }
    let _ = writeln!(s, "{ind}{body}");
    for _ in loops {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    s.push_str("  }\n");
    s
}

fn collect_dots(e: &Expr, out: &mut Vec<Dot>) {
    replace_dots(e, &mut |d| {
        out.push(d.clone());
        Expr::Const(0.0, DType::F32)
    });
}

/// `e` with each dot that is evaluated wherever `e` is replaced by `f(dot)`, left to right. Dots in an arm of a select
/// stay (`ff_dotf` per point): their positions may be in bounds only where the condition selects that arm.
fn replace_dots(e: &Expr, f: &mut dyn FnMut(&Dot) -> Expr) -> Expr {
    if let Expr::Dot(d) = e {
        return f(d);
    }
    let mut r = |a: &Expr| Box::new(replace_dots(a, f));
    match e {
        Expr::Unary(op, t, a) => Expr::Unary(*op, *t, r(a)),
        Expr::Cast(t, a) => Expr::Cast(*t, r(a)),
        Expr::Binary(op, c, t, a, b) => {
            let a = r(a);
            Expr::Binary(*op, *c, *t, a, r(b))
        }
        Expr::Where(c, a, b) => Expr::Where(r(c), a.clone(), b.clone()),
        Expr::Gather { arg, at, index, stride, extent, dtype } => {
            Expr::Gather { arg: *arg, at: at.clone(), index: r(index), stride: *stride, extent: *extent, dtype: *dtype }
        }
        _ => e.clone(),
    }
}

/// Pragmas before a kernel's innermost loop. `ivdep`: iterations carry no dependence (a kernel in place reads, at
/// each point, only the element it writes or elements no point writes), so GCC need not prove that the output
/// does not alias the inputs. `unroll 1`: GCC 12.2 at -O3 fully unrolls a short innermost loop and then
/// vectorizes the loop around it, and that miscompiled selects twice: nested selects on a loaded value in a loop
/// of 3 (`corpus/micro/views.py::write_through_unsqueeze`) and a select on a byte mask in loops of 4 and 16
/// (`corpus/micro/ops.py::select_by_mask`, fuzz seed 31134). Left rolled, the innermost loop is vectorized itself
/// (or stays scalar when short), correctly.
fn inner_loop_pragmas(ind: &str) -> String {
    format!("{ind}#pragma GCC ivdep\n{ind}#pragma GCC unroll 1\n")
}

/// Vectorizable f32 math (`ff_expf` and friends, within 2 ulp; see the header), which the C kernels use in place
/// of libm's scalar calls.
const VMATH: &str = include_str!("vmath.h");

/// Compiler flags: `-O3` for the host CPU, no contraction into fused multiply-adds (results round as the
/// reference interpreter's do), no `errno` from math functions (so that `sqrtf` and friends vectorize; no
/// result changes), and no floating-point traps (`-fno-trapping-math`: kernels never read the exception flags, so
/// a float comparison may be evaluated where the source would skip it; no value changes). With traps on, GCC 12
/// kept `a & b` of float comparisons converted to float (yolact's crop mask in its matmul's epilogue) as
/// branches it would not if-convert, and the loop stayed scalar: 7.6 ms for the kernel, 0.8 ms without.
///
/// On x86-64, `-mprefer-vector-width=512`: GCC 12 targets 256-bit vectors by default even where the CPU has AVX-512,
/// and the transcendental loops are bound by arithmetic, which 16 lanes do in about two thirds of the time of 8
/// (a sigmoid over 388k f32 in cache: 0.172 -> 0.112 ms; yolov3 0.58 -> 0.53 ms, ssd 0.51 -> 0.455, yolact 1.28 ->
/// 1.17, `compare --measure`, one thread, two sittings; lstm and seq2seq within noise). Values do not change: no
/// loop is reassociated (reductions fold in lanes the kernel names), only wider vectors do the same operations.
/// Without AVX-512 the preference has no effect.
const FLAGS: &[&str] =
    &["-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared", "-w"];

/// The optimization level of a source of `split::SPLIT_LINES` lines or more (loops unrolled by the hundred: minGPT's
/// generation, 39,625 lines after equal kernels are merged), in place of `-O3`: `-O2` with the vectorizer at its
/// dynamic cost model compiled that source in 34 s against 66 s at `-O3` (one core, GCC 12), and the eight workloads
/// ran 0 to 14% slower with it (`compare --measure`, one sitting), which such a program's run pays back only after
/// hundreds of runs; it is the compile that users wait for.
const LARGE_LEVEL: &[&str] = &["-O2", "-ftree-vectorize", "-fvect-cost-model=dynamic"];

/// The x86-64 preference for 512-bit vectors (see [`FLAGS`]).
const X86_FLAGS: &[&str] = &["-mprefer-vector-width=512"];

/// Flags of the CUDA emulator's C (`-O1`: it is compiled once per plan and run for checking).
const EMU_FLAGS: &[&str] = &["-std=gnu11", "-O1", "-ffp-contract=off", "-pthread", "-fPIC", "-shared", "-w"];

/// The C compiler: `$CC`, else `cc`.
fn cc() -> String {
    std::env::var("CC").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "cc".into())
}

/// Compiles C source to a shared library (or finds it in the kernel cache, [`super::cache`]) and loads it.
pub fn compile(source: &str) -> Result<libloading::Library, String> {
    // `FUNCFUSE_CFLAGS` replaces the flags (for experiments; results are checked all the same).
    let mut flags: Vec<String> = match std::env::var("FUNCFUSE_CFLAGS") {
        Ok(f) => f.split_whitespace().map(String::from).chain(["-fPIC", "-shared", "-w"].map(String::from)).collect(),
        Err(_) => {
            let arch = if cfg!(target_arch = "x86_64") { X86_FLAGS } else { &[] };
            let large = source.lines().count() >= super::split::SPLIT_LINES;
            let level = |f: &&'static str| -> Vec<&'static str> {
                if large && *f == "-O3" {
                    LARGE_LEVEL.to_vec()
                } else {
                    vec![*f]
                }
            };
            FLAGS.iter().flat_map(level).chain(arch.iter().copied()).map(String::from).collect()
        }
    };
    flags.extend(sanitizer_flags());
    super::cache::load(source, &cc(), &flags, "c")
}

/// Compiles the CUDA emulator's C source to a shared library (or finds it in the cache) and loads it.
pub fn compile_emu(source: &str) -> Result<libloading::Library, String> {
    let mut flags: Vec<String> = EMU_FLAGS.iter().map(|s| s.to_string()).collect();
    flags.extend(sanitizer_flags());
    super::cache::load(source, &cc(), &flags, "emu")
}

/// With `FUNCFUSE_SANITIZE=1`, kernels are built with AddressSanitizer and UndefinedBehaviorSanitizer (the process
/// must then have the ASan runtime preloaded: `LD_PRELOAD=$(cc -print-file-name=libasan.so)`). No `-g`: debug info
/// would name the working directory, and builds of one cache key must be the same bytes wherever they run.
fn sanitizer_flags() -> Vec<String> {
    match std::env::var("FUNCFUSE_SANITIZE").as_deref() {
        Ok("1") => ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
            .map(String::from)
            .to_vec(),
        _ => Vec::new(),
    }
}

/// Host buffers and compiled kernels (C, or the CUDA emulator's).
pub struct CDevice {
    pool: Pool,
    /// The library the kernels are in (a plan's own, or a batch's shared with other plans: [`super::many`]).
    _lib: Arc<libloading::Library>,
    fns: Vec<KernelFn>,
    groups: Vec<KernelFn>,
    /// The emulator's check for a barrier that not every thread of a block reached.
    emu_error: Option<unsafe extern "C" fn() -> i32>,
}

impl CDevice {
    /// Compiles and loads the kernels of `plan`.
    pub fn new(plan: &Plan) -> Result<CDevice, String> {
        CDevice::load(Arc::new(compile(&render(plan))?), &Symbols::of(plan), false)
    }

    /// Compiles and loads the CUDA kernels of `plan` for the emulator ([`super::emu`]).
    pub fn emulated(plan: &Plan) -> Result<CDevice, String> {
        CDevice::emulated_as(plan, super::emu::EMU_SMS, super::emu::EMU_REDUCE_THREADS)
    }

    /// [`CDevice::emulated`] with the launch configurations of a device of `sms` multiprocessors and block
    /// reductions of up to `reduce_threads` threads (`emulated_as(plan, 132, 256)`: an H200's).
    pub fn emulated_as(plan: &Plan, sms: u32, reduce_threads: u32) -> Result<CDevice, String> {
        let lib = compile_emu(&super::emu::render_as(plan, sms, reduce_threads))?;
        CDevice::load(Arc::new(lib), &Symbols::of(plan), true)
    }

    /// A device running the kernels and groups `symbols` names in `lib` (`emulated`: a library of the emulator).
    pub fn load(lib: Arc<libloading::Library>, symbols: &Symbols, emulated: bool) -> Result<CDevice, String> {
        let mut fns = Vec::new();
        for name in &symbols.kernels {
            // SAFETY: every kernel is rendered with exactly this signature.
            let f: libloading::Symbol<KernelFn> =
                unsafe { lib.get(name.as_bytes()) }.map_err(|e| format!("kernel {name}: {e}"))?;
            fns.push(*f);
        }
        let mut groups = Vec::new();
        for name in &symbols.groups {
            // SAFETY: every group is rendered with exactly this signature.
            let f: libloading::Symbol<KernelFn> =
                unsafe { lib.get(name.as_bytes()) }.map_err(|e| format!("kernel group {name}: {e}"))?;
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
        Ok(CDevice { pool: Pool::default(), _lib: lib, fns, groups, emu_error })
    }
}

/// The symbols of a plan's kernels (in the plan's order) and of its kernel groups in a compiled library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbols {
    pub kernels: Vec<String>,
    pub groups: Vec<String>,
}

impl Symbols {
    /// The names a plan's own library gives them: each kernel's name, `g<n>` for group `n`.
    pub fn of(plan: &Plan) -> Symbols {
        Symbols {
            kernels: plan.kernels.iter().map(|k| k.name.clone()).collect(),
            groups: (0..plan.groups.len()).map(|g| format!("g{g}")).collect(),
        }
    }
}

/// A buffer's address for a kernel. An input borrowed from the caller ([`crate::tensor::Store::borrowed`]) is
/// passed as it is, not copied: the executor shares inputs only with plans whose kernels write in place into
/// buffers they made ([`crate::lower::exec::shares_inputs`]), so no kernel writes through it.
fn ptr(t: &Tensor) -> *mut std::ffi::c_void {
    let mut b = t.buf.borrow_mut();
    crate::each_buf!(&mut *b, v => v.kernel_ptr() as *mut _)
}

/// Buffers a device allocated, by dtype and length, handed out again once nothing but the pool holds them: a
/// plan run again (or a loop body's temporaries in the next iteration) finds its working set already in memory
/// rather than faulting in fresh pages. At most [`Pool::MAX_BYTES`] are kept.
#[derive(Default)]
struct Pool {
    free: HashMap<(DType, usize), Vec<CBuf>>,
    bytes: usize,
}

impl Pool {
    const MAX_BYTES: usize = 1 << 30;

    /// A buffer of `n` elements of `d`: a free one from the pool (zeroed when `zero`), else a new zeroed one.
    fn take(&mut self, d: DType, n: usize, zero: bool) -> Result<CBuf, String> {
        // Free: only the pool holds it, and no tensor a run gave out (an output, downloaded) holds its memory.
        let free = |t: &&CBuf| Rc::strong_count(t) == 1 && Rc::strong_count(&t.buf) == 1;
        if let Some(t) = self.free.get(&(d, n)).and_then(|v| v.iter().find(free)) {
            let t = t.clone();
            if zero {
                t.buf.borrow_mut().fill_zero();
            }
            return Ok(t);
        }
        let t = Rc::new(Tensor::zeros(d, &[n])?);
        let size = n * d.size();
        if self.bytes + size <= Pool::MAX_BYTES {
            self.bytes += size;
            self.free.entry((d, n)).or_default().push(t.clone());
        }
        Ok(t)
    }

    /// A contiguous copy of `t` in a buffer from the pool.
    fn copy(&mut self, t: &Tensor) -> Result<CBuf, String> {
        if !t.is_contiguous() || t.offset + t.numel() > t.buf.borrow().len() {
            return Ok(Rc::new(t.contiguous_copy()));
        }
        let out = self.take(t.dtype(), t.numel(), false)?;
        out.buf.borrow_mut().copy_range_from(&t.buf.borrow(), t.offset, t.numel());
        Ok(out)
    }
}

/// A buffer of the C device: a tensor behind a counted pointer, so that the executor's copies of a value (memos,
/// loop state, operands) are pointer copies rather than copies of its shape and strides.
pub type CBuf = Rc<Tensor>;

impl Device for CDevice {
    type Buf = CBuf;

    fn upload(&mut self, t: &Tensor) -> Result<CBuf, String> {
        self.pool.copy(t)
    }

    fn share(&mut self, t: &Tensor) -> Result<CBuf, String> {
        if t.is_contiguous() && t.offset == 0 && t.buf.borrow().len() == t.numel() {
            return Ok(Rc::new(t.clone()));
        }
        self.upload(t)
    }

    fn adopt(&mut self, t: &Tensor) -> Result<Option<CBuf>, String> {
        let whole = t.is_contiguous() && t.offset == 0 && t.buf.borrow().len() == t.numel();
        Ok((whole && !t.buf.borrow().is_borrowed()).then(|| Rc::new(t.clone())))
    }

    fn download(&mut self, b: &CBuf, _: DType, shape: &[usize]) -> Result<Tensor, String> {
        Ok(b.restride(shape.to_vec(), crate::tensor::contiguous_strides(shape), 0))
    }

    fn host_memory(&self) -> bool {
        true
    }

    fn host_view(&mut self, b: &CBuf, d: DType, shape: &[usize]) -> Option<Tensor> {
        self.download(b, d, shape).ok() // a view of the buffer's own memory, not a copy
    }

    fn item(&mut self, b: &CBuf, _: DType) -> Result<crate::tensor::Scalar, String> {
        let store = b.buf.borrow();
        if store.len() != 1 {
            return Err(format!("a Tensor with {} elements cannot be converted to Scalar", store.len()));
        }
        Ok(store.get(0))
    }

    fn alloc(&mut self, d: DType, n: usize) -> Result<CBuf, String> {
        self.pool.take(d, n, true)
    }

    fn alloc_uninit(&mut self, d: DType, n: usize) -> Result<CBuf, String> {
        self.pool.take(d, n, false)
    }

    fn copy(&mut self, b: &CBuf, _: DType, _: usize) -> Result<CBuf, String> {
        self.upload(b)
    }

    fn launch(&mut self, k: usize, bufs: &[&CBuf], params: &[i64]) -> Result<(), String> {
        // A kernel writes `bufs[0]`: never a caller's memory read in place (see `ptr`), whatever the planner says.
        if bufs.first().is_some_and(|t| t.buf.borrow().is_borrowed()) {
            return Err(format!("kernel {k} would write into an input read in place (a planner bug)"));
        }
        let f = self.fns[k];
        self.call(f, bufs, params).map_err(|e| format!("emulated CUDA kernel {k}: {e}"))
    }

    fn launch_group(&mut self, g: usize, bufs: &[&CBuf], params: &[i64]) -> Result<(), String> {
        let f = self.groups[g];
        self.call(f, bufs, params).map_err(|e| format!("emulated CUDA kernel group g{g}: {e}"))
    }

    fn same(a: &CBuf, b: &CBuf) -> bool {
        a.same_storage(b)
    }
}

impl CDevice {
    /// Calls a kernel (or group); the error is the emulator's, if it saw one.
    fn call(&mut self, f: KernelFn, bufs: &[&CBuf], params: &[i64]) -> Result<(), &'static str> {
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
