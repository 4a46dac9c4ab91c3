//! Which rules a command uses, and the check every user rule passes before any command uses it.
//!
//! `optimize`, `compare`, `explain` and `run` check the rules of every `--rules` file with the rule checker before
//! planning anything, and refuse (exit 1, with the counterexample) when one is unsound or unchecked;
//! `--unchecked-rules` is the explicit way out. A file's verdict is cached by its content under the per-user cache
//! (`$FUNCFUSE_CACHE`, else `$XDG_CACHE_HOME/funcfuse`, else `~/.cache/funcfuse`, in `rules/`), so a file checked
//! once costs nothing the next time. Rules marked `@real` are used only with `--fast-math`.

use std::path::PathBuf;

use funcfuse::rewrite::check::check_rules;
use funcfuse::rewrite::rules::{self, RuleDef};

use crate::Failure;

/// Instances per rule, for `rules check` by default and for the check before use.
pub(crate) const SAMPLES: usize = funcfuse::rewrite::usable::SAMPLES;

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
        funcfuse::rewrite::usable::usable(
            &self.paths.dirs,
            !self.paths.only_rules,
            self.fast_math,
            self.unchecked_rules,
            &mut |m| eprintln!("{m}"),
        )
        .map_err(|m| Failure(1, m))
    }
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
    // A rule over an op class is checked once per member op (its lines above, `NAME[op]`).
    let mut families: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for d in &defs {
        let Some((family, class)) = &d.family else { continue };
        let op = d.name.rsplit_once('[').map_or("", |(_, o)| o.trim_end_matches(']'));
        match families.last_mut() {
            Some(f) if f.0 == family => f.2.push(op),
            _ => families.push((family, class, vec![op])),
        }
    }
    for (family, class, ops) in &families {
        outln!("class {family:<32} ?f:{class}: checked for each of its {} ops: {}", ops.len(), ops.join(", "));
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
