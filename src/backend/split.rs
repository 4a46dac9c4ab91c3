//! Large kernel sources compiled in parallel: a program whose Python loops were unrolled can render a hundred
//! thousand lines of C (held-out round 37's 200-step hand-written LSTM: 1008 kernels, 91,731 lines, 153 s in one
//! `cc -O3`). Its top-level functions (kernels `kN` and the groups `gN` that call them) are independent, so the source
//! is cut at their boundaries into up to one part per core; each part is the header (includes, the prelude's static
//! helpers) with a prototype of every function, then its own functions, compiled on its own (`-c`, from stdin, as the
//! single build is), and the objects are linked into the one library. The same source always gives the same parts.

use std::path::{Path, PathBuf};

/// Sources under this many lines compile as one unit (every program of the corpus but the unrolled ones).
pub const SPLIT_LINES: usize = 20_000;

/// The parts to compile: each a complete C translation unit; `None` where the source is small, has one core to run
/// on, or does not have the expected shape (a header, then top-level `void NAME(void** b, const int64_t* p)`
/// functions).
pub fn parts(source: &str, cores: usize) -> Option<Vec<String>> {
    if cores < 2 || source.lines().count() < SPLIT_LINES {
        return None;
    }
    let body_at = source.find("\nvoid k")? + 1;
    let (header, body) = source.split_at(body_at);
    // Top-level units: each starts at a line that opens a function, or at the comment line before a group's.
    let mut cuts = vec![0];
    let (mut at, mut after_comment) = (0, false);
    for line in body.split_inclusive('\n') {
        let comment = line.starts_with("/* group");
        if at > 0 && (comment || (line.starts_with("void ") && !after_comment)) {
            cuts.push(at);
        }
        after_comment = comment;
        at += line.len();
    }
    cuts.push(body.len());
    let units: Vec<&str> = cuts.windows(2).map(|w| &body[w[0]..w[1]]).collect();
    let mut protos = String::new();
    for line in body.lines().filter(|l| l.starts_with("void ") && l.ends_with(") {")) {
        protos.push_str(&line[..line.len() - 2]);
        protos.push_str(";\n");
    }
    if protos.is_empty() {
        return None;
    }
    let n = cores.min(units.len());
    let per = body.len().div_ceil(n);
    let mut parts = vec![format!("{header}{protos}")];
    for u in units {
        if parts.last().is_some_and(|p| p.len() - header.len() - protos.len() >= per) {
            parts.push(format!("{header}{protos}"));
        }
        parts.last_mut().expect("one part at least").push_str(u);
    }
    Some(parts)
}

/// Compiles `parts` with `cc` and `flags` (those of a single build: `-shared` is kept for the link only) into the
/// library `out`, each part in its own process at once.
pub fn build(parts: &[String], cc: &str, flags: &[String], out: &Path) -> Result<(), String> {
    let compile_flags: Vec<&String> = flags.iter().filter(|f| f.as_str() != "-shared").collect();
    let objects: Vec<PathBuf> = (0..parts.len()).map(|i| out.with_extension(format!("{i}.o"))).collect();
    let mut running = Vec::new();
    for (part, obj) in parts.iter().zip(&objects) {
        let mut args: Vec<std::ffi::OsString> = compile_flags.iter().map(Into::into).collect();
        args.extend(["-c".into(), "-o".into(), obj.into(), "-x".into(), "c".into(), "-".into()]);
        running.push(super::cache::Cc::start(cc, &args, part.clone()));
    }
    // Every started compiler is waited for, the first error kept.
    let mut failed = None;
    for r in running {
        if let Err(e) = r.and_then(super::cache::Cc::finish) {
            failed.get_or_insert(e);
        }
    }
    let linked = match failed {
        Some(e) => Err(e),
        None => {
            let out = std::process::Command::new(cc)
                .args(flags)
                .arg("-o")
                .arg(out)
                .args(&objects)
                .arg("-lm")
                .output()
                .map_err(|e| format!("cannot run the C compiler `{cc}` to link: {e}"))?;
            match out.status.success() {
                true => Ok(()),
                false => Err(format!("linking the kernels failed:\n{}", String::from_utf8_lossy(&out.stderr))),
            }
        }
    };
    objects.iter().for_each(|o| {
        let _ = std::fs::remove_file(o);
    });
    linked
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "#include <stdint.h>\nstatic inline float h(float x) { return x; }\n";

    fn source() -> String {
        let mut src = HEADER.to_string();
        for k in 0..4000 {
            src.push_str(&format!(
                "void k{k}(void** b, const int64_t* p) {{\n  (void)p;\n  float* a0 = (float*)b[0];\n  a0[0] = h({k}.0f);\n}}\n\n"
            ));
        }
        src.push_str("/* group g0: one call for independent kernels */\nvoid g0(void** b, const int64_t* p) {\n  k0(b, p);\n  k3999(b + 1, p);\n}\n");
        src
    }

    #[test]
    fn a_large_source_is_cut_at_function_boundaries_and_each_part_declares_every_function() {
        let (header, src) = (HEADER, source());
        assert!(parts(&src, 1).is_none(), "one core: one unit");
        assert!(parts(header, 4).is_none(), "a small source: one unit");
        let ps = parts(&src, 4).unwrap();
        assert_eq!(ps.len(), 4);
        for p in &ps {
            assert!(p.starts_with(header) && p.contains("void k3999(void** b, const int64_t* p);\n"));
        }
        // Every function is defined in exactly one part, whole, and the group's comment stays with it.
        for k in [0, 1234, 3999] {
            let def = format!("void k{k}(void** b, const int64_t* p) {{\n  (void)p;\n  float* a0 = (float*)b[0];\n  a0[0] = h({k}.0f);\n}}");
            assert_eq!(ps.iter().filter(|p| p.contains(&def)).count(), 1, "k{k}");
        }
        let g = "/* group g0: one call for independent kernels */\nvoid g0(void** b, const int64_t* p) {";
        assert_eq!(ps.iter().filter(|p| p.contains(g)).count(), 1);
        assert_eq!(parts(&src, 4), Some(ps), "the same source gives the same parts");
    }

    #[test]
    fn parts_compile_and_link_into_the_same_library_each_time() {
        let ps = parts(&source(), 3).unwrap();
        let dir = std::env::temp_dir().join(format!("funcfuse-split-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let flags: Vec<String> = ["-O1", "-fPIC", "-shared", "-w"].map(String::from).to_vec();
        let (a, b) = (dir.join("a.so"), dir.join("b.so"));
        build(&ps, "cc", &flags, &a).unwrap();
        build(&ps, "cc", &flags, &b).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "builds of one source are identical");
        // A part the compiler rejects fails the build with its messages, and leaves no library.
        let mut bad = ps.clone();
        bad[1].push_str("void broken(void** b, const int64_t* p) { undeclared_name = 1; }\n");
        let c = dir.join("c.so");
        let e = build(&bad, "cc", &flags, &c).unwrap_err();
        assert!(e.contains("rejected the kernels") && e.contains("undeclared_name"), "{e}");
        assert!(!c.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
