//! Pure decisions about rule files: the lifecycle table, change classification with the
//! storage guardrail, cross-file ownership, and runtime layers. No IO; every function here is a
//! table that the workflow and the scan consult, and each is exhaustively unit-tested. `compile`
//! binds a key's catalog to the pure compiler, below both the workflow and the scan.

pub mod classify;
pub mod compile;
pub mod layers;
pub mod lifecycle;
pub mod merge;
pub mod ownership;
pub mod staged;
