//! The trusted-writer source (`trustedWriters:`): the identities whose status writes define a
//! governed object's status, validated once, at load.

use std::fmt;

use crate::names;

/// Most identities one policy trusts: a handful of controllers, never a directory of users.
pub(crate) const MAX_TRUSTED_WRITERS: usize = 16;

/// Longest identity, in bytes: a ServiceAccount's username is at most
/// `system:serviceaccount:` + a 63-byte namespace + `:` + a 253-byte name.
pub(crate) const MAX_IDENTITY: usize = "system:serviceaccount:".len() + 63 + 1 + 253;

const SERVICE_ACCOUNT: &str = "system:serviceaccount:";

/// The identities a policy trusts, as `request.userInfo.username` names them: sorted, each once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedWriters(Vec<String>);

/// Why `trustedWriters` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustedError {
    #[error("must list at least one identity (a username, or system:serviceaccount:NAMESPACE:NAME)")]
    Empty,
    #[error("lists {0} identities, more than the {MAX_TRUSTED_WRITERS} a policy may trust")]
    TooMany(usize),
    #[error("item {0}: an identity must not be empty")]
    EmptyIdentity(usize),
    #[error(
        "item {index}: {shown:?} is {len} bytes, over the {MAX_IDENTITY} bytes of the longest ServiceAccount username"
    )]
    TooLong { index: usize, shown: String, len: usize },
    #[error(
        "item {index}: {shown:?} holds a control character or surrounding spaces, which no authenticator names a user with"
    )]
    Unprintable { index: usize, shown: String },
    #[error(
        "item {index}: {shown:?} must be system:serviceaccount:NAMESPACE:NAME with NAMESPACE a DNS-1123 label and NAME a DNS-1123 subdomain (as the API server names ServiceAccounts)"
    )]
    ServiceAccount { index: usize, shown: String },
    #[error(
        "item {index}: {shown:?} is a group (system:serviceaccounts:...), not a user; trustedWriters names users: system:serviceaccount:NAMESPACE:NAME"
    )]
    Group { index: usize, shown: String },
}

impl TrustedWriters {
    /// Validates the identities as written: the list bounded, each identity checked, duplicates
    /// collapsed (two spellings of one identity cannot exist: usernames are compared as bytes).
    pub fn new(identities: Vec<String>) -> Result<Self, TrustedError> {
        if identities.is_empty() {
            return Err(TrustedError::Empty);
        }
        if identities.len() > MAX_TRUSTED_WRITERS {
            return Err(TrustedError::TooMany(identities.len()));
        }
        for (index, identity) in identities.iter().enumerate() {
            check(index, identity)?;
        }
        let mut identities = identities;
        identities.sort();
        identities.dedup();
        Ok(TrustedWriters(identities))
    }

    /// Whether `username` (a review's `request.userInfo.username`) is one of them.
    pub fn contains(&self, username: &str) -> bool {
        self.0.binary_search_by(|identity| identity.as_str().cmp(username)).is_ok()
    }

    /// The identities, sorted.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// One identity's checks; `index` names it in the error.
fn check(index: usize, identity: &str) -> Result<(), TrustedError> {
    let shown = || names::truncate(identity, 80, usize::MAX);
    if identity.is_empty() {
        return Err(TrustedError::EmptyIdentity(index));
    }
    if identity.len() > MAX_IDENTITY {
        return Err(TrustedError::TooLong { index, shown: shown(), len: identity.len() });
    }
    if identity.chars().any(char::is_control) || identity.trim() != identity {
        return Err(TrustedError::Unprintable { index, shown: shown() });
    }
    if identity.starts_with("system:serviceaccounts:") || identity == "system:serviceaccounts" {
        return Err(TrustedError::Group { index, shown: shown() });
    }
    if let Some(rest) = identity.strip_prefix(SERVICE_ACCOUNT) {
        let well_formed = rest
            .split_once(':')
            .is_some_and(|(namespace, name)| names::is_dns1123_label(namespace) && names::is_dns1123_subdomain(name));
        if !well_formed {
            return Err(TrustedError::ServiceAccount { index, shown: shown() });
        }
    }
    Ok(())
}

impl fmt::Display for TrustedWriters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "trusted writers [{}]", self.0.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writers(items: &[&str]) -> Result<TrustedWriters, TrustedError> {
        TrustedWriters::new(items.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn identities_are_sorted_collapsed_and_matched_exactly() {
        let w = writers(&["system:serviceaccount:traefik:traefik", "admin", "system:serviceaccount:traefik:traefik"])
            .unwrap();
        assert_eq!(w.iter().collect::<Vec<_>>(), ["admin", "system:serviceaccount:traefik:traefik"]);
        assert!(w.contains("admin"));
        assert!(w.contains("system:serviceaccount:traefik:traefik"));
        for other in ["", "Admin", "admin ", "system:serviceaccount:traefik:traefik2", "system:serviceaccount:traefik"]
        {
            assert!(!w.contains(other), "{other:?}");
        }
        assert_eq!(w.to_string(), "trusted writers [admin, system:serviceaccount:traefik:traefik]");
    }

    #[test]
    fn every_bound_is_named() {
        assert_eq!(writers(&[]), Err(TrustedError::Empty));
        let many: Vec<String> = (0..=MAX_TRUSTED_WRITERS).map(|i| format!("user-{i}")).collect();
        assert_eq!(TrustedWriters::new(many), Err(TrustedError::TooMany(17)));
        let at: Vec<String> = (0..MAX_TRUSTED_WRITERS).map(|i| format!("user-{i}")).collect();
        assert!(TrustedWriters::new(at).is_ok());
        assert_eq!(writers(&["a", ""]), Err(TrustedError::EmptyIdentity(1)));
        let longest = format!("system:serviceaccount:{}:{}", "n".repeat(63), "a".repeat(253));
        assert_eq!(longest.len(), MAX_IDENTITY);
        assert!(writers(&[&longest]).is_ok(), "the longest ServiceAccount");
        let over = "u".repeat(MAX_IDENTITY + 1);
        assert!(matches!(writers(&[&over]), Err(TrustedError::TooLong { index: 0, len: 340, .. })));
        for bad in ["a\nb", " admin", "admin\t", "\u{7f}"] {
            assert!(matches!(writers(&[bad]), Err(TrustedError::Unprintable { .. })), "{bad:?}");
        }
    }

    #[test]
    fn a_service_account_must_be_well_formed_and_a_group_is_not_a_user() {
        for bad in [
            "system:serviceaccount:",
            "system:serviceaccount:traefik",
            "system:serviceaccount:traefik:",
            "system:serviceaccount::traefik",
            "system:serviceaccount:Traefik:traefik",
            "system:serviceaccount:traefik:Traefik",
            "system:serviceaccount:a.b:traefik",
            "system:serviceaccount:traefik:a:b",
        ] {
            let error = writers(&[bad]).unwrap_err();
            assert!(matches!(error, TrustedError::ServiceAccount { .. }), "{bad}: {error}");
        }
        // A ServiceAccount's name is a DNS-1123 subdomain, as the API server validates it.
        assert!(writers(&["system:serviceaccount:lb:metallb.controller"]).is_ok());
        let error = writers(&["system:serviceaccounts:traefik"]).unwrap_err();
        assert!(error.to_string().contains("is a group"), "{error}");
    }
}
