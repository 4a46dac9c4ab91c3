//! The differential fuzzer in CI: a fixed budget of random programs through every engine and backend, each held to
//! the reference interpreter. No engine may give a wrong result (different outputs, or a result where the reference
//! raised) or panic. Refusals (a located error where the reference ran) are listed and counted, and must stay under a
//! ceiling that only goes down. `FUNCFUSE_FUZZ_COUNT` and `FUNCFUSE_FUZZ_SEED` change the budget and the first seed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use funcfuse::fuzz::{self, Engine, Kind, Summary, Verdict};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Checks seeds `first..first + count` on every engine, on all cores, in batches whose C kernels compile as one
/// library per backend (`fuzz::check_seeds`); verdicts in seed order.
fn check_all(first: u64, count: u64) -> Vec<(u64, String, Verdict)> {
    let seeds: Vec<u64> = (first..first + count).collect();
    let chunks: Vec<&[u64]> = seeds.chunks(fuzz::SEEDS_PER_BATCH).collect();
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<(u64, String, Verdict)>>> = Mutex::new(vec![None; seeds.len()]);
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                let rules = fuzz::shipped_rewrites().expect("the shipped rules load");
                loop {
                    let c = next.fetch_add(1, Ordering::SeqCst);
                    let Some(chunk) = chunks.get(c) else { break };
                    for (j, (src, v)) in fuzz::check_seeds(chunk, &Engine::ALL, &rules).into_iter().enumerate() {
                        let i = c * fuzz::SEEDS_PER_BATCH + j;
                        out.lock().unwrap()[i] = Some((seeds[i], src, v));
                    }
                }
            });
        }
    });
    out.into_inner().unwrap().into_iter().map(|x| x.expect("every seed checked")).collect()
}

#[test]
fn random_programs_agree_with_the_reference_on_every_engine() {
    let first = env_u64("FUNCFUSE_FUZZ_SEED", 0);
    let count = env_u64("FUNCFUSE_FUZZ_COUNT", 300);
    let results = check_all(first, count);
    let mut summary = Summary::default();
    let mut failures = Vec::new();
    let mut refusals = Vec::new();
    for (seed, src, v) in &results {
        summary.add(v);
        for d in &v.divergences {
            let line = format!("seed {seed}: {} {}: {}", d.engine.name(), d.kind.name(), d.detail);
            if d.kind == Kind::Refused {
                refusals.push(line);
            } else {
                failures.push(format!("{line}\n{src}"));
            }
        }
    }
    println!("fuzz: {summary}");
    for r in &refusals {
        println!("  {r}");
    }
    assert!(failures.is_empty(), "{} silently wrong results or panics:\n{}", failures.len(), failures.join("\n"));
    // The programs every engine refused or ran must be most of them; refusals are what remains to support.
    assert!(
        summary.refused * 100 <= summary.programs * REFUSED_PERCENT_CEILING,
        "{} of {} programs refused by some engine (ceiling {REFUSED_PERCENT_CEILING}%)",
        summary.refused,
        summary.programs
    );
    assert!(summary.agree * 2 >= summary.programs, "fewer than half the programs ran everywhere: {summary}");
}

/// The share of random programs some engine may still refuse (a located error where the reference ran).
const REFUSED_PERCENT_CEILING: usize = 10;

#[test]
fn the_generator_is_deterministic_and_its_programs_parse() {
    for seed in 0..200 {
        let a = fuzz::gen::generate(seed);
        assert_eq!(a, fuzz::gen::generate(seed));
        let name = fuzz::program_name(seed);
        let m = funcfuse::frontend::parse_module(&format!("{name}.py"), &a)
            .unwrap_or_else(|d| panic!("seed {seed} does not parse: {d}\n{a}"));
        assert!(m.function(&name).is_some());
    }
}

#[test]
fn an_unsound_rule_is_caught_and_the_program_reduced() {
    // With an unsound rule (`tanh(x) = x`), the optimized engine must be reported wrong, and the reducer must keep
    // the statement that needs the rule while dropping the rest.
    let src = "from __future__ import annotations\n\nimport torch\n\n\ndef p(a: f32[4], b: f32[4]):\n    c = a * 2.0\n    b.add_(1.0)\n    d = torch.tanh(a)\n    e = c - 1.0\n    return d, e\n";
    let mut defs = funcfuse::rewrite::rules::parse_rules(
        "planted.rules",
        "# tanh(x) = x (wrong: planted for this test)\nplanted/tanh-id: (tanh ?x) => ?x\n",
    )
    .unwrap();
    defs.extend(funcfuse::rewrite::rules::shipped().unwrap());
    let rules = funcfuse::rewrite::rules::to_rewrites(&defs).unwrap();
    let engines = [Engine::Reference, Engine::Functional, Engine::Optimized];
    let v = fuzz::check_source("p.py", src, "p", &engines, &rules);
    let sig = v.signature().expect("a divergence");
    assert_eq!((sig.engine, sig.kind), (Engine::Optimized, Kind::Wrong), "{v:?}");
    assert!(v.divergences.iter().all(|d| d.engine == Engine::Optimized), "{v:?}");
    let (reduced, rv) = fuzz::reduce::reduce(src, "p", sig, &engines, &rules);
    assert!(rv.is_some());
    assert!(reduced.contains("d = torch.tanh(a)"), "{reduced}");
    for gone in ["c = a * 2.0", "b.add_(1.0)", "e = c - 1.0"] {
        assert!(!reduced.contains(gone), "`{gone}` should have been deleted:\n{reduced}");
    }
    assert!(reduced.contains("return d\n"), "{reduced}");
}

/// Seeds whose programs once diverged (a view chosen by `if`s in turn, an overlap refused in an arm that does not run,
/// an empty view beside a rebound name, an overlap for one chosen view only, a sum over an empty view that crashed the
/// C kernels, index checks dropped with writes into empty views, kernels launched before the in-place write they
/// needed, views chosen on the counter of a `while` loop that breaks on data, the indices of a sort of near-ties, a
/// partial write into an expanded view of a name an `if` on data chose, a dict changed beside an arm that raises, an
/// in-place sum into a buffer computed once for every iteration) agree on every engine now, or are
/// rejected by every engine as the reference rejects them.
#[test]
fn seeds_that_once_diverged_agree_now() {
    let rules = fuzz::shipped_rewrites().expect("the shipped rules load");
    let seeds = [
        100645, 101816, 102541, 142187, 145179, 146116, 162609, 165647, 167082, 168522, 171808, 175197, 178147, 185586,
        192565, 198693, 214204, 215892, 300584, 310478, 323810, 328871,
    ];
    for (seed, (src, v)) in seeds.iter().zip(fuzz::check_seeds(&seeds, &Engine::ALL, &rules)) {
        assert!(v.divergences.is_empty(), "seed {seed} diverges: {:?}\n{src}", v.divergences);
    }
}
