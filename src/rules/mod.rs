//! Pure decisions about rule files: the lifecycle table, change classification with the
//! storage guardrail, cross-file ownership, and runtime layers. No IO; every function here is a
//! table that the workflow and the scan consult, and each is exhaustively unit-tested.

pub mod classify;
pub mod layers;
pub mod lifecycle;
pub mod ownership;
