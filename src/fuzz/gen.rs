//! The random program generator: seeded, deterministic, and valid by construction.
//!
//! A program is written statement by statement while the generator tracks every live name: tensors with their dtype,
//! shape, whether they may be written through (an `expand`ed view may not) and whether they are known contiguous (so
//! `view` is only asked of tensors it accepts); integers with the range of values they can take, so that every index
//! it writes is in bounds for every iteration of the loops around it (or is deliberately not, rarely, to check that
//! every engine raises PyTorch's error). Shapes are small (dims of 0 to 6) so that empty slices, size-1 dims and
//! broadcasting come up often.
//!
//! What it writes: views of views (slices with steps and negative bounds, select, narrow, t/transpose/permute,
//! unsqueeze/squeeze, view/reshape/flatten, expand, chunk/split/unbind, diagonal), writes through any of them (`=`,
//! augmented assignment, `copy_`, in-place methods, `fill_`, `zero_`, `masked_fill_`, `index_put_`), index tensors and
//! `.item()` indices, mutated parameters, `for` loops with carried and independent writes, `while` loops with `break`,
//! `if` on run-time values (names rebound to views of different tensors in the two arms), lists built in loops (and
//! sliced with negative steps), `contiguous()`, helpers, and int parameters.
//!
//! Invariant: the same seed gives the same program text, byte for byte.

use std::fmt::Write as _;

mod control;
mod ends;
mod views;

/// SplitMix64: small, fast and fully specified, so a seed means the same program everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }

    /// True with probability `p` percent.
    pub fn pct(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next() % xs.len() as u64) as usize]
    }

    /// An index into a list of `weights.len()` choices, drawn by weight.
    pub fn weighted(&mut self, weights: &[u64]) -> usize {
        let total: u64 = weights.iter().sum();
        let mut r = self.next() % total.max(1);
        for (i, w) in weights.iter().enumerate() {
            if r < *w {
                return i;
            }
            r -= w;
        }
        weights.len() - 1
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dt {
    F32,
    I64,
    Bool,
}

/// A live tensor name.
#[derive(Clone, Debug)]
struct TVar {
    name: String,
    dt: Dt,
    shape: Vec<usize>,
    /// Writes through it are allowed (false for expanded views, whose writes PyTorch rejects).
    writable: bool,
    /// Known contiguous, so `.view(...)` accepts it.
    contig: bool,
}

/// A live integer name and the values it can take (inclusive).
#[derive(Clone, Debug)]
struct IVar {
    name: String,
    lo: i64,
    hi: i64,
}

/// An integer expression with the range of its values over every iteration of the loops around it.
struct IntExpr {
    text: String,
    lo: i64,
    hi: i64,
}

/// The helpers a program may call; each is written into the module only when used.
const HELPERS: &[(&str, &str)] = &[
    ("_axpy_", "def _axpy_(y, x):\n    y.add_(x * 0.5)\n    return y\n"),
    ("_gate", "def _gate(x, h):\n    return torch.sigmoid(x) * torch.tanh(h)\n"),
    ("_center", "def _center(x):\n    m = x.mean(-1, keepdim=True)\n    return x - m\n"),
    ("_bump_", "def _bump_(x):\n    x.mul_(0.5)\n    x.add_(1.0)\n"),
];

/// The generator's state while writing one program.
pub struct Gen {
    rng: Rng,
    /// A second stream for what the generator learned to write later, so that it leaves the first stream, and with
    /// it every seed's program as it was, unchanged apart from the added lines.
    later: Rng,
    /// A third stream, for `torch.gather` (added after `later`'s users, for the same reason).
    gathers: Rng,
    body: Vec<String>,
    indent: usize,
    tensors: Vec<TVar>,
    ints: Vec<IVar>,
    fresh: usize,
    depth: usize,
    helpers_used: Vec<usize>,
    /// How many statements may still be written (keeps programs small).
    budget: i64,
    /// Inside a loop body (for `break` and loop-dependent writes).
    in_loop: usize,
    /// Whether a `continue` here would skip a `while` loop's counter step (and so could loop forever).
    no_continue: bool,
}

/// Generates the program for `seed`: a module with one program `fuzz_<seed>` (and the helpers it calls).
pub fn generate(seed: u64) -> String {
    let mut g = Gen {
        rng: Rng::new(seed),
        later: Rng::new(seed ^ 0x6c61_7465_725f_7331),
        gathers: Rng::new(seed ^ 0x6761_7468_6572_7332),
        body: Vec::new(),
        indent: 1,
        tensors: Vec::new(),
        ints: Vec::new(),
        fresh: 0,
        depth: 0,
        helpers_used: Vec::new(),
        budget: 0,
        in_loop: 0,
        no_continue: false,
    };
    let params = g.params();
    g.budget = g.rng.range(4, 14);
    while g.budget > 0 {
        g.statement();
    }
    let mut ret = g.returns();
    for extra in [g.sorts(), g.container_if(), g.gathers()].concat() {
        ret = format!("{ret}, {extra}");
    }
    let mut out = String::from("from __future__ import annotations\n\nimport torch\n\n\n");
    let mut used = g.helpers_used.clone();
    used.sort();
    used.dedup();
    for h in used {
        out.push_str(HELPERS[h].1);
        out.push_str("\n\n");
    }
    let _ = writeln!(out, "def fuzz_{seed}({params}):");
    for l in &g.body {
        out.push_str(l);
        out.push('\n');
    }
    let _ = writeln!(out, "    return {ret}");
    out
}

fn shape_text(s: &[usize]) -> String {
    s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
}

/// Python's slice length for `start:stop:step` (step > 0) over a dim of size `n`.
fn slice_len(n: i64, start: Option<i64>, stop: Option<i64>, step: i64) -> i64 {
    let norm = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
    let a = start.map(norm).unwrap_or(0);
    let b = stop.map(norm).unwrap_or(n);
    if b > a {
        (b - a + step - 1) / step
    } else {
        0
    }
}

impl Gen {
    fn line(&mut self, text: impl AsRef<str>) {
        let pad = "    ".repeat(self.indent);
        self.body.push(format!("{pad}{}", text.as_ref()));
        self.budget -= 1;
    }

    /// A line drawn from the [`Gen::later`] stream: it takes nothing from the statement budget.
    fn later_line(&mut self, text: impl AsRef<str>) {
        let pad = "    ".repeat(self.indent);
        self.body.push(format!("{pad}{}", text.as_ref()));
    }

    /// Sometimes (the [`Gen::later`] stream) a loop's counter or target `var`, read after the loop, where a `break`
    /// may have stopped it: added to the first writable float tensor, which the program returns or writes.
    fn read_after_loop(&mut self, var: &str) {
        if !self.later.pct(30) {
            return;
        }
        if let Some(t) = self.tensors.iter().find(|t| t.dt == Dt::F32 && t.writable) {
            let line = format!("{} += {var}", t.name);
            self.later_line(line);
        }
    }

    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn random_shape(&mut self) -> Vec<usize> {
        let nd = self.rng.weighted(&[5, 30, 45, 20]);
        (0..nd).map(|_| self.rng.weighted(&[2, 10, 14, 16, 14, 10, 6]) as usize).collect()
    }

    /// The signature: two to four tensors (often of one shape, so that they can stand in for each other), sometimes
    /// an index tensor and an int parameter.
    fn params(&mut self) -> String {
        let mut ps = Vec::new();
        let base = self.random_shape();
        let n = self.rng.range(2, 4);
        for k in 0..n {
            let shape = if self.rng.pct(60) { base.clone() } else { self.random_shape() };
            let name = ["a", "b", "c", "d"][k as usize].to_string();
            let ann = if shape.is_empty() { "()".to_string() } else { shape_text(&shape) };
            ps.push(format!("{name}: f32[{ann}]"));
            self.tensors.push(TVar { name, dt: Dt::F32, shape, writable: true, contig: true });
        }
        if self.rng.pct(50) {
            let len = self.rng.range(1, 4) as usize;
            ps.push(format!("idx: i64[{len}]"));
            self.tensors.push(TVar { name: "idx".into(), dt: Dt::I64, shape: vec![len], writable: true, contig: true });
        }
        if self.rng.pct(40) {
            let v = self.rng.range(0, 4);
            ps.push(format!("n: int = {v}"));
            self.ints.push(IVar { name: "n".into(), lo: v, hi: v });
        }
        ps.join(", ")
    }

    fn floats(&self) -> Vec<usize> {
        (0..self.tensors.len()).filter(|&i| self.tensors[i].dt == Dt::F32).collect()
    }

    /// A live float tensor that `keep` accepts, drawn uniformly (one draw when any is accepted, none otherwise).
    fn pick_float(&mut self, keep: impl Fn(&TVar) -> bool) -> Option<TVar> {
        let fl: Vec<usize> = self.floats().into_iter().filter(|&i| keep(&self.tensors[i])).collect();
        if fl.is_empty() {
            return None;
        }
        Some(self.tensors[*self.rng.pick(&fl)].clone())
    }

    fn writable_floats(&self) -> Vec<usize> {
        (0..self.tensors.len()).filter(|&i| self.tensors[i].dt == Dt::F32 && self.tensors[i].writable).collect()
    }

    fn define(&mut self, t: TVar) {
        match self.tensors.iter_mut().find(|v| v.name == t.name) {
            Some(v) => *v = t,
            None => self.tensors.push(t),
        }
    }

    /// One statement of any kind, chosen by weight (blocks only while nesting is shallow).
    fn statement(&mut self) {
        let blocks = if self.depth < 2 { 1 } else { 0 };
        let k = self.rng.weighted(&[
            14,
            16,
            20,
            12,
            6,
            5,
            4,
            8 * blocks,
            4 * blocks,
            5 * blocks,
            3 * blocks,
            3 * blocks,
            3,
        ]);
        match k {
            0 => self.compute(),
            1 => self.take_view(),
            2 => self.write(),
            3 => self.inplace_method(),
            4 => self.reduce(),
            5 => self.combine(),
            6 => self.rebind(),
            7 => self.for_loop(),
            8 => self.if_block(),
            9 => self.list_loop(),
            10 => self.while_loop(),
            11 => self.last_in_loop(),
            _ => self.helper_call(),
        }
        if self.in_loop > 0 && self.rng.pct(3) {
            self.data_break();
        }
    }

    /// An integer index valid for a dim of size `s` (in `-s..s`) for every value of the integers it reads; rarely
    /// one that may be out of bounds (every engine must then raise PyTorch's error).
    fn index(&mut self, s: usize) -> Option<String> {
        let s = s as i64;
        let wild = self.rng.pct(4);
        let mut cands: Vec<IntExpr> = Vec::new();
        for v in &self.ints {
            let (lo, hi) = (v.lo, v.hi);
            cands.push(IntExpr { text: v.name.clone(), lo, hi });
            cands.push(IntExpr { text: format!("{} - 1", v.name), lo: lo - 1, hi: hi - 1 });
            cands.push(IntExpr { text: format!("{} + 1", v.name), lo: lo + 1, hi: hi + 1 });
            cands.push(IntExpr { text: format!("{} - {}", s - 1, v.name), lo: s - 1 - hi, hi: s - 1 - lo });
            if lo >= 0 {
                cands.push(IntExpr { text: format!("{} ** 2", v.name), lo: lo * lo, hi: hi * hi });
            }
        }
        let valid: Vec<usize> = (0..cands.len()).filter(|&i| wild || (cands[i].lo >= -s && cands[i].hi < s)).collect();
        if !valid.is_empty() && self.rng.pct(55) {
            let c = *self.rng.pick(&valid);
            return Some(cands[c].text.clone());
        }
        if s == 0 {
            return None;
        }
        if self.rng.pct(8) {
            // A run-time index from data: `.item()` of the index tensor, reduced into range.
            if let Some(ix) = self.tensors.iter().find(|t| t.name == "idx").cloned() {
                let j = self.rng.range(0, ix.shape[0] as i64 - 1);
                return Some(if wild { format!("idx[{j}].item()") } else { format!("idx[{j}].item() % {s}") });
            }
        }
        Some(self.rng.range(-s, s - 1).to_string())
    }

    /// A view of tensor `t` through one to three steps: (text, shape, writable, whether the last step is a tensor
    /// subscript, so that `text = ...` and `text += ...` are writes).
    fn view_of4(&mut self, t: &TVar) -> (String, Vec<usize>, bool, bool) {
        let mut text = t.name.clone();
        let mut shape = t.shape.clone();
        let mut writable = t.writable;
        let mut contig = t.contig;
        let mut sub = false;
        let steps = self.rng.range(1, 3);
        for _ in 0..steps {
            if let Some((s, sh, ro)) = self.view_step(&shape, contig) {
                sub = s.starts_with('[');
                text.push_str(&s);
                shape = sh;
                writable &= !ro;
                contig = false;
            }
        }
        (text, shape, writable, sub)
    }

    /// A view of tensor `t` through one to three steps: (text, shape, writable).
    fn view_of(&mut self, t: &TVar) -> (String, Vec<usize>, bool) {
        let (text, shape, writable, _) = self.view_of4(t);
        (text, shape, writable)
    }

    /// A float expression of exactly `shape` (broadcasting leaves allowed), `depth` levels deep at most. An
    /// expression whose every leaf broadcasts (`a + a` with `a` of a smaller shape) is brought to `shape` by adding
    /// zeros, so that the generator's shapes stay the program's.
    fn expr(&mut self, shape: &[usize], depth: usize) -> String {
        let (text, full) = self.expr_full(shape, depth);
        if full {
            text
        } else {
            let comma = if shape.len() == 1 { "," } else { "" };
            format!("({text} + torch.zeros(({}{comma})))", shape_text(shape))
        }
    }

    /// A float expression of `shape` or of a shape that broadcasts to it, and whether it has `shape` itself.
    fn expr_full(&mut self, shape: &[usize], depth: usize) -> (String, bool) {
        if depth == 0 || self.rng.pct(30) {
            return self.leaf_full(shape);
        }
        let k = self.rng.weighted(&[8, 8, 8, 4, 4, 4, 3, 3, 3, 3, 2, 2]);
        let (a, fa) = self.expr_full(shape, depth - 1);
        match k {
            0..=2 => {
                let (b, fb) =
                    if self.rng.pct(25) { (self.constant(), false) } else { self.expr_full(shape, depth - 1) };
                (format!("({a} {} {b})", ["+", "-", "*"][k]), fa || fb)
            }
            3 => (format!("torch.tanh({a})"), fa),
            4 => (format!("torch.sigmoid({a})"), fa),
            5 => (format!("{a}.relu()"), fa),
            6 => {
                let (b, fb) = self.expr_full(shape, depth - 1);
                (format!("torch.maximum({a}, {b})"), fa || fb)
            }
            7 => {
                let (b, fb) = self.expr_full(shape, depth - 1);
                let (c, fc) = self.expr_full(shape, depth - 1);
                (format!("torch.where({a} > {b}, {a}, {c})"), fa || fb || fc)
            }
            8 => (format!("{a}.clamp(min=-0.5, max=0.75)"), fa),
            9 => (format!("torch.exp({a}.clamp(max=1.0))"), fa),
            10 => {
                let (b, fb) = self.expr_full(shape, depth - 1);
                (format!("({a} / ({b}.abs() + 1.0))"), fa || fb)
            }
            _ => (format!("(-{a})"), fa),
        }
    }

    /// A leaf of a float expression (always a tensor): a name of the same (or a broadcastable) shape, a row of a
    /// bigger one, or `torch.full`.
    fn leaf(&mut self, shape: &[usize]) -> String {
        let (text, full) = self.leaf_full(shape);
        if full {
            text
        } else {
            let comma = if shape.len() == 1 { "," } else { "" };
            format!("({text} + torch.zeros(({}{comma})))", shape_text(shape))
        }
    }

    /// [`Gen::leaf`], and whether the leaf has `shape` itself (not a smaller shape that broadcasts to it).
    fn leaf_full(&mut self, shape: &[usize]) -> (String, bool) {
        let mut cands = Vec::new();
        for t in &self.tensors {
            let fits = t.shape.len() <= shape.len()
                && t.shape.iter().rev().zip(shape.iter().rev()).all(|(a, b)| a == b || *a == 1);
            if fits && (t.shape.len() == shape.len() || self.rng.pct(50)) {
                let text = match t.dt {
                    Dt::F32 => t.name.clone(),
                    Dt::I64 => format!("{}.float()", t.name),
                    Dt::Bool => format!("{}.float()", t.name),
                };
                cands.push((text, t.shape == shape));
            }
        }
        if !cands.is_empty() && self.rng.pct(80) {
            return self.rng.pick(&cands).clone();
        }
        // A select of a bigger tensor whose trailing shape matches.
        let rows: Vec<String> = self
            .tensors
            .iter()
            .filter(|t| t.dt == Dt::F32 && t.shape.len() == shape.len() + 1 && t.shape[1..] == *shape && t.shape[0] > 0)
            .map(|t| t.name.clone())
            .collect();
        if !rows.is_empty() && self.rng.pct(60) {
            let r = self.rng.pick(&rows).clone();
            let n = self.tensors.iter().find(|t| t.name == r).unwrap().shape[0];
            if let Some(i) = self.index(n) {
                return (format!("{r}[{i}]"), true);
            }
        }
        let comma = if shape.len() == 1 { "," } else { "" };
        (format!("torch.full(({}{comma}), {})", shape_text(shape), self.constant()), true)
    }

    /// A float constant.
    fn constant(&mut self) -> String {
        let c = [0.5, -1.25, 2.0, 0.0, 1.0, -0.5][self.rng.range(0, 5) as usize];
        format!("{c:?}")
    }

    /// A bool mask expression of `shape`.
    fn mask(&mut self, shape: &[usize]) -> String {
        let a = self.expr(shape, 1);
        let op = *self.rng.pick(&[">", "<", ">=", "<="]);
        let b = if self.rng.pct(50) { self.constant() } else { self.leaf_full(shape).0 };
        format!("({a} {op} {b})")
    }

    /// `tN = <expression>`: a fresh tensor of the shape of a live one.
    fn compute(&mut self) {
        let fl = self.floats();
        if fl.is_empty() {
            return;
        }
        let shape = self.tensors[*self.rng.pick(&fl)].shape.clone();
        let e = self.expr(&shape, 3);
        let name = self.name("t");
        let e = self.conditional(e);
        self.line(format!("{name} = {e}"));
        self.define(TVar { name, dt: Dt::F32, shape, writable: true, contig: true });
    }

    /// Sometimes (the [`Gen::later`] stream), outside loops and `if`s, `e` as the arm of a conditional expression on
    /// run-time data (`e if x.sum() > 0.25 else (e) * -0.5 + 1.0`), which the converter makes an `if` statement.
    fn conditional(&mut self, e: String) -> String {
        let fl = self.floats();
        if self.indent != 1 || fl.is_empty() || !self.later.pct(20) {
            return e;
        }
        let t = self.tensors[fl[self.later.range(0, fl.len() as i64 - 1) as usize]].name.clone();
        // Never 0, as in `data_cond`.
        let th = match self.later.range(-2, 2) {
            0 => 0.125,
            k => k as f64 / 4.0,
        };
        format!("{e} if {t}.sum() > {th:?} else ({e}) * -0.5 + 1.0")
    }

    /// `vN = <view of a live tensor>`; sometimes `.contiguous()` or `.clone()` of it.
    fn take_view(&mut self) {
        let fl = self.floats();
        if fl.is_empty() {
            return;
        }
        let t = self.tensors[*self.rng.pick(&fl)].clone();
        let (mut text, shape, writable) = self.view_of(&t);
        let mut contig = false;
        if self.rng.pct(20) {
            text.push_str(if self.rng.pct(60) { ".contiguous()" } else { ".clone()" });
            contig = true;
        }
        let name = self.name("v");
        self.line(format!("{name} = {text}"));
        self.define(TVar { name, dt: Dt::F32, shape, writable: writable || contig, contig });
    }

    /// A write through a view: `=`, an augmented assignment, or `copy_`.
    fn write(&mut self) {
        let mut w = self.writable_floats();
        if w.is_empty() || self.rng.pct(3) {
            w = self.floats();
        }
        if w.is_empty() {
            return;
        }
        let t = self.tensors[*self.rng.pick(&w)].clone();
        let (target, shape, _, is_sub) =
            if self.rng.pct(20) { (t.name.clone(), t.shape.clone(), true, false) } else { self.view_of4(&t) };
        // Subscript targets are written with `[...] =`; other views with copy_ or in-place methods.
        let src_shape = if !shape.is_empty() && self.rng.pct(20) { shape[1..].to_vec() } else { shape.clone() };
        let src_const = self.rng.pct(15);
        let src = if src_const { self.constant() } else { self.expr(&src_shape, 2) };
        let k = self.rng.weighted(&[if is_sub { 30 } else { 0 }, 30, 20]);
        match k {
            0 => self.line(format!("{target} = {src}")),
            1 => {
                let op = *self.rng.pick(&["+=", "-=", "*="]);
                if is_sub || target == t.name {
                    self.line(format!("{target} {op} {src}"));
                } else {
                    let m = match op {
                        "+=" => "add_",
                        "-=" => "sub_",
                        _ => "mul_",
                    };
                    self.line(format!("{target}.{m}({src})"));
                }
            }
            _ => {
                let src = if src_const { self.expr(&src_shape, 2) } else { src };
                self.line(format!("{target}.copy_({src})"))
            }
        }
    }

    /// An in-place method on a view: fill_, zero_, clamp_, relu_, sigmoid_, masked_fill_, index_put_.
    fn inplace_method(&mut self) {
        let w = self.writable_floats();
        if w.is_empty() {
            return;
        }
        let t = self.tensors[*self.rng.pick(&w)].clone();
        let (target, shape, _) =
            if self.rng.pct(30) { (t.name.clone(), t.shape.clone(), true) } else { self.view_of(&t) };
        let k = self.rng.weighted(&[10, 8, 10, 6, 6, 10, 8]);
        let call = match k {
            0 => format!("fill_({})", if self.rng.pct(30) { self.leaf(&[]) } else { self.constant() }),
            1 => "zero_()".to_string(),
            2 => {
                let lo = self.rng.range(-3, 0) as f64 / 4.0;
                if self.rng.pct(50) {
                    format!("clamp_({lo:?}, {:?})", lo + 0.75)
                } else {
                    format!("clamp_(min={lo:?})")
                }
            }
            3 => "relu_()".to_string(),
            4 => "sigmoid_()".to_string(),
            5 => {
                let m = self.mask(&shape);
                format!("masked_fill_({m}, {})", self.constant())
            }
            _ => {
                // index_put_ with distinct in-range indices along dim 0 (duplicates would make PyTorch's result
                // depend on the order it writes in).
                if shape.is_empty() || shape[0] == 0 {
                    return;
                }
                let n = shape[0] as i64;
                let count = self.rng.range(1, n.min(3));
                let mut ids: Vec<i64> = Vec::new();
                while (ids.len() as i64) < count {
                    let v = self.rng.range(-n, n - 1);
                    if !ids.iter().any(|&u| (u - v).rem_euclid(n) == 0) {
                        ids.push(v);
                    }
                }
                let mut vs = shape.clone();
                vs[0] = ids.len();
                let vals = self.expr(&vs, 1);
                let ids = ids.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ");
                let acc = if self.rng.pct(30) { ", accumulate=True" } else { "" };
                format!("index_put_((torch.tensor([{ids}]),), {vals}{acc})")
            }
        };
        self.line(format!("{target}.{call}"));
    }

    /// A reduction into a fresh name.
    fn reduce(&mut self) {
        let Some(t) = self.pick_float(|t| !t.shape.is_empty()) else { return };
        let nd = t.shape.len();
        let d = self.rng.range(0, nd as i64 - 1) as usize;
        let neg = if self.rng.pct(30) { d as i64 - nd as i64 } else { d as i64 };
        let keep = self.rng.pct(30);
        let mut s = t.shape.clone();
        let k = self.rng.weighted(&[10, 6, 6, 5, 5, 4, 3]);
        if t.shape[d] == 0 && matches!(k, 2 | 4) && !self.rng.pct(10) {
            return;
        }
        let kd = if keep { ", keepdim=True" } else { "" };
        let (text, dt) = match k {
            0 => (format!("{}.sum({neg}{kd})", t.name), Dt::F32),
            1 => (format!("{}.mean({neg}{kd})", t.name), Dt::F32),
            2 => (format!("{}.amax({neg}{kd})", t.name), Dt::F32),
            3 => {
                let name = self.name("t");
                self.line(format!("{name} = torch.softmax({}, {neg})", t.name));
                self.define(TVar { name, dt: Dt::F32, shape: s, writable: true, contig: true });
                return;
            }
            4 => (format!("{}.max({neg}{kd}).values", t.name), Dt::F32),
            5 => {
                let name = self.name("t");
                self.line(format!("{name} = {}.cumsum({neg})", t.name));
                self.define(TVar { name, dt: Dt::F32, shape: s, writable: true, contig: true });
                return;
            }
            _ => {
                let name = self.name("m");
                let m = self.mask(&t.shape);
                self.line(format!("{name} = {m}"));
                self.define(TVar { name, dt: Dt::Bool, shape: t.shape.clone(), writable: false, contig: true });
                return;
            }
        };
        if keep {
            s[d] = 1;
        } else {
            s.remove(d);
        }
        let name = self.name("r");
        self.line(format!("{name} = {text}"));
        self.define(TVar { name, dt, shape: s, writable: true, contig: true });
    }

    /// A fresh tensor from several: matmul, cat, stack.
    fn combine(&mut self) {
        let fl = self.floats();
        if fl.is_empty() {
            return;
        }
        let t = self.tensors[*self.rng.pick(&fl)].clone();
        let nd = t.shape.len();
        let name = self.name("t");
        let (text, shape) = match self.rng.weighted(&[4, 4, 3]) {
            0 if nd == 2 => {
                if self.rng.pct(50) {
                    (format!("{} @ {}.t()", t.name, self.expr(&t.shape, 1)), vec![t.shape[0], t.shape[0]])
                } else {
                    (format!("torch.matmul({}.t(), {})", t.name, self.expr(&t.shape, 1)), vec![t.shape[1], t.shape[1]])
                }
            }
            1 if nd >= 1 => {
                let d = self.rng.range(0, nd as i64 - 1) as usize;
                let other = self.expr(&t.shape, 1);
                let mut s = t.shape.clone();
                s[d] *= 2;
                (format!("torch.cat([{}, {other}], {d})", t.name), s)
            }
            _ => {
                let d = self.rng.range(0, nd as i64) as usize;
                let other = self.expr(&t.shape, 1);
                let mut s = t.shape.clone();
                s.insert(d, 2);
                (format!("torch.stack([{other}, {}], {d})", t.name), s)
            }
        };
        self.line(format!("{name} = {text}"));
        self.define(TVar { name, dt: Dt::F32, shape, writable: true, contig: true });
    }

    /// Rebinds a live name to a new value of its shape (inside loops: loop-carried state).
    fn rebind(&mut self) {
        let Some(t) = self.pick_float(|t| t.name.len() > 1) else { return self.compute() };
        let e = self.expr(&t.shape, 2);
        self.line(format!("{} = {} * 0.5 + {e}", t.name, t.name));
        self.define(TVar { contig: true, writable: true, ..t });
    }

    /// The returned names: one to three live tensors (locals preferred).
    fn returns(&mut self) -> String {
        let locals: Vec<String> =
            self.tensors.iter().filter(|t| t.name.len() > 1 && t.name != "idx").map(|t| t.name.clone()).collect();
        let mut picked: Vec<String> = Vec::new();
        let n = self.rng.range(1, 3);
        for _ in 0..n {
            let pool = if !locals.is_empty() && self.rng.pct(70) {
                locals.clone()
            } else {
                self.tensors.iter().map(|t| t.name.clone()).collect()
            };
            let c = self.rng.pick(&pool).clone();
            if !picked.contains(&c) {
                picked.push(c);
            }
        }
        if picked.len() == 1 && self.rng.pct(50) {
            picked.pop().unwrap()
        } else {
            picked.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_program() {
        for s in 0..50 {
            assert_eq!(generate(s), generate(s));
        }
        assert_ne!(generate(1), generate(2));
    }

    #[test]
    fn slice_lengths_are_pythons() {
        assert_eq!(slice_len(5, Some(-2), None, 1), 2);
        assert_eq!(slice_len(5, Some(1), Some(-1), 2), 2);
        assert_eq!(slice_len(5, Some(4), Some(2), 1), 0);
        assert_eq!(slice_len(5, Some(-9), Some(9), 3), 2);
        assert_eq!(slice_len(0, None, None, 2), 0);
    }
}
