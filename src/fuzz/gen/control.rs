//! The generator's blocks: `for` and `while` loops, `if` on run-time values, lists built in loops, names set inside
//! loops, helper calls, and lists and dicts whose entries the arms of an `if` set. Names defined inside a block are dropped when it ends.

use super::{Dt, Gen, IVar, TVar, HELPERS};

impl Gen {
    /// Runs `f` as a nested block; names defined inside are dropped afterwards, names rebound inside keep their
    /// type but lose what was known of their layout.
    pub(super) fn block(&mut self, f: impl FnOnce(&mut Gen)) {
        let before: Vec<String> = self.tensors.iter().map(|t| t.name.clone()).collect();
        let ints = self.ints.len();
        self.indent += 1;
        self.depth += 1;
        let start = self.body.len();
        f(self);
        if self.body.len() == start {
            self.line("pass");
        }
        self.indent -= 1;
        self.depth -= 1;
        self.ints.truncate(ints);
        self.tensors.retain(|t| before.contains(&t.name));
        for t in &mut self.tensors {
            t.contig &= t.name.len() == 1;
        }
    }

    pub(super) fn body_statements(&mut self, n: i64) {
        for _ in 0..n {
            self.statement();
        }
    }

    /// `for i in range(lo, hi)` over a live tensor's leading dim, with writes indexed by the loop variable.
    pub(super) fn for_loop(&mut self) {
        let s = self.tensors.iter().filter(|t| !t.shape.is_empty()).map(|t| t.shape[0]).max().unwrap_or(3) as i64;
        let lo = self.rng.range(0, 1.min(s));
        let hi = self.rng.range(lo, s);
        let var = self.name("i");
        let bound = match self.ints.iter().find(|v| v.name == "n" && v.hi <= s && v.lo == v.hi) {
            Some(v) if self.rng.pct(40) => (v.name.clone(), v.hi),
            _ => (hi.to_string(), hi),
        };
        let (hi_text, hi) = bound;
        let range =
            if lo == 0 && self.rng.pct(50) { format!("range({hi_text})") } else { format!("range({lo}, {hi_text})") };
        self.line(format!("for {var} in {range}:"));
        let n = self.rng.range(1, 3);
        let target = var.clone();
        self.block(|g| {
            g.in_loop += 1;
            let outer = std::mem::replace(&mut g.no_continue, false);
            g.ints.push(IVar { name: var, lo, hi: hi - 1 });
            g.body_statements(n);
            g.no_continue = outer;
            g.in_loop -= 1;
        });
        // After no iteration the target is unbound.
        if hi > lo {
            self.read_after_loop(&target);
        }
    }

    /// `while k < LIMIT:` with a counter, sometimes with a `break` on a run-time value.
    pub(super) fn while_loop(&mut self) {
        let var = self.name("k");
        let limit = self.rng.range(0, 4);
        self.line(format!("{var} = 0"));
        self.line(format!("while {var} < {limit}:"));
        let n = self.rng.range(1, 2);
        self.block(|g| {
            g.in_loop += 1;
            g.ints.push(IVar { name: var.clone(), lo: 0, hi: (limit - 1).max(0) });
            // A `continue` before the counter's step would repeat the iteration forever.
            let outer = std::mem::replace(&mut g.no_continue, true);
            g.body_statements(n);
            g.line(format!("{var} += 1"));
            g.no_continue = false;
            if g.rng.pct(40) {
                g.data_break();
            }
            g.no_continue = outer;
            g.in_loop -= 1;
        });
        self.read_after_loop(&var);
    }

    /// `if <run-time value>: break`.
    pub(super) fn data_break(&mut self) {
        let cond = self.data_cond();
        self.line(format!("if {cond}:"));
        self.indent += 1;
        let stmt = if self.rng.pct(80) || self.no_continue { "break" } else { "continue" };
        self.line(stmt);
        self.indent -= 1;
    }

    /// A condition on run-time data.
    pub(super) fn data_cond(&mut self) -> String {
        let fl = self.floats();
        let t = self.tensors[*self.rng.pick(&fl)].clone();
        // Never 0: a centered tensor's sum or mean is 0 up to rounding, and which side of 0 the rounding lands on
        // depends on the order of the additions (fuzz seed 197155: `_center(h).sum() > 0.0` took the other arm in
        // the C plan). 0 becomes 1/8, far from any sum that cancels.
        let th = match self.rng.range(-2, 2) {
            0 => 0.125,
            k => k as f64 / 4.0,
        };
        match self.rng.weighted(&[4, 3, 2]) {
            0 => format!("{}.sum() > {th:?}", t.name),
            1 if !t.shape.is_empty() && t.shape[0] > 0 => format!("{}[0].mean().item() < {th:?}", t.name),
            _ => match self.tensors.iter().find(|t| t.name == "idx") {
                Some(_) => format!("idx[0] > {}", self.rng.range(2, 7)),
                None => format!("{}.abs().sum() >= {th:?}", t.name),
            },
        }
    }

    /// `if` on a run-time value (sometimes on a Python value), sometimes binding one name to views of different
    /// tensors in the two arms, then writing through it.
    pub(super) fn if_block(&mut self) {
        let cond = if self.rng.pct(75) || self.ints.is_empty() {
            self.data_cond()
        } else {
            let v = self.rng.pick(&self.ints).clone();
            format!("{} == {}", v.name, self.rng.range(v.lo, v.hi))
        };
        // Two writable tensors of one shape: the name `w` views one or the other.
        let w = self.writable_floats();
        let pairs: Vec<(usize, usize)> = w
            .iter()
            .flat_map(|&i| w.iter().map(move |&j| (i, j)))
            .filter(|&(i, j)| i < j && self.tensors[i].shape == self.tensors[j].shape)
            .collect();
        let rebind = if !pairs.is_empty() && self.rng.pct(45) { Some(*self.rng.pick(&pairs)) } else { None };
        let name = self.name("w");
        let mut view = None;
        if let Some((i, _)) = rebind {
            let t = self.tensors[i].clone();
            let (text, shape, writable) = self.view_of(&t);
            view = Some((text[t.name.len()..].to_string(), shape, writable));
        }
        self.line(format!("if {cond}:"));
        let n1 = self.rng.range(1, 2);
        let v1 = view.clone();
        let rb = rebind;
        let nm = name.clone();
        self.block(|g| {
            if let (Some((i, _)), Some((suffix, _, _))) = (rb, &v1) {
                let base = g.tensors[i].name.clone();
                g.line(format!("{nm} = {base}{suffix}"));
            }
            g.body_statements(n1);
        });
        let has_else = rebind.is_some() || self.rng.pct(60);
        if has_else {
            self.line("else:");
            let n2 = self.rng.range(1, 2);
            let v2 = view.clone();
            let nm = name.clone();
            self.block(|g| {
                if let (Some((_, j)), Some((suffix, _, _))) = (rb, &v2) {
                    let base = g.tensors[j].name.clone();
                    g.line(format!("{nm} = {base}{suffix}"));
                }
                g.body_statements(n2);
            });
        }
        if let Some((_, shape, writable)) = view {
            self.define(TVar { name: name.clone(), dt: Dt::F32, shape: shape.clone(), writable, contig: false });
            if writable {
                let src = self.expr(&shape, 1);
                self.line(format!("{name} += {src}"));
            }
        }
    }

    /// A list built in a loop, then stacked, concatenated or summed, sometimes after a slice with a negative step.
    pub(super) fn list_loop(&mut self) {
        let Some(t) = self.pick_float(|t| !t.shape.is_empty()) else { return };
        let n = t.shape[0] as i64;
        if n == 0 {
            return;
        }
        let xs = self.name("xs");
        let i = self.name("i");
        let row: Vec<usize> = t.shape[1..].to_vec();
        self.line(format!("{xs} = []"));
        self.line(format!("for {i} in range({n}):"));
        let e = {
            self.ints.push(IVar { name: i.clone(), lo: 0, hi: n - 1 });
            let e = self.expr(&row, 1);
            self.ints.pop();
            e
        };
        self.indent += 1;
        self.line(format!("{xs}.append({}[{i}] * 2.0 + {e})", t.name));
        self.indent -= 1;
        let sl = match self.rng.weighted(&[4, 2, 2, 1]) {
            0 => String::new(),
            1 => "[::-1]".to_string(),
            2 => "[::-2]".to_string(),
            _ => "[1:]".to_string(),
        };
        let count = match sl.as_str() {
            "" => n,
            "[::-1]" => n,
            "[::-2]" => (n + 1) / 2,
            _ => n - 1,
        } as usize;
        let name = self.name("t");
        if count == 0 {
            return;
        }
        let (text, shape) = match self.rng.weighted(&[3, 2, 2]) {
            0 => {
                let mut s = row.clone();
                s.insert(0, count);
                (format!("torch.stack({xs}{sl})"), s)
            }
            1 if !row.is_empty() => {
                let mut s = row.clone();
                s[0] *= count;
                (format!("torch.cat({xs}{sl}, 0)"), s)
            }
            _ => {
                self.line(format!("{name} = {xs}{sl}[0]"));
                self.line(format!("for x in {xs}{sl}[1:]:"));
                self.indent += 1;
                self.line(format!("{name} = {name} + x"));
                self.indent -= 1;
                self.define(TVar { name, dt: Dt::F32, shape: row, writable: true, contig: true });
                return;
            }
        };
        self.line(format!("{name} = {text}"));
        self.define(TVar { name, dt: Dt::F32, shape, writable: true, contig: true });
    }

    /// A name that is `None` before a loop and a tensor after an `if` inside it.
    pub(super) fn last_in_loop(&mut self) {
        let Some(t) = self.pick_float(|t| !t.shape.is_empty()) else { return };
        let n = t.shape[0] as i64;
        if n == 0 {
            return;
        }
        let name = self.name("last");
        let i = self.name("i");
        self.line(format!("{name} = None"));
        self.line(format!("for {i} in range({n}):"));
        self.indent += 1;
        self.line(format!("if {i} == {}:", n - 1));
        self.indent += 1;
        self.line(format!("{name} = {}[{i}] * 2.0", t.name));
        self.indent -= 2;
        self.define(TVar { name, dt: Dt::F32, shape: t.shape[1..].to_vec(), writable: true, contig: true });
    }

    /// A call of a helper (inlined by the engines), some of which write through their arguments.
    pub(super) fn helper_call(&mut self) {
        let w = self.writable_floats();
        if w.is_empty() {
            return;
        }
        let t = self.tensors[*self.rng.pick(&w)].clone();
        let (target, shape, writable) =
            if self.rng.pct(40) { (t.name.clone(), t.shape.clone(), true) } else { self.view_of(&t) };
        let h = self.rng.range(0, HELPERS.len() as i64 - 1) as usize;
        let name = self.name("h");
        match HELPERS[h].0 {
            "_axpy_" if writable => {
                let x = self.expr(&shape, 1);
                self.line(format!("{name} = _axpy_({target}, {x})"));
            }
            "_gate" => {
                let x = self.expr(&shape, 1);
                self.line(format!("{name} = _gate({target}, {x})"));
            }
            "_center" if !shape.is_empty() && *shape.last().unwrap() > 0 => {
                self.line(format!("{name} = _center({target})"));
            }
            "_bump_" if writable => {
                self.line(format!("_bump_({target})"));
                self.helpers_used.push(h);
                return;
            }
            _ => return,
        }
        self.helpers_used.push(h);
        self.define(TVar { name, dt: Dt::F32, shape, writable, contig: false });
    }

    /// Sometimes (the [`Gen::later`] stream decides), at the end of the program: a dict or a list of two tensors of
    /// one shape whose first entry the arms of an `if` on a run-time value set differently (a fresh value, the other
    /// entry, a writable tensor itself, or nothing), then written through in place; both entries are returned.
    pub(super) fn container_if(&mut self) -> Vec<String> {
        let fl = self.floats();
        if fl.is_empty() || !self.later.pct(35) {
            return Vec::new();
        }
        let t = self.tensors[*self.later.pick(&fl)].clone();
        let (c, dict) = (self.name("st"), self.later.pct(50));
        let (k0, k1) = if dict { ("[\"a\"]", "[\"b\"]") } else { ("[0]", "[1]") };
        let e = self.expr(&t.shape, 1);
        match dict {
            true => self.line(format!("{c} = {{\"a\": {e}, \"b\": {}}}", t.name)),
            false => self.line(format!("{c} = [{e}, {}]", t.name)),
        }
        let writable: Vec<String> = self
            .writable_floats()
            .into_iter()
            .filter(|&i| self.tensors[i].shape == t.shape)
            .map(|i| self.tensors[i].name.clone())
            .collect();
        let cond = self.data_cond();
        self.line(format!("if {cond}:"));
        let arms = if self.later.pct(70) { 2 } else { 1 };
        for arm in 0..arms {
            if arm == 1 {
                self.line("else:");
            }
            let value = match self.later.weighted(&[3, 2, 2, 1]) {
                0 => Some(self.expr(&t.shape, 1)),
                1 if t.writable => Some(format!("{c}{k1}")),
                2 if !writable.is_empty() => Some(self.later.pick(&writable).clone()),
                _ => None,
            };
            self.indent += 1;
            match value {
                Some(v) => self.line(format!("{c}{k0} = {v}")),
                None => self.line("pass"),
            }
            self.indent -= 1;
        }
        if self.later.pct(60) {
            let e = self.expr(&t.shape, 1);
            self.line(format!("{c}{k0} += {e}"));
        }
        let (a, b) = (self.name("t"), self.name("t"));
        self.line(format!("{a} = {c}{k0} * 1.0"));
        self.line(format!("{b} = {c}{k1} + 0.0"));
        vec![a, b]
    }
}
