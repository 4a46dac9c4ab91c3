//! What the generator appends at the end of a program, each from a stream of its own so that seeds' programs stay
//! as they were apart from the added lines: sorts and topk (the [`Gen::later`] stream) and `torch.gather` (the
//! `gathers` stream).

use super::Gen;

impl Gen {
    /// Sometimes (the [`Gen::later`] stream), at the end of the program, sorts of a float tensor along one dim: a
    /// topk's values (PyTorch leaves the order of tied indices open), or a stable sort's values and indices, each
    /// kept whole or through a leading slice, the values sometimes written in place (the input rounded to a grid).
    /// Returns the names to return besides the program's own.
    pub(super) fn sorts(&mut self) -> Vec<String> {
        let fl: Vec<usize> = self.floats().into_iter().filter(|&i| !self.tensors[i].shape.is_empty()).collect();
        if fl.is_empty() || !self.later.pct(40) {
            return Vec::new();
        }
        let t = self.tensors[*self.later.pick(&fl)].clone();
        let d = self.later.range(0, t.shape.len() as i64 - 1) as usize;
        let neg = if self.later.pct(30) { d as i64 - t.shape.len() as i64 } else { d as i64 };
        let n = t.shape[d] as i64;
        let desc = if self.later.pct(50) { "True" } else { "False" };
        if self.later.pct(50) {
            let k = self.later.range(0, n);
            let name = self.name("t");
            self.later_line(format!("{name} = {}.topk({k}, {neg}, largest={desc}).values", t.name));
            return vec![name];
        }
        let (v, i) = (self.name("t"), self.name("i"));
        // On a grid of 1/64, values an ulp apart (transcendentals within tolerance) are exact ties, which a stable
        // sort orders, not near-ties, whose order (so the indices) could differ between engines (fuzz seed 300584).
        let grid = format!("({} * 64.0).round()", t.name);
        self.later_line(format!("{v}, {i} = torch.sort({grid}, dim={neg}, descending={desc}, stable=True)"));
        for name in [&v, &i] {
            if self.later.pct(50) {
                let k = self.later.range(0, n);
                self.later_line(format!("{name} = {name}[{}:{k}]", ":, ".repeat(d)));
            }
        }
        if self.later.pct(30) {
            self.later_line(format!("{v}.mul_(-2.0)"));
        }
        vec![v, i]
    }

    /// Sometimes, at the end of the program, `torch.gather` of a float tensor along one dim with an index tensor of
    /// its rank: each dim but the gathered one at most the tensor's, the gathered one of any length, the entries in
    /// range; rarely one entry at the dim's size or negative (gather does not wrap), which every engine must refuse
    /// as PyTorch does. The index is a literal (int64 or int32), a literal broadcast along one dim, or the tensor's
    /// argmax along the dim. Returns the name to return besides the program's own.
    pub(super) fn gathers(&mut self) -> Vec<String> {
        let ok = |t: &super::TVar| !t.shape.is_empty() && t.shape.iter().all(|&n| n > 0);
        let fl: Vec<usize> = self.floats().into_iter().filter(|&i| ok(&self.tensors[i])).collect();
        if fl.is_empty() || !self.gathers.pct(30) {
            return Vec::new();
        }
        let t = self.tensors[*self.gathers.pick(&fl)].clone();
        let nd = t.shape.len();
        let d = self.gathers.range(0, nd as i64 - 1) as usize;
        let neg = if self.gathers.pct(30) { d as i64 - nd as i64 } else { d as i64 };
        let n = t.shape[d] as i64;
        let shape: Vec<i64> = (0..nd)
            .map(|k| if k == d { self.gathers.range(1, 4) } else { self.gathers.range(1, t.shape[k] as i64) })
            .collect();
        let count: i64 = shape.iter().product();
        let mut entries: Vec<i64> = (0..count).map(|_| self.gathers.range(0, n - 1)).collect();
        if self.gathers.pct(5) {
            let at = self.gathers.range(0, count - 1) as usize;
            entries[at] = if self.gathers.pct(50) { n } else { -1 };
        }
        let name = self.name("g");
        let dims: Vec<String> = shape.iter().map(|k| k.to_string()).collect();
        let literal = format!("torch.tensor({entries:?}).reshape({})", dims.join(", "));
        // The index as a literal, an int32 literal, a literal broadcast along one dim (a stride-0 view), or the
        // tensor's own argmax along the dim (indices computed from data).
        let index = match self.gathers.weighted(&[5, 2, 2, 2]) {
            0 => literal,
            1 => format!("{literal}.int()"),
            2 => {
                let k = self.gathers.range(0, nd as i64 - 1) as usize;
                let mut one = shape.clone();
                one[k] = 1;
                let row = &entries[..one.iter().product::<i64>() as usize];
                let ones: Vec<String> = one.iter().map(|k| k.to_string()).collect();
                format!("torch.tensor({row:?}).reshape({}).expand({})", ones.join(", "), dims.join(", "))
            }
            _ => format!("{}.argmax({neg}, keepdim=True)", t.name),
        };
        self.later_line(format!("{name} = torch.gather({}, {neg}, {index})", t.name));
        vec![name]
    }
}
