//! The `nettune` binary: parse arguments, run one command, map the outcome
//! to an exit status. All the work lives in the library.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = nettune::cli::parse();
    match nettune::cli::run(args) {
        Ok(status) => status.into(),
        Err(err) => nettune::error::report(&err),
    }
}
