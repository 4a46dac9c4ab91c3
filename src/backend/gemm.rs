//! The C backend's layouts for f32 sums that the row layout ([`super::source::row_reduction`]) does not take:
//! a dot product (the reduction's innermost variable walks every load contiguously: a matrix times a vector, a
//! row vector times a transposed matrix, attention's `q @ k.transpose(-2, -1)`) accumulates in [`DOT_LANES`] partial
//! sums, one per position of a chunk of consecutive reduction indices, so that the chunk loop vectorizes and no add
//! waits on the previous one; outputs that share an operand run in blocks of [`DOT_BLOCK`] (see [`dot_reduction`]).
//! The plain nest accumulates such a sum serially in double.

use std::fmt::Write;

use super::source::{lanes_result, store_result};
use crate::lower::index::{Atom, Idx};
use crate::lower::kernel::{render, Expr, Kernel, RedOp};
use crate::tensor::ops::Binary;
use crate::tensor::DType;

/// Partial sums of a dot product: a chunk of this many consecutive reduction indices is one vector iteration
/// (one AVX-512 vector of f32, two AVX2 ones).
pub const DOT_LANES: usize = 16;

/// Outputs of a dot product computed together: at most this many values of the innermost domain variable, where
/// some load does not move with it (a linear layer's rows of `x`, all dotted with one row of `W` while it is in
/// registers and L1).
pub const DOT_BLOCK: usize = 8;

/// A block's f32 partial sums are folded into double ones after this many reduction indices (this many over
/// [`DOT_LANES`] terms each).
pub const DOT_PANEL: usize = 512;

/// A loop nest for an f32 sum or mean whose innermost reduction variable (of extent at least [`DOT_LANES`]) has
/// stride 0 or 1 in every load: per output, [`DOT_LANES`] partial sums over chunks of that variable (a tail
/// shorter than a chunk goes round them too), combined as a balanced tree: f32 ones folded into double every
/// [`DOT_PANEL`] indices for the outputs of a block (see `dot_block`), double ones for a plain sum. Up to [`DOT_BLOCK`] outputs along the
/// innermost domain variable (see [`outer_order`]) run together where some load does not move with it, so that
/// its chunk is read once for all of them while the block's own rows stay in L1. Each output's sum is the same in a
/// block or alone. `None` where this does not apply.
pub fn dot_reduction(k: &Kernel, indent: &str) -> Option<String> {
    let red = k.reduce.as_ref()?;
    if k.value.dtype() != DType::F32 || !matches!(red.op, RedOp::Sum | RedOp::Mean) {
        return None;
    }
    let j = red.extents.iter().rposition(|&m| m > 1)?;
    let n = red.extents[j];
    let inner = k.domain.len() + j;
    if n < DOT_LANES || !unit_stride(&k.value, inner) {
        return None;
    }
    let mut s = String::new();
    let mut ind = indent.to_string();
    let mut loads = Vec::new();
    load_idxs(&k.value, &mut loads);
    let mut outer = outer_order(k, &loads);
    // The block variable: the innermost domain variable, where a load does not move with it.
    let block = outer.last().copied().filter(|&r| loads.iter().any(|at| !at.mentions(r)));
    if block.is_some() {
        outer.pop();
    }
    // With a block, the variables that move the block's own operand (a batch) loop outside the block loop and the
    // others inside it, so that the block's rows stay in L1 while the other operand streams past them: GaLore's
    // [1376, 512] @ [512, 128] (the 128 rows of the projection blocked) read the 256 kB projection once per row of
    // the gradient the other way (its first matmul alone: 4.56 -> 3.58 ms, a C driver, hot).
    let (around, inside): (Vec<usize>, Vec<usize>) = match block {
        Some(r) => outer.iter().partition(|&&v| loads.iter().any(|at| at.mentions(r) && at.mentions(v))),
        None => (outer.clone(), Vec::new()),
    };
    let open = |s: &mut String, ind: &mut String, vars: &[usize]| {
        for &v in vars {
            let _ = writeln!(s, "{ind}for (int64_t i{v} = 0; i{v} < {m}; i{v}++) {{", m = k.domain[v]);
            ind.push_str("  ");
        }
    };
    let close = |s: &mut String, ind: &mut String, vars: &[usize]| {
        for _ in vars {
            ind.truncate(ind.len() - 2);
            let _ = writeln!(s, "{ind}}}");
        }
    };
    open(&mut s, &mut ind, &around);
    match block {
        Some(r) => {
            let m = k.domain[r];
            let size = DOT_BLOCK.min(m);
            let full = m - m % size;
            // (the first row of the block, as C, the rows, whether it is a loop over full blocks)
            let mut blocks = Vec::new();
            if full > 0 {
                blocks.push((format!("for (int64_t rb = 0; rb < {full}; rb += {size}) {{"), size));
            }
            if full < m {
                blocks.push((format!("{{\n{ind}  const int64_t rb = {full};"), m - full));
            }
            for (head, rows) in blocks {
                let _ = writeln!(s, "{ind}{head}");
                let mut bind = format!("{ind}  ");
                open(&mut s, &mut bind, &inside);
                dot_block(&mut s, k, &bind, (j, n, inner), Some((r, rows)));
                close(&mut s, &mut bind, &inside);
                let _ = writeln!(s, "{ind}}}");
            }
        }
        None => dot_block(&mut s, k, &ind, (j, n, inner), None),
    }
    close(&mut s, &mut ind, &around);
    Some(s)
}

/// One block of [`dot_reduction`]: `rows` outputs along domain variable `r` from `rb` (or the one output where
/// the loops are), each with its [`DOT_LANES`] partial sums, over reduction variable `inner` (its `j`-th, of extent
/// `n`), then stored.
fn dot_block(
    s: &mut String,
    k: &Kernel,
    ind: &str,
    (j, n, inner): (usize, usize, usize),
    block: Option<(usize, usize)>,
) {
    let Some(red) = k.reduce.as_ref() else { return };
    let lanes = DOT_LANES;
    let rows = block.map_or(1, |(_, m)| m);
    // A block's outputs are products summed (a matmul's dots): f32 lanes, as PyTorch's matmuls accumulate (about 3
    // times faster than double lanes hot: [8, 512] @ [512, 1024] 0.41 -> 0.12 ms), folded into double lanes after
    // every panel of DOT_PANEL indices, so that no f32 partial sum grows over more than DOT_PANEL / lanes terms
    // (0.1 summed a million times in f32 lanes alone gave 100060). A plain sum keeps double lanes: it is bound by
    // memory, not by the adds.
    let f32_lanes = block.is_some();
    let (part, cast) = if f32_lanes { ("part", "(float)") } else { ("acc", "(double)") };
    // Each output's statements open with its row's variable bound.
    let bind = |q: usize| block.map_or(String::new(), |(r, _)| format!("const int64_t i{r} = rb + {q}; "));
    let zero = |s: &mut String, ind: &str, t: &str, name: &str| {
        let _ = writeln!(s, "{ind}{t} {name}[{rows}][{lanes}];");
        let _ =
            writeln!(s, "{ind}for (int q = 0; q < {rows}; q++) for (int l = 0; l < {lanes}; l++) {name}[q][l] = 0;");
    };
    zero(s, ind, "double", "acc");
    let mut red_ind = ind.to_string();
    let base = k.domain.len();
    for (q, &m) in red.extents[..j].iter().enumerate() {
        if m > 1 {
            let _ = writeln!(s, "{red_ind}for (int64_t i{v} = 0; i{v} < {m}; i{v}++) {{", v = base + q);
            red_ind.push_str("  ");
        }
    }
    let value = render(&k.value, "a");
    let full = n - n % lanes;
    let chunk_ind = if f32_lanes && full > 0 {
        let _ = writeln!(s, "{red_ind}for (int64_t c0 = 0; c0 < {full}; c0 += {DOT_PANEL}) {{");
        let pind = format!("{red_ind}  ");
        zero(s, &pind, "float", "part");
        let _ = writeln!(
            s,
            "{pind}const int64_t c1 = c0 + {DOT_PANEL} < {full} ? c0 + {DOT_PANEL} : {full};\n{pind}for (int64_t c = \
             c0; c < c1; c += {lanes}) {{"
        );
        pind
    } else {
        let _ = writeln!(s, "{red_ind}for (int64_t c = 0; c < {full}; c += {lanes}) {{");
        red_ind.clone()
    };
    for q in 0..rows {
        // See `c.rs`'s inner_loop_pragmas: GCC 12.2 miscompiled selects in short loops it unrolled completely.
        let _ = writeln!(
            s,
            "{chunk_ind}  {{ {}\n{chunk_ind}  #pragma GCC unroll 1\n{chunk_ind}  FF_SIMD\n{chunk_ind}  for (int l = 0; l \
             < {lanes}; l++) {{ int64_t i{inner} = c + l; {part}[{q}][l] += {cast}({value}); }} }}",
            bind(q).trim_end()
        );
    }
    let _ = writeln!(s, "{chunk_ind}}}");
    if f32_lanes && full > 0 {
        let _ = writeln!(
            s,
            "{chunk_ind}for (int q = 0; q < {rows}; q++) for (int l = 0; l < {lanes}; l++) acc[q][l] += part[q][l];\n\
             {red_ind}}}"
        );
    }
    if full < n {
        for q in 0..rows {
            let _ = writeln!(
                s,
                "{red_ind}{{ {}for (int64_t i{inner} = {full}; i{inner} < {n}; i{inner}++) acc[{q}][i{inner} - \
                 {full}] += (double)({value}); }}",
                bind(q)
            );
        }
    }
    for _ in red.extents[..j].iter().filter(|&&m| m > 1) {
        red_ind.truncate(red_ind.len() - 2);
        let _ = writeln!(s, "{red_ind}}}");
    }
    let count: usize = red.extents.iter().product();
    for q in 0..rows {
        let total = tree((0..lanes).map(|l| format!("acc[{q}][{l}]")).collect());
        let fin = if red.op == RedOp::Mean { format!("{total} / {count}.0") } else { total };
        let _ = writeln!(s, "{ind}{{ {}{} }}", bind(q), store_result(k, &fin));
    }
}

/// The domain variables of a dot product's kernel (extent over 1), outermost first: the variable that moves the
/// least data innermost, so that what the others read stays in cache across it (and [`dot_reduction`] blocks by
/// it). For a linear layer's `x @ W.T` with a few rows of `x`, the rows' variable runs inside the weight rows' one:
/// each row of `W` is read from memory once and dotted with every row of `x` (in cache), where the other order
/// streams all of `W` once per row of `x`. The data a variable moves: the sum over the loads that mention it of the
/// points those loads range over (the product of the extents of the variables each mentions); ties keep the
/// domain's order.
fn outer_order(k: &Kernel, loads: &[&Idx]) -> Vec<usize> {
    let extents: Vec<usize> = k.domain.iter().chain(k.reduce.iter().flat_map(|r| r.extents.iter())).copied().collect();
    let points =
        |at: &Idx| -> usize { (0..extents.len()).filter(|&w| at.mentions(w)).map(|w| extents[w]).product::<usize>() };
    let moved = |v: usize| -> usize { loads.iter().filter(|at| at.mentions(v)).map(|at| points(at)).sum() };
    let mut outer: Vec<usize> = (0..k.domain.len()).filter(|&v| k.domain[v] > 1).collect();
    outer.sort_by_key(|&v| std::cmp::Reverse(moved(v)));
    outer
}

/// A balanced sum of `terms` (pairs first), as C.
fn tree(mut terms: Vec<String>) -> String {
    while terms.len() > 1 {
        terms = terms
            .chunks(2)
            .map(|p| if p.len() == 2 { format!("({} + {})", p[0], p[1]) } else { p[0].clone() })
            .collect();
    }
    terms.pop().unwrap_or_else(|| "0.0f".into())
}

/// Whether variable `v` steps every load of `e` by 0 or 1 element (no division, modulo or view inverse of it, and
/// no use of it as a value).
pub(super) fn unit_stride(e: &Expr, v: usize) -> bool {
    let here = match e {
        Expr::Load { at, .. } | Expr::Local { at, .. } | Expr::Gather { at, .. } => {
            at.terms.iter().all(|(a, k)| match a {
                Atom::Var(u, _) if *u == v => *k == 1,
                Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) => !x.mentions(v),
                _ => true,
            })
        }
        Expr::Index(i) | Expr::NonNeg(i) => !i.mentions(v),
        _ => true,
    };
    here && match e {
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => unit_stride(a, v),
        Expr::Gather { index, .. } => unit_stride(index, v),
        Expr::Binary(_, _, _, a, b) => unit_stride(a, v) && unit_stride(b, v),
        Expr::Where(c, a, b) => unit_stride(c, v) && unit_stride(a, v) && unit_stride(b, v),
        _ => true,
    }
}

/// Outputs computed together in the row layout of an f32 sum: at most this many values of the block variable.
pub const BLOCK: usize = 8;

/// At most this many accumulator rows' elements per block (times 4 partial sums, 4 bytes each: 64 KiB of stack).
const BLOCK_FLOATS: usize = 4096;

/// For the row layout of an f32 sum over row variable `row`: the domain variable to block by, and how many of its
/// values to compute together (the largest divisor of its extent up to [`BLOCK`] and `BLOCK_FLOATS` over the row's
/// extent, at least 2). The block variable
/// is one that some load steps by a plain multiple and no load that the row variable moves depends on (a matmul's
/// row of A, while the row walks B), so the block's rows share every load of the row's operand and each adds a
/// scalar of the other: one load of B per `mr` products. `None` where no variable qualifies.
pub fn block_var(k: &Kernel, row: usize) -> Option<(usize, usize)> {
    let mut loads = Vec::new();
    load_idxs(&k.value, &mut loads);
    (0..k.domain.len())
        .filter(|&v| v != row && k.domain[v] > 1)
        .filter(|&v| {
            loads.iter().any(|i| i.terms.keys().any(|a| matches!(a, Atom::Var(u, _) if *u == v)))
                && loads.iter().all(|i| !(i.mentions(v) && i.mentions(row)))
                && loads.iter().all(|i| {
                    i.terms.keys().all(|a| match a {
                        Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) => !x.mentions(v),
                        _ => true,
                    })
                })
                && !mentions_as_value(&k.value, v)
        })
        .filter_map(|v| {
            let mr =
                (2..=BLOCK.min(k.domain[v]).min(BLOCK_FLOATS / k.domain[row])).rev().find(|m| k.domain[v] % m == 0)?;
            Some((v, mr))
        })
        .last()
}

/// The load and gather indices of `e`.
fn load_idxs<'a>(e: &'a Expr, out: &mut Vec<&'a crate::lower::index::Idx>) {
    match e {
        Expr::Load { at, .. } | Expr::Local { at, .. } => out.push(at),
        Expr::Gather { at, index, .. } => {
            out.push(at);
            load_idxs(index, out);
        }
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => load_idxs(a, out),
        Expr::Binary(_, _, _, a, b) => {
            load_idxs(a, out);
            load_idxs(b, out);
        }
        Expr::Where(c, a, b) => {
            load_idxs(c, out);
            load_idxs(a, out);
            load_idxs(b, out);
        }
        _ => {}
    }
}

/// Whether `e` uses variable `v` as a value (`Index`, `NonNeg`).
fn mentions_as_value(e: &Expr, v: usize) -> bool {
    match e {
        Expr::Index(i) | Expr::NonNeg(i) => i.mentions(v),
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => mentions_as_value(a, v),
        Expr::Gather { index, .. } => mentions_as_value(index, v),
        Expr::Binary(_, _, _, a, b) => mentions_as_value(a, v) || mentions_as_value(b, v),
        Expr::Where(c, a, b) => mentions_as_value(c, v) || mentions_as_value(a, v) || mentions_as_value(b, v),
        _ => false,
    }
}

/// The longest reduction the tiled layout takes. A tile reads a column panel of the row operand, one row per
/// reduction index: lstm's [50, 256] @ [256, 1024] (rows 4 KiB apart) ran 8 times slower tiled than blocked.
pub const TILED_MAX_K: usize = 64;

/// Row elements per register tile of the tiled layout: one AVX-512 vector of f32 (two AVX2 ones).
pub const TILE: usize = 16;

/// The row layout of an f32 sum blocked by `b` (see [`block_var`]) as a register-tiled micro-kernel, where the
/// reduction has one variable of extent over 1. The row is cut into tiles of [`TILE`] elements (and a shorter last
/// tile); for each tile and each block of `mr` values of `b`, the `mr` x tile accumulators stay in registers while
/// the reduction runs, one pass per partial-sum lane (the lane of reduction index `t` is `t % LANES`, as in the
/// blocked layout, each lane folding its indices in increasing order). So every output gets the same bits as in
/// the blocked and row layouts, where the blocked layout loads and stores an accumulator in memory for every
/// product (yolact's mask matmul: 0.49 ms became 0.38 ms). The statements open at indent `ind` (inside the loops
/// over the other domain variables). `mr` is the largest divisor of `b`'s extent up to [`BLOCK`]; `None` where
/// it is under 4, the reduction has several variables of extent over 1, or more than [`TILED_MAX_K`] indices.
pub fn tiled_rows(k: &Kernel, row: usize, b: usize, ind: &str) -> Option<String> {
    let red = k.reduce.as_ref()?;
    let nontrivial: Vec<usize> = (0..red.extents.len()).filter(|&j| red.extents[j] > 1).collect();
    let &[j] = nontrivial.as_slice() else { return None };
    if red.extents[j] > TILED_MAX_K {
        return None;
    }
    // The accumulators are registers, not a row each: up to BLOCK values of `b` whatever the row's length. Fewer
    // than 4 leave each tile's adds waiting on one another (lstm's 50 rows by 2: twice the blocked layout's time).
    let mr = (4..=BLOCK.min(k.domain[b])).rev().find(|m| k.domain[b] % m == 0)?;
    let (kv, kn) = (k.domain.len() + j, red.extents[j]);
    let n = k.domain[row];
    let lanes = super::source::LANES;
    // Tiles of `TILE` row elements and a shorter last one: every accumulator is whole vectors, so that copying
    // the accumulators out reads each vector as it was stored (a 24-wide tile of a 16- and an 8-wide vector
    // stalled on store forwarding).
    let full = n / TILE;
    let mut s = String::new();
    let _ = writeln!(s, "{ind}for (int64_t bb = 0; bb < {e}; bb += {mr}) {{", e = k.domain[b]);
    let ind1 = format!("{ind}  ");
    if full > 1 {
        let _ = writeln!(s, "{ind1}for (int64_t w0 = 0; w0 < {}; w0 += {TILE}) {{", full * TILE);
        s.push_str(&tile(k, row, (b, mr), (kv, kn, lanes), ("w0", TILE), &format!("{ind1}  ")));
        let _ = writeln!(s, "{ind1}}}");
    } else if full == 1 {
        s.push_str(&tile(k, row, (b, mr), (kv, kn, lanes), ("0", TILE), &ind1));
    }
    if n % TILE != 0 {
        s.push_str(&tile(k, row, (b, mr), (kv, kn, lanes), (&(full * TILE).to_string(), n % TILE), &ind1));
    }
    let _ = writeln!(s, "{ind}}}");
    Some(s)
}

/// One tile of [`tiled_rows`]: row elements `w0 .. w0 + w` of the block starting at `bb`, reducing variable `kv`
/// (extent `kn`) in `lanes` passes, then stored (through the epilogue) row element innermost.
fn tile(
    k: &Kernel,
    row: usize,
    (b, mr): (usize, usize),
    (kv, kn, lanes): (usize, usize, usize),
    (w0, w): (&str, usize),
    ind: &str,
) -> String {
    let red = k.reduce.as_ref().expect("a reduction");
    let mut s = String::new();
    let _ = writeln!(s, "{ind}{{\n{ind}  float part[{lanes}][{mr}][{w}];");
    let _ = writeln!(s, "{ind}  for (int ln = 0; ln < {lanes}; ln++) {{");
    let _ = writeln!(
        s,
        "{ind}    float acc[{mr}][{w}];\n{ind}    for (int r = 0; r < {mr}; r++) for (int w = 0; w < {w}; w++) \
         acc[r][w] = 0.0f;"
    );
    let _ = writeln!(s, "{ind}    for (int64_t i{kv} = ln; i{kv} < {kn}; i{kv} += {lanes}) {{");
    // See `c.rs`'s inner_loop_pragmas: GCC 12.2 miscompiled selects in short loops it unrolled completely.
    let _ = writeln!(s, "{ind}      #pragma GCC unroll 1\n{ind}      FF_SIMD");
    let _ = writeln!(s, "{ind}      for (int w = 0; w < {w}; w++) {{\n{ind}        int64_t i{row} = {w0} + w;");
    let value = render(&k.value, "a");
    for r in 0..mr {
        let _ = writeln!(s, "{ind}        {{ int64_t i{b} = bb + {r}; acc[{r}][w] += (float)({value}); }}");
    }
    let _ = writeln!(s, "{ind}      }}\n{ind}    }}");
    let _ = writeln!(
        s,
        "{ind}    for (int r = 0; r < {mr}; r++) for (int w = 0; w < {w}; w++) part[ln][r][w] = acc[r][w];\n{ind}  }}"
    );
    let count: usize = red.extents.iter().product();
    let fin = lanes_result(red, (0..lanes).map(|j| format!("part[{j}][r][w]")).collect(), count);
    let _ = writeln!(
        s,
        "{ind}  for (int r = 0; r < {mr}; r++) {{ int64_t i{b} = bb + r; for (int w = 0; w < {w}; w++) {{ int64_t \
         i{row} = {w0} + w; {} }} }}",
        store_result(k, &fin)
    );
    let _ = writeln!(s, "{ind}}}");
    s
}

/// Values of the block variable per block of the packed layout's scalar form (a tile shorter than
/// [`PACKED_TILE`]).
pub const PACKED_MR: usize = 6;

/// Values of the block variable per block of the packed layout's vector form: its `LANES * PACKED_VMR` vector
/// accumulators (12) leave registers for the panel's vector and the broadcast scalars (16 AVX2 registers). With
/// the accumulators in an array, GCC kept them on the stack (a load and a store per product): nasrnn's
/// [50, 256] @ [256, 2048] took 1.7 ms so and 1.27 ms with accumulators in vector variables, measured alone on
/// this loaded machine.
pub const PACKED_VMR: usize = 3;

/// Row elements per tile of the packed layout: one AVX2 vector of f32 (`ff_v8`, GCC's vector extension), or where
/// the compiler targets AVX-512 one AVX-512 vector (`ff_v16`, [`PACKED_TILE_512`]).
pub const PACKED_TILE: usize = 8;

/// Row elements per tile of the packed layout where the compiler targets AVX-512 (`__AVX512F__`): twice the row
/// elements per broadcast of the other operand and per add. The additions are the same, each output's in the same
/// order, so the bits are too. lstm's [50, 256] @ [256, 1024] took 0.49 ms in 8-wide tiles and 0.35 ms in 16-wide
/// ones, nasrnn's [50, 256] @ [256, 2048] 1.06 and 0.74 ms (one `compare --profile` sitting each, this machine).
pub const PACKED_TILE_512: usize = 16;

/// The longest reduction the packed layout takes: its panel of [`PACKED_TILE_512`] row elements per reduction index
/// stays within 64 KiB of stack.
pub const PACKED_MAX_K: usize = 1024;

/// The row layout of an f32 sum blocked by `b` (see [`block_var`]) for a reduction longer than the tiled layout
/// takes, where the summand is a product `x * y` computed in f32 with `x` independent of the row variable and `y`
/// independent of `b` (a matmul with its prologues: `x` the row operand's, `y` the column operand's). For each
/// tile of [`PACKED_TILE`] row elements, `y` is evaluated once per reduction index into a contiguous panel (packing: the
/// column operand's rows lie a whole row apart, and a tile walking them strided thrashed L1 on rows 4 KiB or 8 KiB
/// apart), and then every block of [`PACKED_VMR`] values of `b` (and a shorter last block) reduces over the panel
/// with its accumulators in vector variables ([`packed_block_vec`]; a last tile narrower than [`PACKED_TILE`]
/// takes the scalar form, blocks of [`PACKED_MR`]),
/// which stays in L1 (or L2) while the blocks go by, with all its accumulators in registers (see
/// [`packed_block`]). Each output folds the same products (`y` is stored as the f32 the product rounds it to) in
/// the same lane order as the blocked and tiled layouts: the same bits. `None` where this does not apply (the
/// summand is not such a product, or the reduction has several variables of extent over 1 or more than
/// [`PACKED_MAX_K`] indices).
pub fn packed_rows(k: &Kernel, row: usize, b: usize, ind: &str) -> Option<String> {
    // The panel's width is chosen where the kernel is compiled: a C compiler targeting AVX-512 takes the first.
    let wide = packed_rows_of(k, row, b, ind, PACKED_TILE_512)?;
    let narrow = packed_rows_of(k, row, b, ind, PACKED_TILE)?;
    Some(format!("#if defined(__AVX512F__)\n{wide}#else\n{narrow}#endif\n"))
}

/// [`packed_rows`] with a panel of `width` row elements per reduction index ([`PACKED_TILE`] or
/// [`PACKED_TILE_512`]): tiles of that many row elements, then the rest in a tile of [`PACKED_TILE`] where it
/// fills one, then one of the scalar form.
fn packed_rows_of(k: &Kernel, row: usize, b: usize, ind: &str, width: usize) -> Option<String> {
    let red = k.reduce.as_ref()?;
    let nontrivial: Vec<usize> = (0..red.extents.len()).filter(|&j| red.extents[j] > 1).collect();
    let &[j] = nontrivial.as_slice() else { return None };
    let (kv, kn) = (k.domain.len() + j, red.extents[j]);
    if kn > PACKED_MAX_K {
        return None;
    }
    let Expr::Binary(Binary::Mul, DType::F32, out, x, y) = &k.value else { return None };
    // The operand packed per row element (independent of `b`) and the one per value of `b` (of the row).
    let pack_y = !uses_var(y, b) && !uses_var(x, row);
    let (per_b, packed) = if pack_y {
        (x, y)
    } else if !uses_var(x, b) && !uses_var(y, row) {
        (y, x)
    } else {
        return None;
    };
    if packed.dtype() != DType::F32 || per_b.dtype() != DType::F32 {
        return None;
    }
    let mr = k.domain[b].min(PACKED_MR);
    // The panel is argument `panel_arg` (past the kernel's own), read at `width * i<kv> + i<col>` with `col` a
    // variable past the kernel's.
    let (panel_arg, col) = (k.args.len(), k.domain.len() + red.extents.len());
    let at = Idx::var(kv, kn).scale(width as i64).add(&Idx::var(col, width));
    let panel = Box::new(Expr::Load { arg: panel_arg, at, dtype: DType::F32 });
    let (l, r) = if pack_y { (x.clone(), panel) } else { (panel, y.clone()) };
    let product = render(&Expr::Binary(Binary::Mul, DType::F32, *out, l, r), "a");
    let n = k.domain[row];
    let lanes = super::source::LANES;
    let full = n / width;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{ind}{{\n{ind}  typedef float ff_v8 __attribute__((vector_size(32)));\n{ind}  typedef float ff_v16 \
         __attribute__((vector_size(64)));\n{ind}  float pk[{kn}][{width}] __attribute__((aligned({})));\n{ind}  const \
         float* a{panel_arg} = &pk[0][0];",
        width * 4
    );
    let ind1 = format!("{ind}  ");
    // The vector form multiplies a panel vector by the other operand as an f32 scalar: the same product, rounded
    // once in f32, as the scalar form's (a product of f32 values rounded to f32).
    let scalar = (*out == DType::F32).then(|| render(per_b, "a"));
    let ctx = Packed { row, b, mr, kv, kn, lanes, col, y: render(packed, "a"), product, scalar };
    if full > 0 {
        let _ = writeln!(s, "{ind1}for (int64_t w0 = 0; w0 < {}; w0 += {width}) {{", full * width);
        s.push_str(&packed_tile(k, &ctx, ("w0", width), &format!("{ind1}  ")));
        let _ = writeln!(s, "{ind1}}}");
    }
    let mut done = full * width;
    if n - done >= PACKED_TILE && width > PACKED_TILE {
        s.push_str(&packed_tile(k, &ctx, (&done.to_string(), PACKED_TILE), &ind1));
        done += PACKED_TILE;
    }
    if n > done {
        s.push_str(&packed_tile(k, &ctx, (&done.to_string(), n - done), &ind1));
    }
    let _ = writeln!(s, "{ind}}}");
    Some(s)
}

/// What [`packed_tile`] renders with: the row, block and reduction variables (`mr` values of `b` per block, `kn`
/// reduction indices in `lanes` partial sums), the panel's column variable, and the packed operand `y` and the
/// product (reading the panel) as C.
struct Packed {
    row: usize,
    b: usize,
    mr: usize,
    kv: usize,
    kn: usize,
    lanes: usize,
    col: usize,
    y: String,
    product: String,
    /// The operand that is not packed, as a C scalar (at the block and reduction variables), where the vector
    /// form applies.
    scalar: Option<String>,
}

/// One tile of [`packed_rows`]: row elements `w0 .. w0 + w` packed into the panel, then every block of `b`
/// reduced over it in registers and stored (through the epilogue), row element innermost.
fn packed_tile(k: &Kernel, c: &Packed, (w0, w): (&str, usize), ind: &str) -> String {
    let Packed { row, b, mr, kv, kn, .. } = *c;
    let mut s = String::new();
    let _ = writeln!(s, "{ind}for (int64_t i{kv} = 0; i{kv} < {kn}; i{kv}++) {{");
    // See `c.rs`'s inner_loop_pragmas: GCC 12.2 miscompiled selects in short loops it unrolled completely.
    let _ = writeln!(s, "{ind}  #pragma GCC unroll 1\n{ind}  FF_SIMD");
    let _ = writeln!(
        s,
        "{ind}  for (int w = 0; w < {w}; w++) {{ int64_t i{row} = {w0} + w; pk[i{kv}][w] = (float)({}); }}\n{ind}}}",
        c.y
    );
    let e = k.domain[b];
    if let (Some(x), PACKED_TILE | PACKED_TILE_512) = (&c.scalar, w) {
        let mr = e.min(PACKED_VMR);
        let tail = e % mr;
        if e >= mr {
            let _ = writeln!(s, "{ind}for (int64_t bb = 0; bb < {}; bb += {mr}) {{", e - tail);
            s.push_str(&packed_block_vec(k, c, x, (w0, w), mr, &format!("{ind}  ")));
            let _ = writeln!(s, "{ind}}}");
        }
        if tail > 0 {
            let _ = writeln!(s, "{ind}{{\n{ind}  const int64_t bb = {};", e - tail);
            s.push_str(&packed_block_vec(k, c, x, (w0, w), tail, &format!("{ind}  ")));
            let _ = writeln!(s, "{ind}}}");
        }
        return s;
    }
    let tail = e % mr;
    if e >= mr {
        let _ = writeln!(s, "{ind}for (int64_t bb = 0; bb < {}; bb += {mr}) {{", e - tail);
        s.push_str(&packed_block(k, c, (w0, w), mr, &format!("{ind}  ")));
        let _ = writeln!(s, "{ind}}}");
    }
    if tail > 0 {
        let _ = writeln!(s, "{ind}{{\n{ind}  const int64_t bb = {};", e - tail);
        s.push_str(&packed_block(k, c, (w0, w), tail, &format!("{ind}  ")));
        let _ = writeln!(s, "{ind}}}");
    }
    s
}

/// `m` values of `b` from `bb` on over one packed tile: the `lanes` partial sums of each output are all live at
/// once (`lanes * m` vector accumulators), the reduction index walking the panel in order and going round the
/// lanes, so that the adds of consecutive indices do not wait on one another.
fn packed_block(k: &Kernel, c: &Packed, (w0, w): (&str, usize), m: usize, ind: &str) -> String {
    let red = k.reduce.as_ref().expect("a reduction");
    let Packed { row, b, kv, kn, lanes, col, .. } = *c;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{ind}float acc[{lanes}][{m}][{w}];\n{ind}for (int l = 0; l < {lanes}; l++) for (int r = 0; r < {m}; r++) \
         for (int w = 0; w < {w}; w++) acc[l][r][w] = 0.0f;"
    );
    let updates = |s: &mut String, first: &str, lanes_here: usize, ind: &str| {
        let _ = writeln!(s, "{ind}#pragma GCC unroll 1\n{ind}FF_SIMD");
        let _ = writeln!(s, "{ind}for (int w = 0; w < {w}; w++) {{\n{ind}  int64_t i{col} = w;");
        for l in 0..lanes_here {
            let _ = write!(s, "{ind}  {{ int64_t i{kv} = {first} + {l};");
            for r in 0..m {
                let _ = write!(s, " {{ int64_t i{b} = bb + {r}; acc[{l}][{r}][w] += (float)({}); }}", c.product);
            }
            let _ = writeln!(s, " }}");
        }
        let _ = writeln!(s, "{ind}}}");
    };
    lane_steps(&mut s, (kn, lanes), ind, updates);
    let count: usize = red.extents.iter().product();
    let fin = lanes_result(red, (0..lanes).map(|j| format!("acc[{j}][r][w]")).collect(), count);
    let _ = writeln!(
        s,
        "{ind}for (int r = 0; r < {m}; r++) {{ int64_t i{b} = bb + r; for (int w = 0; w < {w}; w++) {{ int64_t \
         i{row} = {w0} + w; {} }} }}",
        store_result(k, &fin)
    );
    s
}

/// The reduction loop of the packed layouts: `step(s, first, n, ind)` writes the updates of reduction indices
/// `first..first + n` (one per lane), called in a loop over whole groups of `lanes` indices, then once for the rest.
fn lane_steps(s: &mut String, (kn, lanes): (usize, usize), ind: &str, step: impl Fn(&mut String, &str, usize, &str)) {
    let full = kn - kn % lanes;
    if full > 0 {
        let _ = writeln!(s, "{ind}for (int64_t q = 0; q < {full}; q += {lanes}) {{");
        step(s, "q", lanes, &format!("{ind}  "));
        let _ = writeln!(s, "{ind}}}");
    }
    if kn % lanes > 0 {
        step(s, &full.to_string(), kn % lanes, ind);
    }
}

/// [`packed_block`] on a tile of `w` row elements, one vector ([`PACKED_TILE`] or [`PACKED_TILE_512`]), with the
/// accumulators in vector variables (`c<lane>_<r>`, GCC keeps them in registers): for each reduction index, one
/// aligned load of the panel's row times each block value's scalar `x`, added into that index's lane. Each output
/// folds the same f32 products in the same lane order, combined as the scalar form combines them: the same bits.
fn packed_block_vec(k: &Kernel, c: &Packed, x: &str, (w0, w): (&str, usize), m: usize, ind: &str) -> String {
    let red = k.reduce.as_ref().expect("a reduction");
    let Packed { row, b, kv, kn, lanes, .. } = *c;
    let mut s = String::new();
    for l in 0..lanes {
        let decl: Vec<String> = (0..m).map(|r| format!("c{l}_{r} = {{0}}")).collect();
        let _ = writeln!(s, "{ind}ff_v{w} {};", decl.join(", "));
    }
    let step = |s: &mut String, first: &str, lanes_here: usize, ind: &str| {
        for l in 0..lanes_here {
            let _ = write!(s, "{ind}{{ int64_t i{kv} = {first} + {l}; ff_v{w} pv = *(const ff_v{w}*)&pk[i{kv}][0];");
            for r in 0..m {
                let _ = write!(s, " {{ int64_t i{b} = bb + {r}; c{l}_{r} += pv * (float)({x}); }}");
            }
            let _ = writeln!(s, " }}");
        }
    };
    lane_steps(&mut s, (kn, lanes), ind, step);
    let count: usize = red.extents.iter().product();
    for r in 0..m {
        let fin = lanes_result(red, (0..lanes).map(|l| format!("c{l}_{r}[w]")).collect(), count);
        let _ = writeln!(
            s,
            "{ind}{{ int64_t i{b} = bb + {r}; for (int w = 0; w < {w}; w++) {{ int64_t i{row} = {w0} + w; {} }} }}",
            store_result(k, &fin)
        );
    }
    s
}

/// Whether `e` depends on loop variable `v` (through a load's or gather's index, or as a value).
pub(super) fn uses_var(e: &Expr, v: usize) -> bool {
    let mut loads = Vec::new();
    load_idxs(e, &mut loads);
    loads.iter().any(|i| i.mentions(v)) || mentions_as_value(e, v)
}
