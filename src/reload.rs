//! Changes on disk taken without restart: the serving certificate and client CA
//! ([`certificates`]), and the policy file of `--config` ([`policy`]). Both notice changes
//! through [`fswatch`].

pub(crate) mod certificates;
pub(crate) mod fswatch;
pub(crate) mod policy;

pub use certificates::{CertFiles, Outcome, POLL_INTERVAL, Reloader, start, start_requiring};
