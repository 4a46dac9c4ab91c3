//! Kernel source shared by the renderers: the loop nest body of a kernel as C statements.

use std::fmt::Write;

use crate::lower::index::{ravel, Idx};
use crate::lower::kernel::{c_type, reduction_parts, render, view_helpers, Kernel, RedOp, PRELUDE};

/// The prelude every source file starts with, with `FF_FN` defined as `fn_kw`.
pub fn prelude(fn_kw: &str) -> String {
    format!("#define FF_FN {fn_kw}\n{PRELUDE}\n")
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
pub fn helpers(k: &Kernel, fn_kw: &str) -> (String, String, String) {
    let prefix = format!("{}_", k.name);
    let mut def = view_helpers(k, &prefix, fn_kw);
    let mut undef = String::new();
    for n in 0..k.views.len() {
        let _ = writeln!(def, "#define vi{n} {prefix}vi{n}");
        let _ = writeln!(undef, "#undef vi{n}");
    }
    (def, String::new(), undef)
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
    let _ = writeln!(s, "{indent}a0[{store}] = ({out_t})({fin});");
    s
}
