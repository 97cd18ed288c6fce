//! What `doctor` found, as values: one finding per check (its state, what it found, what to do),
//! the exit code they make, and the table, JSON and YAML they are printed as. Pure.

use serde::Serialize;

/// Longest text of one finding's field: the API server's messages are quoted in them.
const MAX_TEXT: usize = 600;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum State {
    /// Proven to work.
    Pass,
    /// Could not be checked from here; the other checks still say whether it works.
    Skip,
    /// Broken: the webhook does not work, or not as the policies say.
    Fail,
}

/// One check's line: what it found and, unless it passed, what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Finding {
    pub check: &'static str,
    pub state: State,
    pub found: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub todo: String,
}

impl Finding {
    pub(crate) fn pass(check: &'static str, found: impl Into<String>) -> Finding {
        Finding { check, state: State::Pass, found: cut(found.into()), todo: String::new() }
    }

    pub(crate) fn skip(check: &'static str, found: impl Into<String>, todo: impl Into<String>) -> Finding {
        Finding { check, state: State::Skip, found: cut(found.into()), todo: cut(todo.into()) }
    }

    pub(crate) fn fail(check: &'static str, found: impl Into<String>, todo: impl Into<String>) -> Finding {
        Finding { check, state: State::Fail, found: cut(found.into()), todo: cut(todo.into()) }
    }
}

/// `text` cut to [`MAX_TEXT`] characters, on a character boundary.
fn cut(text: String) -> String {
    match text.char_indices().nth(MAX_TEXT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// Every check's finding, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Report {
    pub healthy: bool,
    pub checks: Vec<Finding>,
}

impl Report {
    pub(crate) fn new(checks: Vec<Finding>) -> Report {
        Report { healthy: checks.iter().all(|f| f.state != State::Fail), checks }
    }

    /// The first failure, as `--wait` says why it tries again.
    pub(crate) fn first_failure(&self) -> Option<&Finding> {
        self.checks.iter().find(|f| f.state == State::Fail)
    }

    /// `0` healthy, `1` a check failed.
    pub(crate) fn exit_code(&self) -> u8 {
        u8::from(!self.healthy)
    }

    /// One line per check (`STATE  CHECK  found`), its advice indented below, and a verdict.
    pub(crate) fn table(&self) -> String {
        let width = self.checks.iter().map(|f| f.check.len()).max().unwrap_or(0);
        let mut out = String::new();
        for f in &self.checks {
            out.push_str(&format!("{}  {:width$}  {}\n", format!("{:?}", f.state).to_uppercase(), f.check, f.found));
            if !f.todo.is_empty() {
                out.push_str(&format!("{:6}{:width$}  → {}\n", "", "", f.todo));
            }
        }
        let failed = self.checks.iter().filter(|f| f.state == State::Fail).count();
        // Policy mode has no webhook: its verdict names what it proved instead.
        let policy_mode = self.checks.iter().any(|f| f.check == "admission-policies");
        out.push_str(&match failed {
            0 if policy_mode => {
                "healthy: the API server enforces the guard's current admission policies as the policies say\n"
                    .to_owned()
            }
            0 => "healthy: the API server calls the webhook and it answers as the policies say\n".to_owned(),
            n => format!("unhealthy: {n} check(s) failed\n"),
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_makes_the_report_unhealthy_and_says_what_to_do() {
        let report = Report::new(vec![
            Finding::pass("configuration", "found"),
            Finding::skip("ca-bundle", "not reachable", "run it in the cluster"),
            Finding::fail("endpoints", "no ready endpoints", "scale the Deployment up"),
        ]);
        assert!(!report.healthy);
        assert_eq!(report.exit_code(), 1);
        assert_eq!(report.first_failure().map(|f| f.check), Some("endpoints"));
        let table = report.table();
        assert!(table.contains("FAIL  endpoints      no ready endpoints\n"), "{table}");
        assert!(table.contains("→ scale the Deployment up"), "{table}");
        assert!(table.ends_with("unhealthy: 1 check(s) failed\n"), "{table}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["checks"][2]["state"], "fail");
        assert!(json["checks"][0].get("todo").is_none(), "a pass has no advice: {json}");
    }

    #[test]
    fn skips_alone_are_healthy_and_long_text_is_cut() {
        let report = Report::new(vec![Finding::skip("a", "x".repeat(5000), "")]);
        assert!(report.healthy);
        assert_eq!(report.exit_code(), 0);
        assert_eq!(report.checks[0].found.chars().count(), MAX_TEXT + 1);
    }
}
