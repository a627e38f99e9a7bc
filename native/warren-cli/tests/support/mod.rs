//! Helpers shared by the integration tests of `warren` (each test binary uses a part).
#![allow(dead_code)]

pub mod crash;
pub mod netns;
pub mod procs;
pub mod ps;
pub mod training;
