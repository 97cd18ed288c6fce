//! The fast reader's `oldObject`: the class fields a status write cannot change
//! ([`StoredIn`]), read whatever the request's kind (so wherever `oldObject` stands in the
//! request), everything else in it skipped a block at a time.

use super::Skim;
use crate::review::read::{StoredIn, StoredSpecIn, gateway as gw};

impl<'a> Skim<'a> {
    /// `oldObject` (or `null`) as [`StoredIn`] reads it, whatever the kind: its class fields,
    /// everything else skipped a block at a time. What the reader holds of it is two class
    /// names at most, so a review's memory stays bounded by its body.
    pub(super) fn stored(&mut self) -> Option<Option<StoredIn<'a>>> {
        let (mut spec, mut metadata) = (StoredSpecIn::default(), None);
        let found = self.object(&["spec", "metadata"], true, |s, f| {
            match f {
                // Strict, as `StoredIn` reads it: `null` is no object.
                1 => metadata = Some(s.metadata()??),
                0 => {
                    let (mut ingress_class_name, mut gateway_class_name) = (None, None);
                    s.object(&["ingressClassName", "gatewayClassName"], false, |s, f| {
                        match f {
                            0 => ingress_class_name = s.opt_owned()?,
                            1 => gateway_class_name = s.serde::<gw::ClassName>()?.0,
                            _ => s.skip(f)?,
                        }
                        Some(())
                    })??;
                    spec = StoredSpecIn { ingress_class_name, gateway_class_name };
                }
                _ => s.skip(f)?,
            }
            Some(())
        })?;
        Some(found.map(|()| StoredIn { metadata: metadata.unwrap_or_default(), spec }))
    }
}

#[cfg(test)]
mod tests;
