//! Changes on disk taken without restart: the serving certificate and client CA
//! ([`certificates`]), and the policy file of `--config` (in [`crate::policy::store`]). Both
//! notice changes through [`fswatch`].

pub(crate) mod certificates;
pub(crate) mod fswatch;

pub use certificates::{CertFiles, Outcome, POLL_INTERVAL, Reloader, start};
