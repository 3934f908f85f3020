//! The order in which a roll visits nodes (Exhibitor's `RollingHostNamesBuilder`): nodes that do
//! not run the rule yet first (they have nothing to lose), then the nodes that do, the main last
//! (it advances the roll, so it changes when every other node has proven the content). Within a
//! group, node ids in byte order, so every node computes the same list.

use std::collections::BTreeSet;

use crate::base::ids::NodeId;

/// The roll order of `members`. `runs_rule` says which nodes already run the file; `main` goes
/// last when it is a member. Duplicates are dropped.
pub fn order_nodes(members: &[NodeId], runs_rule: &BTreeSet<NodeId>, main: Option<&NodeId>) -> Vec<NodeId> {
    let unique: BTreeSet<&NodeId> = members.iter().collect();
    let is_main = |node: &NodeId| main == Some(node);
    let mut order: Vec<NodeId> =
        unique.iter().filter(|n| !is_main(n) && !runs_rule.contains(**n)).map(|n| (*n).clone()).collect();
    order.extend(unique.iter().filter(|n| !is_main(n) && runs_rule.contains(**n)).map(|n| (*n).clone()));
    if let Some(main) = main.filter(|m| unique.contains(m)) {
        order.push(main.clone());
    }
    order
}
