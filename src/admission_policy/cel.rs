//! The CEL text every kind's admission policy is written with: string literals escaped so no
//! value can end a literal or change the expression. What each kind's CEL says of its status is
//! in `admission_policy/<kind>.rs`.

use std::fmt::Write as _;

/// A CEL double-quoted string literal of `text`. Quotes and backslashes are escaped, and every
/// character outside printable ASCII as `\uXXXX` or `\UXXXXXXXX`, so the expression is plain
/// ASCII whatever YAML or terminal carries it, and no value can close the literal.
pub(crate) fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            c if u32::from(c) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08X}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// `[a, b]` of CEL string literals.
pub(crate) fn string_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(string).collect();
    format!("[{}]", items.join(", "))
}
