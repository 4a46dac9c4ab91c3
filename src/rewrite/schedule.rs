//! The rule scheduler: egg's backoff scheduler (rules that match too often are banned for a while), applying each
//! rule's matches one at a time so that the node limit and the deadline hold between rule applications, not only
//! between iterations (egg checks its limits after a rule has applied all of its matches, which let one
//! term-growing rule take a 50,000-node e-graph past 120,000).
//!
//! The e-graph exceeds the node limit by at most one rule application: the nodes of one instantiated right-hand
//! side ([`MAX_OVERSHOOT`] bounds it for the rules shipped and any rule of a sensible size).

use egg::{BackoffScheduler, EGraph, Id, Rewrite, RewriteScheduler, SearchMatches};

use super::analysis::TermAnalysis;
use crate::ir::Node;

/// A bound on how far one rule application can take the e-graph past the node limit (its right-hand side's nodes).
pub const MAX_OVERSHOOT: usize = 64;

/// Backoff scheduling with a node limit and the thread's deadline checked before every single application.
pub struct Capped {
    inner: BackoffScheduler,
    nodes: usize,
}

impl Capped {
    pub fn new(nodes: usize) -> Self {
        Capped { inner: BackoffScheduler::default(), nodes }
    }
}

impl RewriteScheduler<Node, TermAnalysis> for Capped {
    fn can_stop(&mut self, iteration: usize) -> bool {
        RewriteScheduler::<Node, TermAnalysis>::can_stop(&mut self.inner, iteration)
    }

    fn search_rewrite<'a>(
        &mut self,
        iteration: usize,
        egraph: &EGraph<Node, TermAnalysis>,
        rewrite: &'a Rewrite<Node, TermAnalysis>,
    ) -> Vec<SearchMatches<'a, Node>> {
        self.inner.search_rewrite(iteration, egraph, rewrite)
    }

    fn apply_rewrite(
        &mut self,
        _iteration: usize,
        egraph: &mut EGraph<Node, TermAnalysis>,
        rewrite: &Rewrite<Node, TermAnalysis>,
        matches: Vec<SearchMatches<Node>>,
    ) -> usize {
        let mut applied = 0;
        for m in &matches {
            for subst in &m.substs {
                // Past the limit (or the deadline) the runner stops after this rule: apply nothing more.
                if egraph.total_size() > self.nodes || crate::limits::expired() {
                    return applied;
                }
                let one: SearchMatches<Node> =
                    SearchMatches { eclass: m.eclass, substs: vec![subst.clone()], ast: m.ast.clone() };
                let changed: Vec<Id> = rewrite.apply(egraph, std::slice::from_ref(&one));
                applied += changed.len();
            }
        }
        applied
    }
}
