//! The AdmissionReview on the wire: read from the request body ([`read`](read()), by
//! serde_json), and answered ([`render`](render())) with the JSON patch of [`patch`]. What happens
//! in between is the decision's ([`crate::decision`]).

mod patch;
mod read;
mod render;

#[cfg(test)]
mod gateway_tests;
#[cfg(test)]
mod trusted_tests;

pub(crate) use read::bounds;
pub(crate) use read::{ApiVersion, Status, Target, User, on_status};
pub use read::{Review, read};
pub use render::render;
