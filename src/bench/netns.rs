//! Opening an engine's sockets inside a named network namespace
//! (`--netns NS`, an engine config's `netns`).
//!
//! A network namespace belongs to a thread, and a socket keeps the
//! namespace it was created in. So an engine opens its sockets on a
//! short-lived thread that has joined the namespace (setns on that thread
//! only), and its workers, on any thread, use them there. One process can
//! thus drive a sink in one namespace and a flood in another. Nothing here
//! remounts /sys: engines read no per-namespace sysfs file.

pub use crate::base::netns::{enter_thread, within, THREAD_NET};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_namespace_runs_on_the_calling_thread() {
        let me = std::thread::current().id();
        let ran = within(None, || Ok(std::thread::current().id())).expect("run");
        assert_eq!(ran, me);
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let err = within(Some("nettune-no-such-ns"), || Ok(())).expect_err("missing");
        let text = format!("{err:#}");
        assert!(
            text.contains("'nettune-no-such-ns' does not exist"),
            "{text}"
        );
        assert!(within(Some("../x"), || Ok(())).is_err());
    }
}
