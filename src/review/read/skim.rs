//! The fast reader: one validating pass over a compact AdmissionReview that decodes only what
//! the decision needs and steps over everything else (`oldObject` but for its class fields,
//! `managedFields`, the escaped last-applied annotation) a block at a time, never decoding it:
//! vector compares (SSE2 on x86-64, NEON on aarch64, through the safe `wide` crate) classify 64
//! bytes at once, bit arithmetic finds the escaped bytes and the inside of strings, and the
//! walker visits only the tokens, as simdjson does.
//!
//! It reads a subset of what the serde_json reader in [`super`] reads, into the same values:
//! wherever serde_json would fail, or where matching it exactly would take more code than the
//! case is worth (escaped keys, duplicate fields, control characters or whitespace other than
//! spaces inside the document, nesting deeper than [`MAX_DEPTH`], values of an unexpected type),
//! it answers `None` and the caller reads the body again with serde_json, which words the error.
//! So its one rule: never accept what serde_json rejects, and never read a value differently.
//! The property test below holds it to that.
//!
//! What serde_json accepts in a value it skips (`IgnoredAny`): any bytes in strings except `"`,
//! `\` and control characters (no UTF-8 check), escapes `\" \\ \/ \b \f \n \r \t \uXXXX` (any
//! hex value), numbers by the JSON grammar, the three literals, and no trailing commas. Keys and
//! strings of the fields it decodes must be UTF-8, and `\u` escapes there must pair surrogates.

use std::borrow::Cow;

use serde::Deserialize;
mod blocks;
mod gateway;
mod stored;

use blocks::{
    Classes, block, check_escapes, eq, escaped, lanes, prefix_xor, quote_or_backslash, quotes_and_backslashes, scan,
};

use super::{
    GroupVersionKind, MetaIn, RequestIn, ReviewIn, User,
    gateway::{self as gw, GatewayIn},
    ingress::{IngressIn, SpecIn, StatusIn},
};
use gateway::is_gateway;

/// Deeper nesting anywhere in the document goes to serde_json (which skips any depth).
const MAX_DEPTH: u32 = 64;

/// What the fast reader read as one kind or the other: the one spelling of "Ingress or
/// Gateway" in it, for an object, a request with its object, and a review alike. An object is
/// read as a Gateway when the request is a Gateway status UPDATE ([`gw::is_gateway_status`]),
/// else as an Ingress; serde_json reads the same review with the same object type
/// ([`super::read_slow`]).
pub(super) enum OfKind<I, G> {
    Ingress(I),
    Gateway(G),
}

/// A review as the fast reader read it.
pub(super) type Skimmed<'a> = OfKind<ReviewIn<'a, IngressIn<'a>>, ReviewIn<'a, GatewayIn<'a>>>;
/// A request's object, read as what the request says it is.
type Object<'a> = OfKind<IngressIn<'a>, GatewayIn<'a>>;
/// A request with its object.
type Request<'a> = OfKind<RequestIn<'a, IngressIn<'a>>, RequestIn<'a, GatewayIn<'a>>>;

/// Reads `body` if it is a review this reader is sure about; `None` means "ask serde_json".
pub(super) fn review(body: &[u8]) -> Option<Skimmed<'_>> {
    let body = trim(body);
    // Control characters are an error inside strings and whitespace elsewhere; a document
    // without any needs no check for them while skipping strings (and only spaces between
    // tokens). Compact JSON, which the API server sends, has none.
    let bytes = scan(body);
    if bytes.control {
        return None;
    }
    let mut s = Skim { b: body, i: 0, ascii: bytes.ascii };
    let review = s.review()?;
    (s.i == body.len()).then_some(review)
}

/// Without the whitespace serde_json allows before and after the value.
fn trim(body: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b' ' | b'\n' | b'\r' | b'\t');
    let start = body.iter().position(|b| !ws(b)).unwrap_or(body.len());
    let end = body.iter().rposition(|b| !ws(b)).map_or(start, |e| e + 1);
    &body[start..end]
}

struct Skim<'a> {
    b: &'a [u8],
    i: usize,
    /// The whole body is ASCII (see [`scan`]).
    ascii: bool,
}

/// The members of `request` the walker reads, by index.
const REQUEST_FIELDS: [&str; 10] =
    ["uid", "kind", "subResource", "operation", "name", "namespace", "userInfo", "object", "dryRun", "oldObject"];

/// Which member of an object the walker reads; `Skip` for the rest.
type Field = u8;
const SKIP: Field = u8::MAX;

impl<'a> Skim<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn spaces(&mut self) {
        while self.b.get(self.i) == Some(&b' ') {
            self.i += 1;
        }
    }

    /// The next byte after spaces, consumed.
    fn token(&mut self) -> Option<u8> {
        self.spaces();
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        (self.token()? == c).then_some(())
    }

    /// Walks an object, calling `member` with the index (in `names`) of each key it knows, after
    /// the colon; other members are skipped. A known key seen twice is left to serde_json (its
    /// derived structs reject duplicate fields). `None` for `null` when `nullable`.
    fn object(
        &mut self,
        names: &[&str],
        nullable: bool,
        mut member: impl FnMut(&mut Self, Field) -> Option<()>,
    ) -> Option<Option<()>> {
        match self.token()? {
            b'{' => {}
            b'n' if nullable => return self.rest_of(b"ull").map(|()| None),
            _ => return None,
        }
        let mut seen = 0u32;
        self.spaces();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(Some(()));
        }
        loop {
            self.expect(b'"')?;
            let key = self.plain_str()?;
            self.expect(b':')?;
            match names.iter().position(|n| n.as_bytes() == key) {
                Some(f) => {
                    if seen & (1 << f) != 0 {
                        return None;
                    }
                    seen |= 1 << f;
                    member(self, f as Field)?;
                }
                None => {
                    // serde_json decodes every key of a struct: it must be UTF-8.
                    if !self.ascii {
                        std::str::from_utf8(key).ok()?;
                    }
                    member(self, SKIP)?;
                }
            }
            match self.token()? {
                b',' => {}
                b'}' => return Some(Some(())),
                _ => return None,
            }
        }
    }

    /// The rest of a string without escapes (the opening quote consumed), as raw bytes.
    fn plain_str(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        let end = quote_or_backslash(self.b, start)?;
        if self.b[end] != b'"' {
            return None;
        }
        self.i = end + 1;
        Some(&self.b[start..end])
    }

    /// A string value, decoded as serde_json decodes it.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.i;
        if let Some(plain) = self.plain_str() {
            return std::str::from_utf8(plain).ok().map(Cow::Borrowed);
        }
        self.i = start;
        self.skip_str()?;
        serde_json::from_slice::<String>(&self.b[start - 1..self.i]).ok().map(Cow::Owned)
    }

    /// A string or `null`.
    fn opt_string(&mut self) -> Option<Option<Cow<'a, str>>> {
        self.spaces();
        if self.peek()? == b'n' {
            self.i += 1;
            return self.rest_of(b"ull").map(|()| None);
        }
        self.string().map(Some)
    }

    fn opt_owned(&mut self) -> Option<Option<String>> {
        Some(self.opt_string()?.map(Cow::into_owned))
    }

    /// A small value read by serde_json itself, from its bytes (validated by the skipper first,
    /// so serde_json sees exactly what it would have seen in place).
    fn serde<T: Deserialize<'a>>(&mut self) -> Option<T> {
        self.spaces();
        let start = self.i;
        self.skip_value()?;
        // Strict like the serde_json path: a struct is never read from an array.
        crate::strict::from_str(std::str::from_utf8(&self.b[start..self.i]).ok()?).ok()
    }

    fn rest_of(&mut self, tail: &[u8]) -> Option<()> {
        let end = self.i + tail.len();
        (self.b.get(self.i..end)? == tail).then(|| self.i = end)
    }

    /// Skips the rest of a string (opening quote consumed), checking its escapes. Every quote
    /// and backslash of a block is taken from its masks, so a string with an escape every few
    /// bytes (the last-applied annotation) costs a few instructions per escape, not a search.
    #[inline(always)]
    fn skip_str(&mut self) -> Option<()> {
        // Most strings (keys, names) end in their first block without an escape: inlined,
        // the rest is a call.
        if let Some(block) = self.b.get(self.i..self.i + 16) {
            let (quotes, backslashes) = quotes_and_backslashes(block.try_into().expect("16 bytes"));
            let stops = quotes | backslashes;
            if quotes & stops & stops.wrapping_neg() != 0 {
                self.i += stops.trailing_zeros() as usize + 1;
                return Some(());
            }
        }
        self.skip_long_str()
    }

    /// [`Self::skip_str`] beyond its first block, or with escapes, 64 bytes at a time: which
    /// bytes are escaped comes from the block's backslashes by bit arithmetic, so an escape
    /// costs no branch of its own.
    fn skip_long_str(&mut self) -> Option<()> {
        let b = self.b;
        let mut at = self.i;
        let mut carry = 0;
        loop {
            let block = block::<64>(b, at)?;
            let (quotes, backslashes) = lanes(&block, |v| (eq(v, b'"'), eq(v, b'\\')));
            let escaped = escaped(backslashes, &mut carry);
            let ends = quotes & !escaped;
            // The escaped bytes of this block inside the string.
            let escapes = escaped & if ends == 0 { u64::MAX } else { (ends & ends.wrapping_neg()) - 1 };
            if escapes != 0 {
                check_escapes(b, at, &block, escapes)?;
            }
            if ends != 0 {
                self.i = at + ends.trailing_zeros() as usize + 1;
                return Some(());
            }
            at += 64;
        }
    }

    fn skip_number(&mut self) -> Option<()> {
        let digits = |s: &mut Self| {
            let start = s.i;
            while s.peek().is_some_and(|c| c.is_ascii_digit()) {
                s.i += 1;
            }
            s.i > start
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                digits(self);
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !digits(self) {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !digits(self) {
                return None;
            }
        }
        Some(())
    }

    /// Skips one value of any kind, checking it as serde_json's `IgnoredAny` does.
    fn skip_value(&mut self) -> Option<()> {
        self.spaces();
        match self.peek()? {
            b'"' => {
                self.i += 1;
                self.skip_str()
            }
            b'{' | b'[' => self.skip_container(),
            _ => self.scalar(),
        }
    }

    /// A number or a literal, from its first byte.
    fn scalar(&mut self) -> Option<()> {
        let tail: &[u8] = match self.peek()? {
            b't' => b"rue",
            b'f' => b"alse",
            b'n' => b"ull",
            b'-' | b'0'..=b'9' => return self.skip_number(),
            _ => return None,
        };
        self.i += 1;
        self.rest_of(tail)
    }

    /// Skips an object or array (`self.i` at its opening bracket) as serde_json's `IgnoredAny`
    /// reads it, 64 bytes at a time, the way simdjson does: vector compares classify the bytes
    /// of a block (quotes, backslashes, brackets, colons and commas, spaces), bit arithmetic
    /// finds the escaped bytes and, from the unescaped quotes, which bytes are inside strings;
    /// then only the tokens (brackets, colons, commas, opening quotes, first bytes of numbers and
    /// literals) are visited, each checked against what may come next. Strings cost nothing per
    /// byte, escapes only a check of the escaped bytes, and no recursion: one bit per level says
    /// object or array, and nesting deeper than [`MAX_DEPTH`] goes to serde_json.
    fn skip_container(&mut self) -> Option<()> {
        /// What may come next.
        #[derive(Clone, Copy, PartialEq, Eq)]
        enum Want {
            Value,
            /// A value or `]`, after `[`.
            FirstValue,
            /// A key or `}`, after `{`.
            FirstKey,
            Key,
            Colon,
            /// A comma or the closing bracket, after a value.
            After,
        }
        let b = self.b;
        let mut at = self.i;
        let mut want = Want::Value;
        let (mut objects, mut depth) = (0u64, 0u32);
        // From one block to the next: the first byte is escaped; inside a string (all ones);
        // the last byte was part of a number or literal.
        let (mut escape_carry, mut string_carry, mut scalar_carry) = (0u64, 0u64, 0u64);
        loop {
            let block = block::<64>(b, at)?;
            let class = Classes::of(&block);
            let escaped = escaped(class.backslashes, &mut escape_carry);
            let quotes = class.quotes & !escaped;
            // Set from an opening quote up to its closing quote (excluded).
            let in_string = prefix_xor(quotes) ^ string_carry;
            string_carry = ((in_string as i64) >> 63) as u64;
            let escapes = escaped & in_string;
            if escapes != 0 {
                check_escapes(b, at, &block, escapes)?;
            }
            let scalars = !(class.structural | class.spaces | in_string | quotes);
            let scalar_starts = scalars & !((scalars << 1) | scalar_carry);
            scalar_carry = scalars >> 63;
            let mut tokens = (class.structural & !in_string) | (quotes & in_string) | scalar_starts;
            while tokens != 0 {
                let k = tokens.trailing_zeros() as usize;
                tokens &= tokens - 1;
                let value = matches!(want, Want::Value | Want::FirstValue);
                match block[k] {
                    b'"' => {
                        want = match want {
                            Want::Value | Want::FirstValue => Want::After,
                            Want::FirstKey | Want::Key => Want::Colon,
                            _ => return None,
                        };
                    }
                    c @ (b'{' | b'[') => {
                        depth += 1;
                        if !value || depth > MAX_DEPTH {
                            return None;
                        }
                        objects = objects << 1 | u64::from(c == b'{');
                        want = if c == b'{' { Want::FirstKey } else { Want::FirstValue };
                    }
                    c @ (b'}' | b']') => {
                        let object = c == b'}';
                        let closes = match want {
                            Want::FirstKey => object,
                            Want::FirstValue => !object,
                            Want::After => (objects & 1 == 1) == object,
                            _ => false,
                        };
                        if !closes {
                            return None;
                        }
                        objects >>= 1;
                        depth -= 1;
                        if depth == 0 {
                            self.i = at + k + 1;
                            return Some(());
                        }
                        want = Want::After;
                    }
                    b':' if want == Want::Colon => want = Want::Value,
                    b',' if want == Want::After => {
                        want = if objects & 1 == 1 { Want::Key } else { Want::Value };
                    }
                    b':' | b',' => return None,
                    _ => {
                        // A number or literal, which must end where its run of bytes ends.
                        if !value {
                            return None;
                        }
                        self.i = at + k;
                        self.scalar()?;
                        if !matches!(b.get(self.i), Some(b' ' | b',' | b':' | b'{' | b'}' | b'[' | b']' | b'"')) {
                            return None;
                        }
                        want = Want::After;
                    }
                }
            }
            at += 64;
        }
    }

    fn skip(&mut self, f: Field) -> Option<()> {
        debug_assert_eq!(f, SKIP);
        self.skip_value()
    }

    fn review(&mut self) -> Option<Skimmed<'a>> {
        let (mut api_version, mut kind, mut request) = (None, None, None);
        self.object(&["apiVersion", "kind", "request"], false, |s, f| {
            match f {
                0 => api_version = s.opt_string()?,
                1 => kind = s.opt_string()?,
                2 => request = s.request()?,
                _ => s.skip(f)?,
            }
            Some(())
        })??;
        Some(match request {
            Some(Request::Gateway(request)) => Skimmed::Gateway(ReviewIn { api_version, kind, request: Some(request) }),
            Some(Request::Ingress(request)) => Skimmed::Ingress(ReviewIn { api_version, kind, request: Some(request) }),
            None => Skimmed::Ingress(ReviewIn { api_version, kind, request: None }),
        })
    }

    fn request(&mut self) -> Option<Option<Request<'a>>> {
        let mut uid = None;
        let mut kind = None;
        let (mut sub_resource, mut operation, mut name, mut namespace) = (None, None, None, None);
        let mut user_info = User::default();
        let (mut object, mut old_object, mut dry_run) = (None, None, None);
        // Where the object is, when it comes before the fields that say what it is.
        let mut later = None;
        let found = self.object(&REQUEST_FIELDS, true, |s, f| {
            match f {
                0 => uid = Some(s.string()?),
                1 => kind = Some(s.serde()?),
                2 => sub_resource = Some(s.opt_string()?),
                3 => operation = Some(s.opt_string()?),
                4 => name = s.opt_owned()?,
                5 => namespace = s.opt_owned()?,
                6 => user_info = s.serde()?,
                7 => match is_gateway(kind.as_ref(), sub_resource.as_ref(), operation.as_ref()) {
                    Some(gateway) => object = s.object_as(gateway)?,
                    None => {
                        s.spaces();
                        let start = s.i;
                        s.skip_value()?;
                        later = Some((start, s.i));
                    }
                },
                8 => dry_run = s.serde()?,
                9 => old_object = s.stored()?,
                _ => s.skip(f)?,
            }
            Some(())
        })?;
        if found.is_none() {
            return Some(None);
        }
        let (sub_resource, operation) = (sub_resource.flatten(), operation.flatten());
        let kind = kind.unwrap_or_default();
        let gateway =
            gw::is_gateway_kind(&kind) && gw::is_status(sub_resource.as_deref()) && gw::is_update(operation.as_deref());
        if let Some((start, end)) = later {
            // Read where it stands, now that the request says what it is; validated already.
            let resume = self.i;
            self.i = start;
            object = self.object_as(gateway)?;
            if self.i != end {
                return None;
            }
            self.i = resume;
        }
        // A missing uid is an error serde_json words.
        let request = RequestIn::<()> {
            uid: uid?,
            kind,
            sub_resource,
            operation,
            name,
            namespace,
            user_info,
            object: None,
            old_object,
            dry_run,
        };
        Some(Some(match (gateway, object) {
            (true, Some(Object::Gateway(object))) => Request::Gateway(request.with_object(Some(object))),
            (true, None) => Request::Gateway(request.with_object(None)),
            (false, Some(Object::Ingress(object))) => Request::Ingress(request.with_object(Some(object))),
            (false, None) => Request::Ingress(request.with_object(None)),
            // Read as the other kind: cannot happen (one rule decides both), but never guess.
            (_, Some(_)) => return None,
        }))
    }

    /// The request's object (or `null`), read as a Gateway or as an Ingress.
    fn object_as(&mut self, gateway: bool) -> Option<Option<Object<'a>>> {
        Some(if gateway { self.gateway()?.map(Object::Gateway) } else { self.ingress()?.map(Object::Ingress) })
    }

    fn ingress(&mut self) -> Option<Option<IngressIn<'a>>> {
        let (mut metadata, mut spec, mut status) = (None, SpecIn::default(), None);
        let found = self.object(&["metadata", "spec", "status"], true, |s, f| {
            match f {
                0 => metadata = s.metadata()?,
                1 => spec = s.spec()?,
                // Strict, as IngressIn reads it: an array is not a status.
                2 => status = s.serde::<Option<crate::strict::Strict<StatusIn>>>()?.map(|s| s.0),
                _ => s.skip(f)?,
            }
            Some(())
        })?;
        Some(found.map(|()| IngressIn { metadata, spec, status }))
    }

    /// `metadata` (or `null`) as [`MetaIn`] reads it, for every kind and for `oldObject`: the
    /// uid, and the fields a status write may change as the JSON text serde_json's `RawValue`
    /// would borrow (validated as it is skipped).
    pub(super) fn metadata(&mut self) -> Option<Option<MetaIn<'a>>> {
        let mut meta = MetaIn::default();
        let found = self.object(&["uid", "annotations", "labels", "ownerReferences", "finalizers"], true, |s, f| {
            match f {
                0 => meta.uid = s.opt_string()?,
                1 => meta.annotations = s.raw()?,
                2 => meta.labels = s.raw()?,
                3 => meta.owner_references = s.raw()?,
                4 => meta.finalizers = s.raw()?,
                _ => s.skip(f)?,
            }
            Some(())
        })?;
        Some(found.map(|()| meta))
    }

    /// A value kept as its text (`null` is none), as `RawValue` keeps it.
    fn raw(&mut self) -> Option<Option<&'a str>> {
        self.spaces();
        if self.peek()? == b'n' {
            self.i += 1;
            return self.rest_of(b"ull").map(|()| None);
        }
        let start = self.i;
        self.skip_value()?;
        std::str::from_utf8(&self.b[start..self.i]).ok().map(Some)
    }

    fn spec(&mut self) -> Option<SpecIn> {
        let mut ingress_class_name = None;
        self.object(&["ingressClassName"], false, |s, f| {
            match f {
                0 => ingress_class_name = s.opt_owned()?,
                _ => s.skip(f)?,
            }
            Some(())
        })??;
        Some(SpecIn { ingress_class_name })
    }
}

#[cfg(test)]
mod gateway_tests;
#[cfg(test)]
mod tests;
