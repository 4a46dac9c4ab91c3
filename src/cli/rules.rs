//! Which rules a command uses, and the check every user rule passes before any command uses it.
//!
//! `optimize`, `compare`, `explain` and `run` check the rules of every `--rules` file with the rule checker before
//! planning anything, and refuse (exit 1, with the counterexample) when one is unsound or unchecked;
//! `--unchecked-rules` is the explicit way out. A file's verdict is cached by its content under the per-user cache
//! (`$FUNCFUSE_CACHE`, else `$XDG_CACHE_HOME/funcfuse`, else `~/.cache/funcfuse`, in `rules/`), so a file checked
//! once costs nothing the next time. Rules marked `@real` are used only with `--fast-math`.

use std::path::{Path, PathBuf};

use funcfuse::rewrite::check::{check_rules, name_seed, RuleReport};
use funcfuse::rewrite::rules::{self, RuleDef};

use crate::Failure;

/// Instances per rule, for `rules check` by default and for the check before use.
pub(crate) const SAMPLES: usize = 400;

/// Changes whenever the checker's draws or comparisons change, so that cached verdicts of older checkers are not
/// trusted.
const CHECKER_VERSION: &str = "rule-checker 3";

/// Which rules to read.
#[derive(clap::Args)]
pub(crate) struct RuleArgs {
    /// A *.rules file, or a directory of them, used in addition to the shipped rules (repeatable).
    #[arg(long = "rules", value_name = "PATH")]
    pub dirs: Vec<PathBuf>,
    /// Use only the --rules files, not the shipped rules.
    #[arg(long)]
    pub only_rules: bool,
}

impl RuleArgs {
    /// Every rule, unchecked (for `rules check` and `rules list`).
    pub(crate) fn load(&self) -> Result<Vec<RuleDef>, Failure> {
        Ok(rules::load(&self.dirs, !self.only_rules)?)
    }
}

/// Which rules a command that plans uses.
#[derive(clap::Args)]
pub(crate) struct UseRules {
    #[command(flatten)]
    pub paths: RuleArgs,
    /// Also use rules marked `@real`, which hold in real arithmetic but may change floating-point results
    /// (reassociation, cancellation), like -ffast-math.
    #[arg(long)]
    pub fast_math: bool,
    /// Use the --rules files without checking them first (by default an unsound or unchecked rule is refused).
    #[arg(long)]
    pub unchecked_rules: bool,
}

impl UseRules {
    /// The rules to plan with: user rules checked (or their cached verdict found) first; `@real` rules left out
    /// unless `--fast-math`.
    pub(crate) fn usable(&self) -> Result<Vec<RuleDef>, Failure> {
        let defs = self.paths.load()?;
        if self.unchecked_rules {
            for p in &self.paths.dirs {
                eprintln!("{}: rules used without the rule checker (--unchecked-rules)", p.display());
            }
        } else {
            for p in &self.paths.dirs {
                for f in rules::rule_files(p)? {
                    let shown = f.display().to_string();
                    let mine: Vec<RuleDef> = defs.iter().filter(|d| d.file == shown).cloned().collect();
                    check_file(&f, &mine)?;
                }
            }
        }
        Ok(defs.into_iter().filter(|d| self.fast_math || !d.real).collect())
    }
}

/// The per-user cache directory for rule verdicts (`rules/` in the kernel cache's root), created private; one that
/// another user owns or others can write to is refused. None when it cannot be created (then every check runs,
/// uncached).
fn cache_dir() -> Result<Option<PathBuf>, Failure> {
    use funcfuse::backend::cache::{private_dir, root, Unusable};
    let Ok(root) = root() else { return Ok(None) };
    let dir = root.join("rules");
    match private_dir(&root).and_then(|()| private_dir(&dir)) {
        Ok(()) => Ok(Some(dir)),
        Err(Unusable::Missing(m)) => {
            eprintln!("{m}; rule verdicts are not cached");
            Ok(None)
        }
        Err(Unusable::Unsafe(m)) => Err(Failure(1, m)),
    }
}

/// Checks one user rule file (its rules as loaded), or finds its verdict in the cache.
fn check_file(file: &Path, defs: &[RuleDef]) -> Result<(), Failure> {
    let text = std::fs::read(file).map_err(|e| Failure(1, format!("{}: {e}", file.display())))?;
    let stem = file.file_name().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    // The entry holds the key in full, so two contents whose hashes collide are never confused.
    let mut key = format!("{CHECKER_VERSION}\n{SAMPLES}\n{stem}\n").into_bytes();
    key.extend_from_slice(&text);
    let hash = format!("{:016x}{:016x}", name_seed_bytes(&key, 0), name_seed_bytes(&key, 1));
    let dir = cache_dir()?;
    let entry = dir.as_ref().map(|d| d.join(format!("{hash}.ok")));
    if entry.as_ref().is_some_and(|e| std::fs::read(e).is_ok_and(|k| k == key)) {
        eprintln!("{}: {} rules passed the rule checker (verdict cached)", file.display(), defs.len());
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
        return Err(Failure(1, msg));
    }
    eprintln!("{}: {} rules passed the rule checker", file.display(), defs.len());
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

pub(crate) fn rules_check(rules: &RuleArgs, samples: usize) -> Result<(), Failure> {
    let defs = rules.load()?;
    let reports = check_rules(&defs, samples);
    let mut failed = 0;
    let (mut proved, mut real) = (0, 0);
    for r in &reports {
        failed += r.failure.is_some() as usize;
        proved += (r.failure.is_none() && r.proved.is_some()) as usize;
        real += r.real as usize;
        outln!("{}", r.render());
    }
    for (name, what) in funcfuse::rewrite::saturate::RUST_REWRITES {
        outln!("rust  {name:<32} {what} (checked by the corpus tests against the reference engine)");
    }
    outln!(
        "{} rules checked, {failed} failed; {proved} proved on every small instance, the others sampled; {real} marked @real (used only with --fast-math)",
        reports.len()
    );
    if failed > 0 {
        return Err(Failure(1, format!("{failed} unsound or unchecked rules")));
    }
    Ok(())
}

pub(crate) fn rules_list(rules: &RuleArgs) -> Result<(), Failure> {
    for r in rules.load()? {
        let arrow = if r.both_ways { "<=>" } else { "=>" };
        let real = if r.real { "  @real" } else { "" };
        outln!("{:<32} {}:{}  {} {arrow} {}{real}", r.name, r.file, r.line, r.lhs, r.rhs);
    }
    for (name, what) in funcfuse::rewrite::saturate::RUST_REWRITES {
        outln!("{name:<32} (Rust rewrite) {what}");
    }
    Ok(())
}
