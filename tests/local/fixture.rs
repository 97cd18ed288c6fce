//! The AdmissionReview the local tests send (an Ingress status update as kube-apiserver 1.24 sent
//! it), verbatim, and a builder for edited copies of it.

use serde_json::{Value, json};

/// The fixture's bytes, for tests that send exactly what the API server sent.
pub(crate) const FIXTURE: &str = include_str!("../fixtures/ingress-status-update.apiserver-1.24.json");
/// The fixture's `request.uid`, which every answer must echo.
pub(crate) const UID: &str = "0f3cb218-7947-4a5f-839c-6e300a5ae86a";

/// The fixture as a JSON value, edited field by field. Edits index the value the way
/// `value["a"]["b"] = x` does, so a missing object member is created.
#[derive(Clone)]
pub(crate) struct Review(Value);

impl Review {
    pub(crate) fn fixture() -> Review {
        Review(serde_json::from_str(FIXTURE).unwrap())
    }

    /// Sets the member at `path` (object keys from the root) to `value`.
    pub(crate) fn set(mut self, path: &[&str], value: Value) -> Review {
        let slot = path.iter().fold(&mut self.0, |at, key| &mut at[*key]);
        *slot = value;
        self
    }

    /// `request.userInfo.username`: who wrote the status.
    pub(crate) fn username(self, username: &str) -> Review {
        self.set(&["request", "userInfo", "username"], json!(username))
    }

    /// The reviewed Ingress, `request.object`, replaced whole.
    pub(crate) fn object(self, object: Value) -> Review {
        self.set(&["request", "object"], object)
    }

    /// The written status replaced by `{"loadBalancer": {"ingress": addresses}}`.
    pub(crate) fn addresses(self, addresses: Value) -> Review {
        self.set(&["request", "object", "status"], json!({"loadBalancer": {"ingress": addresses}}))
    }

    /// The reviewed Ingress, `request.object`.
    pub(crate) fn ingress(&self) -> &Value {
        &self.0["request"]["object"]
    }

    pub(crate) fn into_value(self) -> Value {
        self.0
    }

    /// The review as compact JSON text.
    pub(crate) fn to_json(&self) -> String {
        self.0.to_string()
    }

    /// The review as compact JSON bytes.
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        serde_json::to_vec(&self.0).unwrap()
    }
}
