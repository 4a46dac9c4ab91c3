//! Kernel source shared by the renderers: the loop nest body of a kernel as C statements.

use std::fmt::Write;

use crate::lower::index::{ravel, Atom, Idx};
use crate::lower::kernel::{c_type, reduction_parts, render, view_helpers, Expr, Kernel, RedOp, Reduction, PRELUDE};
use crate::tensor::DType;

/// The prelude every source file starts with, with `FF_FN` defined as `fn_kw`; `FF_SIMD` asks for the loop after
/// it to be vectorized (the accumulator loop of a row reduction, whose iterations are independent).
pub fn prelude(fn_kw: &str) -> String {
    format!("#define FF_FN {fn_kw}\n#define FF_SIMD\n{PRELUDE}\n")
}

/// Declarations of a kernel's buffers from `void** b` (a0 is the output).
pub fn buffer_decls(k: &Kernel) -> String {
    let mut s = String::new();
    for (n, d) in k.args.iter().enumerate() {
        let konst = if n == 0 { "" } else { "const " };
        let _ = writeln!(s, "  {konst}{t}* a{n} = ({konst}{t}*)b[{n}];", t = c_type(*d));
    }
    s
}

/// Helper functions of a kernel (view inverses), named `<kernel>_vi<k>` and visible as `vi<k>` inside it.
pub fn helpers(k: &Kernel, fn_kw: &str) -> (String, String) {
    let prefix = format!("{}_", k.name);
    let mut def = view_helpers(k, &prefix, fn_kw);
    let mut undef = String::new();
    for n in 0..k.views.len() {
        let _ = writeln!(def, "#define vi{n} {prefix}vi{n}");
        let _ = writeln!(undef, "#undef vi{n}");
    }
    (def, undef)
}

/// The statements computing a kernel's pres ([`Kernel::pre`]) before its loop nest, on CUDA: pre `s` into the
/// shared array `fv<s>`, its points spread over the block's threads (each folding its points serially, in a block
/// whose `a0` is that array; the pre reads the kernel's other arguments), each followed by a barrier. Every block computes
/// them: `lower/pre.rs` bounds what that repeats. Every thread of a block reaches the barrier: a kernel's body
/// starts here, and a group runs a member in a whole block or not at all.
pub fn pre_values_cuda(k: &Kernel) -> String {
    let mut s = String::new();
    for (slot, p) in k.pre.iter().enumerate() {
        let t = c_type(p.out_dtype);
        let n = p.domain.iter().product::<usize>().max(1);
        let _ = writeln!(s, "  __shared__ {t} fv{slot}[{n}];");
        let _ = writeln!(s, "  for (int64_t t = threadIdx.x; t < {n}; t += blockDim.x) {{\n    {t}* a0 = fv{slot};");
        let mut stride = 1;
        for (v, &m) in p.domain.iter().enumerate().rev() {
            if m != 1 {
                let _ = writeln!(s, "    const int64_t i{v} = (t / {stride}) % {m};");
            }
            stride *= m;
        }
        s.push_str(&point_body(p, "    "));
        // Before the next pre (which may read this one) and the kernel's points.
        s.push_str("  }\n  __syncthreads();\n");
    }
    s
}

/// The statements computing and storing the element at the current domain point (`i0..`), reducing over the
/// kernel's inner variables where it has them.
pub fn point_body(k: &Kernel, indent: &str) -> String {
    let mut s = String::new();
    let out_t = c_type(k.out_dtype);
    let store = k.store.render();
    let Some(red) = &k.reduce else {
        let _ = writeln!(s, "{indent}a0[{store}] = ({out_t})({});", render(&k.value, "a"));
        return s;
    };
    let acc_t = if k.value.dtype().is_float() { "double" } else { "int64_t" };
    let count: usize = red.extents.iter().product();
    let (init, update, fin) = reduction_parts(red.op, acc_t, count);
    let _ = writeln!(s, "{indent}{acc_t} acc = {init}; int64_t arg = 0; (void)arg;");
    let base = k.domain.len();
    let mut ind = indent.to_string();
    for (j, &n) in red.extents.iter().enumerate() {
        let _ = writeln!(s, "{ind}for (int64_t i{v} = 0; i{v} < {n}; i{v}++) {{", v = base + j);
        ind.push_str("  ");
    }
    if matches!(red.op, RedOp::ArgMax | RedOp::ArgMin) {
        let vars: Vec<Idx> = red.extents.iter().enumerate().map(|(j, &n)| Idx::var(base + j, n)).collect();
        let _ = writeln!(s, "{ind}int64_t r = {};", ravel(&vars, &red.extents).render());
    }
    let _ = writeln!(s, "{ind}{acc_t} v = ({acc_t})({});", render(&k.value, "a"));
    let _ = writeln!(s, "{ind}{update}");
    for _ in &red.extents {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    let _ = writeln!(s, "{indent}{}", store_result(k, &fin));
    s
}

/// The statement storing a reduction's final value `fin` at the current domain point, through the kernel's
/// epilogue where it has one (the reduced value rounds to the reduction's dtype first, as the reference's does).
pub fn store_result(k: &Kernel, fin: &str) -> String {
    let (store, out_t) = (k.store.render(), c_type(k.out_dtype));
    match &k.epilogue {
        None => format!("a0[{store}] = ({out_t})({fin});"),
        Some((d, e)) => {
            format!("{{ {t} red = ({t})({fin}); a0[{store}] = ({out_t})({}); }}", render(e, "a"), t = c_type(*d))
        }
    }
}

/// The row [`row_reduction`] would take where it is longer than [`MAX_ROW`] (a matmul with 16000 output columns:
/// `x @ W` of a vocabulary projection): the caller cuts it into runs ([`crate::lower::specialize::runs`]), each a
/// row reduction, instead of the plain nest, which read `W` down its columns (15 ms against PyTorch's 1.2).
pub fn long_row(k: &Kernel) -> Option<usize> {
    row_of(k).filter(|&row| k.domain[row] > MAX_ROW)
}

/// The row of a floating reduction other than `any`/`all`: the domain variable that moves through the loads least
/// (the last such, on ties), where it moves them less than the last reduction variable does.
fn row_of(k: &Kernel) -> Option<usize> {
    let red = k.reduce.as_ref()?;
    let row =
        (0..k.domain.len()).filter(|&v| k.domain[v] > 1).min_by_key(|&v| (stride_sum(&k.value, v), usize::MAX - v))?;
    if !k.value.dtype().is_float() || matches!(red.op, RedOp::Any | RedOp::All) {
        return None;
    }
    let inner = k.domain.len() + red.extents.iter().rposition(|&m| m > 1)?;
    (stride_sum(&k.value, row) < stride_sum(&k.value, inner)).then_some(row)
}

/// The longest row [`row_reduction`] keeps accumulators for (on the stack).
pub const MAX_ROW: usize = 8192;

/// For a reduction over inner variables, the loop nest with a domain variable innermost and one accumulator per
/// value of it (the "row"), so that the innermost loop walks memory with that variable's stride rather than the
/// reduction's: a matmul reads rows of B rather than columns, a max over channels of an NCHW tensor reads pixels
/// side by side. The row is the domain variable that moves through the loads least, taken only where it moves
/// them less than the last reduction variable does; the other domain variables loop outside. Each element still
/// folds over the inner variables in the same order (an f32 sum in [`LANES`] interleaved partial sums), so max,
/// min, arg and prod give the plain nest's bits. `None` where this does not apply (integer or boolean
/// reductions, rows over 8192).
pub fn row_reduction(k: &Kernel, indent: &str) -> Option<String> {
    let red = k.reduce.as_ref()?;
    let row = row_of(k)?;
    let n = k.domain[row];
    if n > MAX_ROW {
        return None;
    }
    let mut s = String::new();
    let count: usize = red.extents.iter().product();
    let mut ind = indent.to_string();
    // An f32 sum or mean accumulates in f32, in LANES partial sums per output as PyTorch's CPU kernels do (its
    // goldens are f32 sums too); other reductions accumulate in double.
    let lanes = if k.value.dtype() == DType::F32 && matches!(red.op, RedOp::Sum | RedOp::Mean) { LANES } else { 1 };
    // Sums block (a float64 one in one double lane per output: the ESN's [4, 500] @ [500, 500] reads its weight
    // once per step, not per row), each output folding its terms in the same order as unblocked.
    let sums = matches!(red.op, RedOp::Sum | RedOp::Mean);
    let block = if sums { super::gemm::block_var(k, row) } else { None };
    let outer: Vec<usize> =
        (0..k.domain.len()).filter(|&v| v != row && k.domain[v] > 1 && block.is_none_or(|(b, _)| b != v)).collect();
    for &v in &outer {
        let _ = writeln!(s, "{ind}for (int64_t i{v} = 0; i{v} < {m}; i{v}++) {{", m = k.domain[v]);
        ind.push_str("  ");
    }
    if let Some((b, mr)) = block {
        let tiles = (lanes > 1)
            .then(|| super::gemm::tiled_rows(k, row, b, &ind).or_else(|| super::gemm::packed_rows(k, row, b, &ind)))
            .flatten();
        if let Some(tiles) = tiles {
            s.push_str(&tiles);
            for _ in &outer {
                ind.truncate(ind.len() - 2);
                let _ = writeln!(s, "{ind}}}");
            }
            return Some(s);
        }
        return Some(blocked_rows(k, row, (b, mr, lanes), count, s, ind, outer.len()));
    }
    let (pre, value_expr, free) = hoist_row_operands(k, row, &ind);
    let value = render(&value_expr, "a");
    s.push_str(&pre);
    let init = match red.op {
        RedOp::Max | RedOp::ArgMax => "-INFINITY",
        RedOp::Min | RedOp::ArgMin => "INFINITY",
        RedOp::Prod => "1",
        _ => "0",
    };
    let arg = matches!(red.op, RedOp::ArgMax | RedOp::ArgMin);
    // A max, min or arg of f32 values compares them in f32 (the same outcomes as in double: each is a float),
    // twice as many lanes per vector; products and other dtypes accumulate in double.
    let compares = matches!(red.op, RedOp::Max | RedOp::Min | RedOp::ArgMax | RedOp::ArgMin);
    let acc_ty = if compares && k.value.dtype() == DType::F32 { "float" } else { "double" };
    // The index an arg reduction keeps, in 32 bits beside f32 values where every position fits (as many lanes as
    // the values'); stored as the output's i64.
    let arg_ty = if acc_ty == "float" && count <= i32::MAX as usize { "int32_t" } else { "int64_t" };
    if lanes > 1 {
        let _ = writeln!(
            s,
            "{ind}float acc[{lanes}][{n}]; int lane = 0;\n{ind}for (int j = 0; j < {lanes}; j++) for (int64_t i{row} = \
             0; i{row} < {n}; i{row}++) acc[j][i{row}] = 0.0f;"
        );
    } else {
        let _ = writeln!(
            s,
            "{ind}{acc_ty} acc[{n}];\n{ind}for (int64_t i{row} = 0; i{row} < {n}; i{row}++) acc[i{row}] = {init};"
        );
    }
    if arg {
        let _ = writeln!(
            s,
            "{ind}{arg_ty} arg[{n}];\n{ind}for (int64_t i{row} = 0; i{row} < {n}; i{row}++) arg[i{row}] = 0;"
        );
    }
    let base = k.domain.len();
    if lanes > 1 {
        if let Some(grouped) = grouped_lanes(k, row, (&value_expr, free), &ind) {
            s.push_str(&grouped);
            return Some(finish_rows(k, (row, lanes, count), s, ind, outer.len()));
        }
    }
    let mut inner_ind = ind.clone();
    for (j, &m) in red.extents.iter().enumerate() {
        let _ = writeln!(s, "{inner_ind}for (int64_t i{v} = 0; i{v} < {m}; i{v}++) {{", v = base + j);
        inner_ind.push_str("  ");
    }
    if arg {
        let vars: Vec<Idx> = red.extents.iter().enumerate().map(|(j, &m)| Idx::var(base + j, m)).collect();
        let _ = writeln!(s, "{inner_ind}{arg_ty} r = ({arg_ty})({});", ravel(&vars, &red.extents).render());
    }
    let a = format!("acc[i{row}]");
    let update = match red.op {
        RedOp::Sum | RedOp::Mean => format!("{a} += v;"),
        RedOp::Prod => format!("{a} *= v;"),
        RedOp::Max => format!("{a} = (v > {a} || v != v) ? v : {a};"),
        RedOp::Min => format!("{a} = (v < {a} || v != v) ? v : {a};"),
        RedOp::ArgMax | RedOp::ArgMin => {
            let cmp = if red.op == RedOp::ArgMax { ">" } else { "<" };
            // The index goes in by a bit mask, not a select: GCC made `arg = take ? r : arg` a masked store
            // behind a branch (vpmaskmovd, slow on AMD), yolact's argmax over 80 softmax classes 0.56 -> 0.36 ms.
            format!(
                "{acc_ty} a = {a}; int take = v {cmp} a || (v != v && a == a); {arg_ty} m = -({arg_ty})take; \
                 arg[i{row}] = (arg[i{row}] & ~m) | (r & m); {a} = take ? v : a;"
            )
        }
        RedOp::Any | RedOp::All => unreachable!("refused above"),
    };
    if lanes > 1 {
        // f32 sums: the reduction's iterations go round LANES partial sums per output, combined at the end.
        let _ = writeln!(s, "{inner_ind}float* part = acc[lane]; lane = (lane + 1) % {lanes};");
    }
    // See `c.rs`'s inner_loop_pragmas: GCC 12.2 miscompiled selects in short loops it unrolled completely.
    let _ = writeln!(s, "{inner_ind}#pragma GCC unroll 1");
    if lanes > 1 {
        let _ = writeln!(
            s,
            "{inner_ind}FF_SIMD\n{inner_ind}for (int64_t i{row} = 0; i{row} < {n}; i{row}++) part[i{row}] += (float)({value});"
        );
    } else {
        let _ = writeln!(
            s,
            "{inner_ind}FF_SIMD\n{inner_ind}for (int64_t i{row} = 0; i{row} < {n}; i{row}++) {{ {acc_ty} v = ({acc_ty})({value}); {update} }}"
        );
    }
    for _ in &red.extents {
        inner_ind.truncate(inner_ind.len() - 2);
        let _ = writeln!(s, "{inner_ind}}}");
    }
    if lanes > 1 {
        return Some(finish_rows(k, (row, lanes, count), s, ind, outer.len()));
    }
    // One accumulator per row element from here on (f32 sums returned above, their lanes combined).
    let total = format!("acc[i{row}]");
    let fin = match red.op {
        RedOp::Sum => total,
        RedOp::Mean => format!("{total} / {count}.0"),
        RedOp::ArgMax | RedOp::ArgMin => format!("arg[i{row}]"),
        _ => format!("acc[i{row}]"),
    };
    let _ = writeln!(s, "{ind}for (int64_t i{row} = 0; i{row} < {n}; i{row}++) {}", store_result(k, &fin));
    for _ in &outer {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    Some(s)
}

/// Reduction indices per lane that [`grouped_lanes`] adds into a lane's accumulator between its load and store.
pub const LANE_GROUP: usize = 8;

/// The reduction loops of an f32 row sum (accumulators `acc[LANES][n]`, the lane of reduction index `t` being
/// `t % LANES`) where the reduction has one variable of extent over 1 and at least `LANES * LANE_GROUP` indices:
/// indices go by groups of `LANES * LANE_GROUP`, and for each lane one pass over the row loads each accumulator
/// once, adds that lane's `LANE_GROUP` indices of the group in increasing order and stores it; the indices past
/// the last whole group go round the lanes one at a time. Every output folds the same values in the same order
/// per lane as one index at a time does (the same bits), while the accumulators, which went through memory for
/// every index, now do once per `LANE_GROUP`: nasrnn's GEMV `[1, 256] @ [256, 2048]` (its 2 MiB operand in L3)
/// went from 46 to 68 GB/s, the bandwidth of a plain read of it, measured alone on this loaded machine. Operands
/// that depend on the reduction index but not on the row (a GEMV's left operand computed where it is read, a cat
/// of two vectors) are computed once per index of the group before the pass over the row, into `cv<m>[g]` read as
/// argument `a<free + m>` (f32, as [`hoist_row_operands`] holds them): a select of two loads inside the row loop
/// kept GCC from vectorizing it (seq2seq's output projection over `cat([h, ctx])`, 5.6 against 25 GB/s). `None`
/// where this does not apply.
fn grouped_lanes(k: &Kernel, row: usize, (value, free): (&Expr, usize), ind: &str) -> Option<String> {
    let red = k.reduce.as_ref()?;
    let nontrivial: Vec<usize> = (0..red.extents.len()).filter(|&j| red.extents[j] > 1).collect();
    let &[j] = nontrivial.as_slice() else { return None };
    let (lanes, kn, n) = (LANES, red.extents[j], k.domain[row]);
    let group = lanes * LANE_GROUP;
    if kn < group {
        return None;
    }
    let base = k.domain.len();
    let kv = base + j;
    let tail = render(value, "a");
    let mut per_index = Vec::new();
    let value = hoist(value, &[row], &mut |e: &Expr| {
        if per_index.len() == MAX_HOISTED {
            return e.clone();
        }
        per_index.push(render(e, "a"));
        Expr::Load { arg: free + per_index.len() - 1, at: Idx::constant(0), dtype: DType::F32 }
    });
    let value = render(&value, "a");
    let mut s = String::new();
    let _ = writeln!(s, "{ind}{{");
    for (q, &m) in red.extents.iter().enumerate() {
        if m == 1 {
            let _ = writeln!(s, "{ind}  const int64_t i{v} = 0;", v = base + q);
        }
    }
    let full = kn - kn % group;
    let _ = writeln!(s, "{ind}  for (int64_t q = 0; q < {full}; q += {group}) {{");
    let _ = writeln!(s, "{ind}    for (int ln = 0; ln < {lanes}; ln++) {{\n{ind}      float* part = acc[ln];");
    for (m, e) in per_index.iter().enumerate() {
        let _ = write!(s, "{ind}      float cv{m}[{LANE_GROUP}];");
        for g in 0..LANE_GROUP {
            let _ = write!(s, " {{ int64_t i{kv} = q + {o} + ln; cv{m}[{g}] = (float)({e}); }}", o = g * lanes);
        }
        s.push('\n');
    }
    // See `c.rs`'s inner_loop_pragmas: GCC 12.2 miscompiled selects in short loops it unrolled completely.
    let _ = writeln!(s, "{ind}      #pragma GCC unroll 1\n{ind}      FF_SIMD");
    let _ = writeln!(
        s,
        "{ind}      for (int64_t i{row} = 0; i{row} < {n}; i{row}++) {{\n{ind}        float t = part[i{row}];"
    );
    for g in 0..LANE_GROUP {
        let ptrs: String =
            (0..per_index.len()).map(|m| format!(" const float* a{a} = &cv{m}[{g}];", a = free + m)).collect();
        let _ =
            writeln!(s, "{ind}        {{ int64_t i{kv} = q + {o} + ln;{ptrs} t += (float)({value}); }}", o = g * lanes);
    }
    let _ = writeln!(s, "{ind}        part[i{row}] = t;\n{ind}      }}\n{ind}    }}\n{ind}  }}");
    if full < kn {
        let _ = writeln!(s, "{ind}  for (int64_t i{kv} = {full}; i{kv} < {kn}; i{kv}++) {{");
        let _ = writeln!(
            s,
            "{ind}    float* part = acc[i{kv} % {lanes}];\n{ind}    #pragma GCC unroll 1\n{ind}    FF_SIMD"
        );
        let _ =
            writeln!(s, "{ind}    for (int64_t i{row} = 0; i{row} < {n}; i{row}++) part[i{row}] += (float)({tail});");
        let _ = writeln!(s, "{ind}  }}");
    }
    let _ = writeln!(s, "{ind}}}");
    Some(s)
}

/// The end of an f32 row sum's layout: the lanes of each row element combined and stored (through the epilogue),
/// then the loops over the other domain variables closed.
fn finish_rows(
    k: &Kernel,
    (row, lanes, count): (usize, usize, usize),
    mut s: String,
    mut ind: String,
    outer: usize,
) -> String {
    let red = k.reduce.as_ref().expect("a reduction");
    let n = k.domain[row];
    let fin = lanes_result(red, (0..lanes).map(|j| format!("acc[{j}][i{row}]")).collect(), count);
    let _ = writeln!(s, "{ind}for (int64_t i{row} = 0; i{row} < {n}; i{row}++) {}", store_result(k, &fin));
    for _ in 0..outer {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    s
}

/// What an f32 sum or mean over `count` elements stores, from its partial sums `parts` (one per lane): each half of
/// the lanes added in order, then the two halves. Every layout combines its lanes this way, so layouts that fold
/// the same products into the same lanes give the same bits.
pub(super) fn lanes_result(red: &Reduction, parts: Vec<String>, count: usize) -> String {
    let half = parts.len() / 2;
    let total = format!("(({}) + ({}))", parts[..half].join(" + "), parts[half..].join(" + "));
    if red.op == RedOp::Mean {
        format!("{total} / {count}.0")
    } else {
        total
    }
}

/// At most this many operands are hoisted per kernel (each an array of up to 8192 floats on the stack), and as many
/// per reduction index in the GEMV layout (`cv<m>`, 8 floats each).
const MAX_HOISTED: usize = 4;

/// For the row layout over `row`: the summand of `k`, with every f32 operand that reads memory but does not
/// depend on the reduction's variables (a softmax's row maximum, read at a stride for each reduction index) computed
/// once per row element before the reduction, into an array read as argument `a<n>` past the kernel's own; and the
/// statements that compute those arrays (at indent `ind`). The array holds the f32 the operand's expression
/// rounds to, so the summand's value is unchanged. Also the first argument number past those arrays.
fn hoist_row_operands(k: &Kernel, row: usize, ind: &str) -> (String, Expr, usize) {
    let red = k.reduce.as_ref().expect("a reduction");
    let reduction: Vec<usize> = (0..red.extents.len()).map(|j| k.domain.len() + j).collect();
    let n = k.domain[row];
    let mut hoisted = Vec::new();
    let value = hoist(&k.value, &reduction, &mut |e: &Expr| {
        if hoisted.len() == MAX_HOISTED {
            return e.clone();
        }
        let arg = k.args.len() + hoisted.len();
        hoisted.push(render(e, "a"));
        Expr::Load { arg, at: Idx::var(row, n), dtype: DType::F32 }
    });
    let mut s = String::new();
    for (j, e) in hoisted.iter().enumerate() {
        let arg = k.args.len() + j;
        let _ = writeln!(s, "{ind}float h{j}[{n}]; const float* a{arg} = h{j};");
        let _ = writeln!(s, "{ind}#pragma GCC unroll 1\n{ind}FF_SIMD");
        let _ = writeln!(s, "{ind}for (int64_t i{row} = 0; i{row} < {n}; i{row}++) h{j}[i{row}] = (float)({e});");
    }
    let free = k.args.len() + hoisted.len();
    (s, value, free)
}

/// `e` with each largest f32 sub-expression that reads memory (a load or gather), mentions none of the `vars` and
/// is evaluated wherever `e` is (not in an arm of a select) replaced by `put(sub-expression)`.
fn hoist(e: &Expr, vars: &[usize], put: &mut dyn FnMut(&Expr) -> Expr) -> Expr {
    if e.dtype() == DType::F32 && reads_memory(e) && !vars.iter().any(|&v| mentions(e, v)) {
        return put(e);
    }
    match e {
        Expr::Unary(op, d, a) => Expr::Unary(*op, *d, Box::new(hoist(a, vars, put))),
        Expr::Cast(d, a) => Expr::Cast(*d, Box::new(hoist(a, vars, put))),
        Expr::Binary(op, c, d, a, b) => {
            let a = hoist(a, vars, put);
            Expr::Binary(*op, *c, *d, Box::new(a), Box::new(hoist(b, vars, put)))
        }
        // Only the condition: an arm is evaluated where the condition selects it (a load through a view may be
        // in bounds only there).
        Expr::Where(c, a, b) => Expr::Where(Box::new(hoist(c, vars, put)), a.clone(), b.clone()),
        _ => e.clone(),
    }
}

/// Whether `e` loads or gathers from a buffer.
fn reads_memory(e: &Expr) -> bool {
    match e {
        Expr::Load { .. } | Expr::Local { .. } | Expr::Gather { .. } | Expr::Dot(_) => true,
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => reads_memory(a),
        Expr::Binary(_, _, _, a, b) => reads_memory(a) || reads_memory(b),
        Expr::Where(c, a, b) => reads_memory(c) || reads_memory(a) || reads_memory(b),
        _ => false,
    }
}

/// Whether `e` depends on loop variable `v` (through an index it reads at, or as a value).
fn mentions(e: &Expr, v: usize) -> bool {
    match e {
        Expr::Load { at, .. } | Expr::Local { at, .. } => at.mentions(v),
        Expr::Gather { at, index, .. } => at.mentions(v) || mentions(index, v),
        Expr::Dot(d) => d.a_at.mentions(v) || d.b_at.mentions(v),
        Expr::Index(i) | Expr::NonNeg(i) => i.mentions(v),
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => mentions(a, v),
        Expr::Binary(_, _, _, a, b) => mentions(a, v) || mentions(b, v),
        Expr::Where(c, a, b) => mentions(c, v) || mentions(a, v) || mentions(b, v),
        Expr::Const(..) | Expr::Acc(_) => false,
    }
}

/// Partial sums per output of an f32 row sum.
pub const LANES: usize = 4;

/// The row layout of an f32 sum blocked by `b` (see [`super::gemm::block_var`]): `mr` values of `b` at once, each
/// with its own LANES partial sums per row element, so that one pass over the row's operand feeds `mr` outputs.
/// Every output folds the same products in the same order as the unblocked row layout (the same bits).
/// `s` holds the loops over `outer` (`depth` of them) opened at indent `ind`; this closes them.
fn blocked_rows(
    k: &Kernel,
    row: usize,
    (b, mr, lanes): (usize, usize, usize),
    count: usize,
    mut s: String,
    mut ind: String,
    depth: usize,
) -> String {
    let red = k.reduce.as_ref().expect("a reduction");
    let n = k.domain[row];
    // f32 sums in LANES partial sums of f32; others in one double sum per output.
    let t = if lanes > 1 { "float" } else { "double" };
    let _ = writeln!(s, "{ind}for (int64_t bb = 0; bb < {e}; bb += {mr}) {{", e = k.domain[b]);
    ind.push_str("  ");
    let _ = writeln!(
        s,
        "{ind}{t} acc[{mr}][{lanes}][{n}]; int lane = 0;\n{ind}for (int r = 0; r < {mr}; r++) for (int j = 0; j < \
         {lanes}; j++) for (int64_t i{row} = 0; i{row} < {n}; i{row}++) acc[r][j][i{row}] = 0;"
    );
    let base = k.domain.len();
    let mut inner_ind = ind.clone();
    for (j, &m) in red.extents.iter().enumerate() {
        let _ = writeln!(s, "{inner_ind}for (int64_t i{v} = 0; i{v} < {m}; i{v}++) {{", v = base + j);
        inner_ind.push_str("  ");
    }
    let _ = writeln!(s, "{inner_ind}int ln = lane; lane = (lane + 1) % {lanes};");
    // See `c.rs`'s inner_loop_pragmas: GCC 12.2 miscompiled selects in short loops it unrolled completely.
    let _ = writeln!(s, "{inner_ind}#pragma GCC unroll 1\n{inner_ind}FF_SIMD");
    let _ = writeln!(s, "{inner_ind}for (int64_t i{row} = 0; i{row} < {n}; i{row}++) {{");
    let value = render(&k.value, "a");
    for r in 0..mr {
        let _ = writeln!(s, "{inner_ind}  {{ int64_t i{b} = bb + {r}; acc[{r}][ln][i{row}] += ({t})({value}); }}");
    }
    let _ = writeln!(s, "{inner_ind}}}");
    for _ in &red.extents {
        inner_ind.truncate(inner_ind.len() - 2);
        let _ = writeln!(s, "{inner_ind}}}");
    }
    let fin = if lanes > 1 {
        lanes_result(red, (0..lanes).map(|j| format!("acc[r][{j}][i{row}]")).collect(), count)
    } else if red.op == RedOp::Mean {
        format!("acc[r][0][i{row}] / {count}.0")
    } else {
        format!("acc[r][0][i{row}]")
    };
    let _ = writeln!(
        s,
        "{ind}for (int r = 0; r < {mr}; r++) {{ int64_t i{b} = bb + r; for (int64_t i{row} = 0; i{row} < {n}; \
         i{row}++) {} }}",
        store_result(k, &fin)
    );
    for _ in 0..=depth {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    s
}

/// How far variable `v` moves the loads of `e`: the sum of its coefficients' magnitudes over every load index.
/// A variable inside a division, modulo or view inverse counts as moving them far (`i64::MAX / 4`): such a
/// row would compute them per element, where the plain nest computes them once per output.
pub(super) fn stride_sum(e: &Expr, v: usize) -> i64 {
    let here = match e {
        Expr::Load { at, .. } | Expr::Local { at, .. } | Expr::Gather { at, .. } => at
            .terms
            .iter()
            .map(|(a, k)| match a {
                Atom::Var(u, _) if *u == v => k.abs(),
                Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) | Atom::Load(_, x, _, _)
                    if x.mentions(v) =>
                {
                    i64::MAX / 4
                }
                _ => 0,
            })
            .fold(0i64, |a, b| a.saturating_add(b)),
        Expr::Index(i) | Expr::NonNeg(i) if i.mentions(v) => i64::MAX / 4,
        _ => 0,
    };
    here.saturating_add(match e {
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => stride_sum(a, v),
        Expr::Gather { index, .. } => stride_sum(index, v),
        Expr::Binary(_, _, _, a, b) => stride_sum(a, v).saturating_add(stride_sum(b, v)),
        Expr::Where(c, a, b) => stride_sum(c, v).saturating_add(stride_sum(a, v)).saturating_add(stride_sum(b, v)),
        _ => 0,
    })
}
