//! Log output: the global subscriber, and the plain format's field writer, which keeps every
//! caller-controlled value on one line.

use std::fmt::Write as _;

use tracing_subscriber::{
    field::MakeExt,
    fmt::{FormatFields, format::Writer},
};

use crate::names::escape_control;

/// Log format: plain text for people, JSON lines for log pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Plain,
    Json,
}

/// Installs the global tracing subscriber; `default` applies without --log-level and RUST_LOG.
pub(crate) fn init_logging(format: LogFormat, level: Option<&str>, default: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(level) => EnvFilter::new(level),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default)),
    };
    // Colour codes only for a person at a terminal, never in a file or a container log.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).init(),
        LogFormat::Plain => builder.fmt_fields(plain_fields()).init(),
    }
}

/// The plain format's fields: `message name=value …`, with control characters in values (line
/// breaks, ANSI escapes) written as escapes. tracing-subscriber's default plain fields write
/// `%` values verbatim and escape only ANSI sequences, so a `\n` in a hostname or username a
/// review carries would forge a whole log line. The JSON format escapes on its own.
pub(crate) fn plain_fields() -> impl for<'w> FormatFields<'w> + Send + Sync + 'static {
    tracing_subscriber::fmt::format::debug_fn(|writer: &mut Writer<'_>, field, value| {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        let text = escape_control(&text);
        if field.name() == "message" { writer.write_str(&text) } else { write!(writer, "{}={text}", field.name()) }
    })
    .delimited(" ")
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Collects what a plain-format subscriber writes.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn caller_text_stays_on_one_line() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .fmt_fields(plain_fields())
            .finish();
        let forged = "evil\nINFO ingress_status_guard: forged line\r\x1b[2K";
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(writer = %forged, groups = forged, count = 3, "rogue status write");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text:?}");
        assert!(
            text.contains(r"rogue status write writer=evil\nINFO ingress_status_guard: forged line\r\u{1b}[2K groups="),
            "{text}"
        );
        assert!(text.trim_end().ends_with("count=3"), "{text}");
        assert!(!text.contains('\r') && !text.contains('\x1b'), "{text:?}");
    }
}
