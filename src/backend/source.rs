//! Kernel source shared by the renderers: the loop nest body of a kernel as C statements.

use std::fmt::Write;

use crate::lower::index::{ravel, Idx};
use crate::lower::kernel::{c_type, reduction_parts, render, view_helpers, Kernel, RedOp, PRELUDE};

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

/// For a sum (or mean) over inner variables, the loop nest with the last domain variable innermost and one
/// accumulator per value of it, so that loads along that variable are contiguous (a matmul reads rows of B, not
/// columns). Each element still sums over the inner variables in the same order. `None` where this does not apply.
pub fn row_reduction(k: &Kernel, indent: &str) -> Option<String> {
    let red = k.reduce.as_ref()?;
    let last = k.domain.len().checked_sub(1)?;
    let n = k.domain[last];
    if !matches!(red.op, RedOp::Sum | RedOp::Mean) || !(2..=8192).contains(&n) || !k.value.dtype().is_float() {
        return None;
    }
    let mut s = String::new();
    let count: usize = red.extents.iter().product();
    let mut ind = indent.to_string();
    for (v, &m) in k.domain[..last].iter().enumerate() {
        let _ = writeln!(s, "{ind}for (int64_t i{v} = 0; i{v} < {m}; i{v}++) {{");
        ind.push_str("  ");
    }
    let _ = writeln!(
        s,
        "{ind}double acc[{n}];\n{ind}for (int64_t i{last} = 0; i{last} < {n}; i{last}++) acc[i{last}] = 0;"
    );
    let base = k.domain.len();
    let mut inner = ind.clone();
    for (j, &m) in red.extents.iter().enumerate() {
        let _ = writeln!(s, "{inner}for (int64_t i{v} = 0; i{v} < {m}; i{v}++) {{", v = base + j);
        inner.push_str("  ");
    }
    let _ = writeln!(
        s,
        "{inner}FF_SIMD\n{inner}for (int64_t i{last} = 0; i{last} < {n}; i{last}++) acc[i{last}] += (double)({});",
        render(&k.value, "a")
    );
    for _ in &red.extents {
        inner.truncate(inner.len() - 2);
        let _ = writeln!(s, "{inner}}}");
    }
    let fin = if red.op == RedOp::Mean { format!(" / {count}.0") } else { String::new() };
    let _ = writeln!(
        s,
        "{ind}for (int64_t i{last} = 0; i{last} < {n}; i{last}++) {}",
        store_result(k, &format!("acc[i{last}]{fin}"))
    );
    for _ in &k.domain[..last] {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    Some(s)
}
