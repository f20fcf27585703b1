//! Benchmarks: load generators and servers. One file per engine; shared
//! pieces (pinning, statistics, reporting) once.
