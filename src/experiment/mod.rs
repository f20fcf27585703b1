//! `nettune experiment`: prove which tuning wins, and find the best one by
//! measurement.

pub mod bench;
pub mod compare;
pub mod report;
pub mod results;
pub mod run;
pub mod sample;
pub mod search;
pub mod space;
pub mod stats;
pub mod tune;
