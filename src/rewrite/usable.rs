//! The check every user rule passes before any command (or the Python package) plans with it.
//!
//! The rules of every user file are checked with the rule checker before use, and an unsound or unchecked rule is
//! refused with its counterexample; `unchecked` is the explicit way out. A file's verdict is cached by its content
//! under the per-user cache (`$FUNCFUSE_CACHE`, else `$XDG_CACHE_HOME/funcfuse`, else `~/.cache/funcfuse`, in
//! `rules/`), so a file checked once costs nothing the next time. Rules marked `@real` are used only with
//! `fast_math`.

use std::path::{Path, PathBuf};

use super::check::{check_rules, name_seed, RuleReport};
use super::rules::{self, RuleDef};

/// Instances per rule, for `rules check` by default and for the check before use.
pub const SAMPLES: usize = 400;

/// Changes whenever the checker's draws or comparisons change, so that cached verdicts of older checkers are not
/// trusted.
const CHECKER_VERSION: &str = "rule-checker 3";

/// The rules to plan with: the shipped ones (with `shipped_too`) and those of `paths`, each user file checked (or
/// its cached verdict found) first unless `unchecked`; `@real` rules left out unless `fast_math`. Notes on what was
/// checked go to `note`.
pub fn usable(
    paths: &[PathBuf],
    shipped_too: bool,
    fast_math: bool,
    unchecked: bool,
    note: &mut dyn FnMut(String),
) -> Result<Vec<RuleDef>, String> {
    let defs = rules::load(paths, shipped_too).map_err(|d| d.to_string())?;
    if unchecked {
        for p in paths {
            note(format!("{}: rules used without the rule checker (--unchecked-rules)", p.display()));
        }
    } else {
        for p in paths {
            for f in rules::rule_files(p).map_err(|d| d.to_string())? {
                let shown = f.display().to_string();
                let mine: Vec<RuleDef> = defs.iter().filter(|d| d.file == shown).cloned().collect();
                check_file(&f, &mine, note)?;
            }
        }
    }
    Ok(defs.into_iter().filter(|d| fast_math || !d.real).collect())
}

/// The per-user cache directory for rule verdicts (`rules/` in the kernel cache's root), created private; one that
/// another user owns or others can write to is refused. None when it cannot be created (then every check runs,
/// uncached).
fn cache_dir(note: &mut dyn FnMut(String)) -> Result<Option<PathBuf>, String> {
    use crate::backend::cache::{private_dir, root, Unusable};
    let Ok(root) = root() else { return Ok(None) };
    let dir = root.join("rules");
    match private_dir(&root).and_then(|()| private_dir(&dir)) {
        Ok(()) => Ok(Some(dir)),
        Err(Unusable::Missing(m)) => {
            note(format!("{m}; rule verdicts are not cached"));
            Ok(None)
        }
        Err(Unusable::Unsafe(m)) => Err(m),
    }
}

/// Checks one user rule file (its rules as loaded), or finds its verdict in the cache.
fn check_file(file: &Path, defs: &[RuleDef], note: &mut dyn FnMut(String)) -> Result<(), String> {
    let text = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let stem = file.file_name().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    // The entry holds the key in full, so two contents whose hashes collide are never confused.
    let mut key = format!("{CHECKER_VERSION}\n{SAMPLES}\n{stem}\n").into_bytes();
    key.extend_from_slice(&text);
    let hash = format!("{:016x}{:016x}", name_seed_bytes(&key, 0), name_seed_bytes(&key, 1));
    let dir = cache_dir(note)?;
    let entry = dir.as_ref().map(|d| d.join(format!("{hash}.ok")));
    if entry.as_ref().is_some_and(|e| std::fs::read(e).is_ok_and(|k| k == key)) {
        note(format!("{}: {} rules passed the rule checker (verdict cached)", file.display(), defs.len()));
        return Ok(());
    }
    let reports = check_rules(defs, SAMPLES);
    let failed: Vec<&RuleReport> = reports.iter().filter(|r| r.failure.is_some()).collect();
    if !failed.is_empty() {
        let mut msg = format!(
            "{}: {} of its rules failed the rule checker; refusing to use them (--unchecked-rules uses them anyway)",
            file.display(),
            failed.len()
        );
        for r in failed {
            msg.push('\n');
            msg.push_str(&r.render());
        }
        return Err(msg);
    }
    note(format!("{}: {} rules passed the rule checker", file.display(), defs.len()));
    // A cache that cannot be written only costs the check next time.
    if let (Some(dir), Some(entry)) = (dir, entry) {
        let tmp = dir.join(format!("{hash}.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, &key).is_ok() {
            let _ = std::fs::rename(&tmp, &entry);
        }
    }
    Ok(())
}

/// A 64-bit hash of bytes (FNV-1a, salted), for cache file names.
fn name_seed_bytes(b: &[u8], salt: u8) -> u64 {
    let mut h = name_seed(if salt == 0 { "a" } else { "b" });
    for &x in b {
        h = (h ^ x as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}
