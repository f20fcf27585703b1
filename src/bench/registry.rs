//! Every bench engine that serve, experiment and `--remote` drive by name,
//! in the order help and errors list them. A new engine implements
//! [`Engine`] in its module and is added here.

use crate::bench::engine::Engine;
use crate::bench::{http, rr, stream, udp};

pub static ENGINES: &[&dyn Engine] = &[
    &udp::entry::Udp,
    &rr::entry::Rr,
    &http::entry::Http,
    &stream::entry::Stream,
];

/// The engine whose server side is called `name` (`rr-server`).
pub fn by_server(name: &str) -> Option<&'static dyn Engine> {
    ENGINES.iter().copied().find(|e| e.server() == name)
}

/// The engine whose client is called `name` (`rr`).
pub fn by_client(name: &str) -> Option<&'static dyn Engine> {
    ENGINES.iter().copied().find(|e| e.client() == name)
}

/// The server sides' names, for an error.
pub fn servers() -> Vec<&'static str> {
    ENGINES.iter().map(|e| e.server()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_is_found_by_both_its_names_and_no_name_is_taken_twice() {
        for engine in ENGINES {
            let server = by_server(engine.server()).expect("by server");
            let client = by_client(engine.client()).expect("by client");
            assert_eq!(server.server(), engine.server());
            assert_eq!(client.client(), engine.client());
        }
        let mut names: Vec<&str> = ENGINES
            .iter()
            .flat_map(|e| [e.server(), e.client()])
            .collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all);
        assert!(by_server("iperf3").is_none());
    }
}
