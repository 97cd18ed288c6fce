//! Kubernetes name rules and text bounds shared by every module: DNS-1123 names, and cutting
//! text to a length on a character boundary.

/// Kubernetes' `IsDNS1123Subdomain`: at most 253 characters of dot-separated labels, each of
/// lowercase alphanumerics and '-', starting and ending with an alphanumeric.
pub(crate) fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_label_chars)
}

/// Kubernetes' `IsDNS1123Label`, which Namespaces and Service names must be: a subdomain of one
/// label, at most 63 characters.
pub(crate) fn is_dns1123_label(name: &str) -> bool {
    name.len() <= 63 && is_label_chars(name)
}

/// Kubernetes' qualified name: `[prefix/]name`, as a label key and a Service's
/// `spec.loadBalancerClass` must be.
pub(crate) fn is_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_label_name(name),
        None => is_label_name(key),
    }
}

/// At most 63 of `[A-Za-z0-9-_.]`, alphanumeric at both ends: a label value, and the name part
/// of a qualified name.
pub(crate) fn is_label_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn is_label_chars(label: &str) -> bool {
    let bytes = label.as_bytes();
    !bytes.is_empty()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// `text` with every control character (line breaks, tabs, ANSI escape sequences' ESC, C1
/// controls) written as a Rust escape, so text a caller chose stays on one log line and cannot
/// drive a terminal. Borrowed when there is nothing to escape.
pub(crate) fn escape_control(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let _ = write_escaped(&mut out, text); // writing to a String cannot fail
    std::borrow::Cow::Owned(out)
}

/// [`escape_control`] written straight to `out`, a run of plain characters at a time, so a long
/// text is never copied first.
pub(crate) fn write_escaped(out: &mut impl std::fmt::Write, text: &str) -> std::fmt::Result {
    let mut rest = text;
    while let Some((i, c)) = rest.char_indices().find(|(_, c)| c.is_control()) {
        out.write_str(&rest[..i])?;
        for escaped in c.escape_default() {
            out.write_char(escaped)?;
        }
        rest = &rest[i + c.len_utf8()..];
    }
    out.write_str(rest)
}

/// `text` cut to at most `max_chars` characters and `max_bytes` bytes, on a character boundary,
/// ending in `…` when cut. Warnings are bounded in characters (what kubectl shows), Event notes
/// in bytes (what the Events API accepts).
pub(crate) fn truncate(text: &str, max_chars: usize, max_bytes: usize) -> String {
    const ELLIPSIS: char = '…';
    let fits = |chars: usize, bytes: usize| chars <= max_chars && bytes <= max_bytes;
    if fits(text.chars().count(), text.len()) {
        return text.to_owned();
    }
    let room_chars = max_chars.saturating_sub(1);
    let room_bytes = max_bytes.saturating_sub(ELLIPSIS.len_utf8());
    let keep = text
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .enumerate()
        .take_while(|&(n, end)| n < room_chars && end <= room_bytes)
        .last()
        .map_or(0, |(_, end)| end);
    let mut cut = String::with_capacity(keep + ELLIPSIS.len_utf8());
    cut.push_str(&text[..keep]);
    if fits(1, ELLIPSIS.len_utf8()) {
        cut.push(ELLIPSIS);
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1123() {
        for ok in ["a", "a-b.c", "0.example", &"a".repeat(63)] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a..b", ".a", "a.", "A", "a b", &format!("{}.{}", "a".repeat(200), "b".repeat(60))]
        {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
        assert!(is_dns1123_label("ingress-nginx"));
        for bad in ["a.b", &"a".repeat(64), "", "Ab", "a_b"] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }

    #[test]
    fn escaping_writes_what_escape_control_returns() {
        for text in ["", "plain", "a\nb\r\x1b[2K", "\u{85}é\t", "end\n"] {
            let mut written = String::new();
            write_escaped(&mut written, text).unwrap();
            assert_eq!(written, escape_control(text), "{text:?}");
        }
    }

    #[test]
    fn truncation_is_character_safe() {
        let chars = |t: &str, n| truncate(t, n, usize::MAX);
        assert_eq!(chars("abc", 3), "abc");
        assert_eq!(chars("abcd", 3), "ab…");
        assert_eq!(chars("ééé", 3), "ééé");
        assert_eq!(chars("éééé", 3), "éé…");
        assert_eq!(chars("", 0), "");
        assert_eq!(chars("ab", 1), "…");
        let bytes = |t: &str, n| truncate(t, usize::MAX, n);
        assert_eq!(bytes("abcdef", 6), "abcdef");
        assert_eq!(bytes("abcdefg", 6), "abc…");
        // "é" is two bytes: never cut in the middle of one.
        assert_eq!(bytes("éééé", 7), "éé…");
        assert_eq!(bytes("éééé", 6), "é…");
        let long = "✓".repeat(2000);
        let cut = bytes(&long, 1024);
        assert!(cut.len() <= 1024 && cut.len() > 1020 && cut.ends_with('…'), "{}", cut.len());
        assert_eq!(bytes("abc", 2), "", "no room even for the ellipsis");
    }
}
