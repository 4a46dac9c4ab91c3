//! The generator's view steps: slices (steps, negative bounds), select, narrow, transposes and permutations,
//! unsqueeze/squeeze, diagonal, chunk/split/unbind, view/reshape/flatten and expand, each with its result's shape.

use std::fmt::Write as _;

use super::{shape_text, slice_len, Gen};

impl Gen {
    /// A dim of a tensor of `nd` dims, drawn uniformly.
    fn pick_dim(&mut self, nd: usize) -> usize {
        self.rng.range(0, nd as i64 - 1) as usize
    }

    /// One view step applied to a tensor of `shape`: the text to append, the new shape, and whether the result is
    /// read-only (expand). `contig` says whether `.view` may be used.
    pub(super) fn view_step(&mut self, shape: &[usize], contig: bool) -> Option<(String, Vec<usize>, bool)> {
        let nd = shape.len();
        let k = self.rng.weighted(&[24, 14, 5, 7, 5, 6, 5, 4, 4, 4, 3, 4, 4, 3]);
        let lead = |d: usize| ":, ".repeat(d);
        match k {
            // A slice with steps and negative bounds.
            0 if nd > 0 => self.slice_step(shape),
            // Select by an index (constant, loop variable or run-time value).
            1 if nd > 0 => {
                let d = self.pick_dim(nd);
                let i = self.index(shape[d])?;
                let mut s = shape.to_vec();
                s.remove(d);
                let text = if self.rng.pct(25) { format!(".select({d}, {i})") } else { format!("[{}{i}]", lead(d)) };
                Some((text, s, false))
            }
            2 if nd > 0 => {
                let d = self.pick_dim(nd);
                let n = shape[d] as i64;
                let start = self.rng.range(0, n);
                let len = self.rng.range(0, n - start);
                let mut s = shape.to_vec();
                s[d] = len as usize;
                Some((format!(".narrow({d}, {start}, {len})"), s, false))
            }
            3 if nd >= 2 => {
                let (a, b) = (self.pick_dim(nd), self.pick_dim(nd));
                let mut s = shape.to_vec();
                s.swap(a, b);
                let text = if nd == 2 && self.rng.pct(50) && a != b {
                    ".t()".to_string()
                } else {
                    format!(".transpose({a}, {b})")
                };
                Some((text, s, false))
            }
            4 if nd >= 2 => {
                let mut perm: Vec<usize> = (0..nd).collect();
                for i in (1..nd).rev() {
                    let j = self.rng.range(0, i as i64) as usize;
                    perm.swap(i, j);
                }
                let s = perm.iter().map(|&p| shape[p]).collect();
                Some((format!(".permute({})", shape_text(&perm)), s, false))
            }
            5 => {
                let d = self.rng.range(0, nd as i64) as usize;
                let mut s = shape.to_vec();
                s.insert(d, 1);
                let text = if d == 0 && self.rng.pct(40) { "[None]".to_string() } else { format!(".unsqueeze({d})") };
                Some((text, s, false))
            }
            6 if nd > 0 => {
                let d = self.pick_dim(nd);
                let mut s = shape.to_vec();
                if s[d] == 1 {
                    s.remove(d);
                }
                Some((format!(".squeeze({d})"), s, false))
            }
            7 if nd >= 2 => {
                let off = self.rng.range(-1, 1);
                let (a, b) = (shape[0] as i64, shape[1] as i64);
                let len = if off >= 0 { a.min(b - off) } else { (a + off).min(b) }.max(0);
                let mut s = shape[2..].to_vec();
                s.push(len as usize);
                let text = if off == 0 { ".diagonal()".to_string() } else { format!(".diagonal({off})") };
                Some((text, s, false))
            }
            8 if nd > 0 => self.chunk_step(shape),
            9 if nd > 0 => self.split_step(shape),
            10 if nd > 0 => self.unbind_step(shape),
            // view (contiguous only), reshape and flatten: merge two adjacent dims, or flatten.
            11 | 12 => self.reshape_step(shape, k, contig),
            // expand: size-1 dims grow, and sometimes a new leading dim.
            13 => self.expand_step(shape),
            _ => None,
        }
    }

    /// A slice of one dim, with steps and negative bounds (`[..., a:b:s]` for the last dim).
    fn slice_step(&mut self, shape: &[usize]) -> Option<(String, Vec<usize>, bool)> {
        let nd = shape.len();
        let lead = |d: usize| ":, ".repeat(d);
        let d = self.pick_dim(nd);
        let n = shape[d] as i64;
        let start = if self.rng.pct(70) { Some(self.rng.range(-n - 1, n + 1)) } else { None };
        let stop = if self.rng.pct(60) { Some(self.rng.range(-n - 1, n + 1)) } else { None };
        let step = if self.rng.pct(65) { 1 } else { self.rng.range(2, 3) };
        let len = slice_len(n, start, stop, step);
        let f = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
        let mut sl = format!("{}:{}", f(start), f(stop));
        if step != 1 {
            let _ = write!(sl, ":{step}");
        }
        let text = if d == nd - 1 && nd > 1 && self.rng.pct(40) {
            format!("[..., {sl}]")
        } else {
            format!("[{}{sl}]", lead(d))
        };
        let mut s = shape.to_vec();
        s[d] = len as usize;
        Some((text, s, false))
    }

    /// One piece of `.chunk(n, d)` (indexed from the end sometimes).
    fn chunk_step(&mut self, shape: &[usize]) -> Option<(String, Vec<usize>, bool)> {
        let d = self.pick_dim(shape.len());
        let n = shape[d] as i64;
        if n == 0 {
            return None;
        }
        let chunks = self.rng.range(1, 3);
        let size = (n + chunks - 1) / chunks;
        let count = (n + size - 1) / size;
        let k = self.rng.range(0, count - 1);
        let mut s = shape.to_vec();
        s[d] = (size.min(n - k * size)) as usize;
        let kt = if self.rng.pct(30) { (k - count).to_string() } else { k.to_string() };
        Some((format!(".chunk({chunks}, {d})[{kt}]"), s, false))
    }

    /// One piece of `.split(size, d)`.
    fn split_step(&mut self, shape: &[usize]) -> Option<(String, Vec<usize>, bool)> {
        let d = self.pick_dim(shape.len());
        let n = shape[d] as i64;
        if n == 0 {
            return None;
        }
        let size = self.rng.range(1, n);
        let count = (n + size - 1) / size;
        let k = self.rng.range(0, count - 1);
        let mut s = shape.to_vec();
        s[d] = (size.min(n - k * size)) as usize;
        Some((format!(".split({size}, {d})[{k}]"), s, false))
    }

    /// One tensor of `.unbind(d)` (indexed from the end sometimes).
    fn unbind_step(&mut self, shape: &[usize]) -> Option<(String, Vec<usize>, bool)> {
        let d = self.pick_dim(shape.len());
        let n = shape[d] as i64;
        if n == 0 {
            return None;
        }
        let k = self.rng.range(-n, n - 1);
        let mut s = shape.to_vec();
        s.remove(d);
        Some((format!(".unbind({d})[{k}]"), s, false))
    }

    /// `view` (contiguous only, for `k` 11), `reshape` or `flatten`: two adjacent dims merged, or all flattened.
    fn reshape_step(&mut self, shape: &[usize], k: usize, contig: bool) -> Option<(String, Vec<usize>, bool)> {
        let nd = shape.len();
        let n: usize = shape.iter().product();
        let (text_shape, s) = if nd >= 2 && self.rng.pct(60) {
            let d = self.rng.range(0, nd as i64 - 2) as usize;
            let mut s = shape.to_vec();
            let merged = s[d] * s[d + 1];
            s.splice(d..d + 2, [merged]);
            (shape_text(&s), s)
        } else {
            ("-1".to_string(), vec![n])
        };
        if k == 11 && contig {
            Some((format!(".view({text_shape})"), s, false))
        } else if self.rng.pct(30) && nd >= 1 {
            Some((".flatten()".to_string(), vec![n], false))
        } else {
            Some((format!(".reshape({text_shape})"), s, false))
        }
    }

    /// `expand`: size-1 dims grow (given as -1 sometimes where kept), and sometimes a new leading dim.
    fn expand_step(&mut self, shape: &[usize]) -> Option<(String, Vec<usize>, bool)> {
        let mut s: Vec<usize> =
            shape.iter().map(|&d| if d == 1 && self.rng.pct(60) { self.rng.range(2, 3) as usize } else { d }).collect();
        if self.rng.pct(40) {
            s.insert(0, self.rng.range(1, 3) as usize);
        }
        let text = if self.rng.pct(50) {
            format!(".expand({})", shape_text(&s))
        } else {
            let mut parts: Vec<String> = s.iter().map(|d| d.to_string()).collect();
            let off = s.len() - shape.len();
            for (i, p) in parts.iter_mut().enumerate().skip(off) {
                if s[i] == shape[i - off] && self.rng.pct(50) {
                    *p = "-1".into();
                }
            }
            format!(".expand({})", parts.join(", "))
        };
        Some((text, s, true))
    }
}
