//! How `cutover` shows its work: the plan as a table, then a progress bar on a terminal, a
//! plain line every few seconds off one, or one JSON line or YAML document per event.

use std::{
    fmt::Write as _,
    io::Write as _,
    time::{Duration, Instant},
};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use serde_json::{Value, json};

use super::{Output, plan::Plan, track::Tracker};

/// How often a plain line is printed off a terminal (and a `progress` event in JSON).
pub(crate) const LINE_EVERY: Duration = Duration::from_secs(3);

/// The bar's layout: moved/total, rate, ETA, and the newest moved Ingress as its message,
/// which takes what is left of the line (cut, never wrapped: a wrapped bar redraws badly).
const BAR_TEMPLATE: &str = "{spinner} {elapsed} [{bar:24}] {pos}/{len} moved, {rate}, ETA {left}  {wide_msg}";

enum Mode {
    Bar(ProgressBar),
    Lines {
        last: Option<Instant>,
    },
    /// One event each: a JSON line, or a YAML document when `yaml`.
    Json {
        last: Option<Instant>,
        yaml: bool,
    },
}

/// Where the plan and the progress go: stdout, in the shape `-o` and the terminal ask for.
pub(crate) struct Show {
    mode: Mode,
}

/// One event: a JSON value on one line, or a YAML document (`---` first, so a stream of them
/// reads as one multi-document file). YAML escapes control characters in its quoted scalars.
fn emit(yaml: bool, event: &str, mut body: Value) {
    body["event"] = json!(event);
    let text = if yaml {
        let doc = serde_norway::to_string(&body).unwrap_or_else(|e| format!("error: {:?}\n", e.to_string()));
        format!("---\n{doc}")
    } else {
        format!("{}\n", json_line(&body))
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(for_terminal(text).as_bytes());
    let _ = out.flush();
}

/// `text` with every control character but its line breaks written as an escape: the names,
/// addresses and writers in it are the tenants' (and other controllers') to choose, and an ESC
/// among them must not drive the operator's terminal.
fn for_terminal(text: &str) -> String {
    text.split('\n').map(crate::names::escape_control).collect::<Vec<_>>().join("\n")
}

/// One JSON value on one line, the control characters serde_json writes raw (DEL and the C1
/// controls, such as CSI) escaped as `\u` too, so piping the events to a terminal is as safe.
fn json_line(body: &Value) -> String {
    let text = body.to_string();
    if !text.chars().any(char::is_control) {
        return text;
    }
    text.chars().fold(String::with_capacity(text.len() + 12), |mut out, c| {
        if c.is_control() {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
        out
    })
}

/// Moves per second since the apply, and the seconds left at that rate.
fn rate(tracker: &Tracker, elapsed: Duration) -> (f64, Option<u64>) {
    let secs = elapsed.as_secs_f64().max(0.001);
    let rate = tracker.moved() as f64 / secs;
    let left = tracker.total().saturating_sub(tracker.moved());
    let eta = (rate > 0.0).then(|| (left as f64 / rate).ceil() as u64);
    (rate, eta)
}

impl Show {
    /// `terminal`: whether stdout is one (then text output draws a bar).
    pub(crate) fn new(output: Output, terminal: bool) -> Show {
        let mode = match output {
            Output::Json => Mode::Json { last: None, yaml: false },
            Output::Yaml => Mode::Json { last: None, yaml: true },
            Output::Text if terminal => Mode::Bar(ProgressBar::hidden()),
            Output::Text => Mode::Lines { last: None },
        };
        Show { mode }
    }

    pub(crate) fn plan(&self, plan: &Plan) {
        match self.mode {
            Mode::Json { yaml, .. } => emit(yaml, "plan", serde_json::to_value(plan).unwrap_or_default()),
            _ => say(&plan.table()),
        }
    }

    /// The ConfigMap was written.
    pub(crate) fn applied(&self, config_map: &str, key: &str, annotation: &str, resource_version: &str) {
        match self.mode {
            Mode::Json { yaml, .. } => emit(
                yaml,
                "applied",
                json!({"configMap": config_map, "key": key, "previousAnnotation": annotation, "resourceVersion": resource_version}),
            ),
            _ => say(&format!(
                "applied: ConfigMap {config_map} key {key} (resourceVersion {resource_version}); the previous value is kept in annotation {annotation}\n"
            )),
        }
    }

    /// SIGINT while following: what stays applied, and the command that undoes it.
    pub(crate) fn interrupted(&mut self, applied: Option<&str>, rollback: &str) {
        match &mut self.mode {
            Mode::Json { yaml, .. } => emit(*yaml, "interrupted", json!({"applied": applied, "rollback": rollback})),
            mode => {
                if let Mode::Bar(bar) = mode {
                    bar.abandon();
                }
                say(&match applied {
                    Some(applied) => format!(
                        "\ninterrupted: {applied} stays applied, and the guard moves the Ingresses whether or not this follows them; to undo it:\n  {rollback}\n"
                    ),
                    None => "\ninterrupted: nothing was written by this run\n".to_owned(),
                });
            }
        }
    }

    /// The ConfigMap already says what was asked: nothing written, the Ingresses followed.
    pub(crate) fn unchanged(&self, config_map: &str, key: &str) {
        match self.mode {
            Mode::Json { yaml, .. } => emit(yaml, "unchanged", json!({"configMap": config_map, "key": key})),
            _ => say(&format!(
                "unchanged: ConfigMap {config_map} key {key} already says this; nothing written, following\n"
            )),
        }
    }

    /// Following starts: `tracker` holds what the plan moves.
    pub(crate) fn start(&mut self, tracker: &Tracker) {
        if let Mode::Bar(bar) = &mut self.mode {
            let style = ProgressStyle::with_template(BAR_TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .with_key("rate", |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.1}/s", state.per_sec());
                })
                // Before the first move there is no rate to tell the time left from.
                .with_key("left", |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = if state.pos() == 0 { w.write_str("?") } else { write!(w, "{}s", state.eta().as_secs()) };
                })
                .progress_chars("=> ");
            *bar = ProgressBar::with_draw_target(Some(tracker.total() as u64), ProgressDrawTarget::stdout());
            bar.set_style(style);
            bar.set_position(tracker.moved() as u64);
            bar.enable_steady_tick(Duration::from_millis(200));
        }
    }

    /// An Ingress moved (or, `undone`, was written back).
    pub(crate) fn changed(&mut self, ingress: &str, undone: bool, tracker: &Tracker) {
        match &mut self.mode {
            Mode::Bar(bar) => {
                bar.set_length(tracker.total() as u64);
                bar.set_position(tracker.moved() as u64);
                if undone {
                    bar.println(for_terminal(&format!("{ingress}: moved, then written back by another writer")));
                } else {
                    bar.set_message(for_terminal(&format!("newest: {ingress}")));
                }
            }
            Mode::Json { yaml, .. } => {
                let event = if undone { "undone" } else { "moved" };
                emit(*yaml, event, json!({"ingress": ingress, "moved": tracker.moved(), "total": tracker.total()}));
            }
            Mode::Lines { .. } => {}
        }
    }

    /// Called often; prints a line (or a `progress` event) every [`LINE_EVERY`].
    pub(crate) fn tick(&mut self, tracker: &Tracker, elapsed: Duration) {
        let due = |last: &mut Option<Instant>| {
            let now = Instant::now();
            let due = last.is_none_or(|t| now.duration_since(t) >= LINE_EVERY);
            if due {
                *last = Some(now);
            }
            due
        };
        match &mut self.mode {
            Mode::Bar(_) => {}
            Mode::Lines { last } => {
                if due(last) {
                    say(&format!("{}\n", line(tracker, elapsed)));
                }
            }
            Mode::Json { last, yaml } => {
                if !due(last) {
                    return;
                }
                let (rate, eta) = rate(tracker, elapsed);
                emit(
                    *yaml,
                    "progress",
                    json!({"moved": tracker.moved(), "total": tracker.total(), "perSecond": (rate * 10.0).round() / 10.0,
                        "etaSeconds": eta, "newest": tracker.newest(), "elapsedSeconds": elapsed.as_secs()}),
                );
            }
        }
    }

    /// Every Ingress moved.
    pub(crate) fn done(&mut self, tracker: &Tracker, elapsed: Duration) {
        let summary = format!("done: {}/{} moved in {:.1}s", tracker.moved(), tracker.total(), elapsed.as_secs_f64());
        match &mut self.mode {
            Mode::Bar(bar) => {
                bar.set_position(tracker.moved() as u64);
                bar.finish();
                // The finished bar stays, and the cursor at its end.
                say(&format!("\n{summary}\n"));
            }
            Mode::Lines { .. } => say(&format!("{}\n{summary}\n", line(tracker, elapsed))),
            Mode::Json { yaml, .. } => emit(
                *yaml,
                "done",
                json!({"moved": tracker.moved(), "total": tracker.total(), "elapsedSeconds": elapsed.as_secs_f64()}),
            ),
        }
    }

    /// `--timeout` passed first; names what has not moved and why.
    pub(crate) fn timed_out(&mut self, tracker: &Tracker, elapsed: Duration) {
        let not_moved = tracker.not_moved();
        match &mut self.mode {
            Mode::Json { yaml, .. } => emit(
                *yaml,
                "timeout",
                json!({"moved": tracker.moved(), "total": tracker.total(), "elapsedSeconds": elapsed.as_secs_f64(),
                    "notMoved": not_moved}),
            ),
            mode => {
                if let Mode::Bar(bar) = mode {
                    bar.abandon();
                }
                let mut text = format!(
                    "timeout: {}/{} moved after {:.0}s; not moved:\n",
                    tracker.moved(),
                    tracker.total(),
                    elapsed.as_secs_f64()
                );
                // The first ones name the cause; a long tail of the same adds nothing.
                const SHOWN: usize = 20;
                for n in not_moved.iter().take(SHOWN) {
                    let reason = serde_json::to_value(n.reason).ok().and_then(|v| v.as_str().map(str::to_uppercase));
                    let _ = writeln!(text, "  {} {}: {}", n.ingress, reason.unwrap_or_default(), n.detail);
                }
                if not_moved.len() > SHOWN {
                    text.push_str(&format!("  ... and {} more\n", not_moved.len() - SHOWN));
                }
                if not_moved.iter().any(|n| n.reason == super::track::Reason::Drift) {
                    text.push_str("DRIFT: not patched yet; has every guard replica reloaded the file (its log says \"policy file reloaded\")?\n");
                }
                say(&text);
            }
        }
    }
}

/// The plain progress line.
fn line(tracker: &Tracker, elapsed: Duration) -> String {
    let (rate, eta) = rate(tracker, elapsed);
    let eta = eta.map_or_else(|| "?".to_owned(), |s| format!("{s}s"));
    let newest = tracker.newest().map(|n| format!(", newest {n}")).unwrap_or_default();
    format!(
        "cutover: {}/{} moved ({rate:.1}/s, ETA {eta}) after {}s{newest}",
        tracker.moved(),
        tracker.total(),
        elapsed.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cutover::track::Judged;

    #[test]
    fn the_plain_line_says_moved_total_rate_and_eta() {
        let key = |n: &str| ("ns".to_owned(), n.to_owned());
        let mut t = Tracker::new([key("a"), key("b"), key("c"), key("d")]);
        assert_eq!(line(&t, Duration::from_secs(2)), "cutover: 0/4 moved (0.0/s, ETA ?) after 2s");
        t.observe(&key("a"), Judged::Canonical);
        t.observe(&key("b"), Judged::Canonical);
        assert_eq!(line(&t, Duration::from_secs(2)), "cutover: 2/4 moved (1.0/s, ETA 2s) after 2s, newest ns/b");
    }

    /// Regression: tenant-controlled text (hostnames, writers) was printed as it was, so
    /// an ESC in it drove the operator's terminal.
    #[test]
    fn control_characters_are_escaped_on_the_terminal_and_in_json() {
        let host = "lb\u{1b}]0;owned\u{7}\u{1b}[2J.example.com";
        let text = format!("  ns/web  {host}  198.51.100.7\nnext line\n");
        let shown = for_terminal(&text);
        assert!(!shown.chars().any(|c| c.is_control() && c != '\n'), "{shown:?}");
        assert_eq!(shown, "  ns/web  lb\\u{1b}]0;owned\\u{7}\\u{1b}[2J.example.com  198.51.100.7\nnext line\n");
        let json = json_line(&json!({"ingress": host, "csi": "\u{9b}31m", "del": "\u{7f}"}));
        assert!(!json.chars().any(char::is_control), "{json}");
        let back: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["ingress"], host, "the same text, escaped");
        assert_eq!(back["csi"], "\u{9b}31m");
        assert_eq!(back["del"], "\u{7f}");
    }
}
