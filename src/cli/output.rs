//! The `-o`/`--output` flag: `table` for people, `json` and `yaml` (one document) for programs.

use clap::ValueEnum;
use serde::Serialize;

/// How a command prints what it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns and lines, for people.
    #[value(alias = "text")]
    Table,
    /// One JSON document.
    Json,
    /// One YAML document.
    Yaml,
}

impl Format {
    /// `value` as a JSON or YAML document (newline-terminated), or `table` for [`Format::Table`].
    pub(crate) fn document<T: Serialize>(self, value: &T, table: impl FnOnce() -> String) -> String {
        match self {
            Format::Table => table(),
            Format::Json => {
                serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
                    + "\n"
            }
            Format::Yaml => serde_norway::to_string(value).unwrap_or_else(|e| format!("error: {e}\n")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_three_ways() {
        let value = serde_json::json!({"healthy": true, "checks": [{"check": "a"}]});
        assert_eq!(Format::Table.document(&value, || "T\n".into()), "T\n");
        let json: serde_json::Value = serde_json::from_str(&Format::Json.document(&value, String::new)).unwrap();
        assert_eq!(json, value);
        let yaml: serde_json::Value = serde_norway::from_str(&Format::Yaml.document(&value, String::new)).unwrap();
        assert_eq!(yaml, value);
        assert_eq!(Format::from_str("text", true), Ok(Format::Table));
        let refused = Format::from_str("xml", true).unwrap_err();
        assert!(refused.contains("xml"), "{refused}");
    }
}
