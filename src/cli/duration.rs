//! The one parser of every duration flag: whole seconds, bare (`30`) or with a unit (`30s`,
//! `1m`), within the flag's own range.

use std::{ffi::OsStr, time::Duration};

use clap::{Arg, Command, builder::TypedValueParser, error::ErrorKind};

/// The range a duration flag accepts, in whole seconds; also its clap value parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seconds {
    min: u64,
    max: u64,
}

/// Why a duration flag's value is refused; shown as `FLAG "VALUE": REASON`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} {value:?}: {reason}")]
pub(crate) struct DurationError {
    flag: String,
    value: String,
    reason: String,
}

impl Seconds {
    /// Any number of seconds, zero included (delays and waits that may be skipped).
    pub(crate) const ANY: Seconds = Seconds { min: 0, max: u64::MAX };
    /// At least one second (timeouts that must not be zero).
    pub(crate) const POSITIVE: Seconds = Seconds { min: 1, max: u64::MAX };
    /// One second to an hour (the API-server timings: request timeout, lease timing).
    pub(crate) const UP_TO_AN_HOUR: Seconds = Seconds { min: 1, max: 3600 };

    /// `text` as a duration for `flag`, or what is wrong with it.
    pub(crate) fn duration(self, flag: &str, text: &str) -> Result<Duration, DurationError> {
        let err = |reason: String| DurationError { flag: flag.to_owned(), value: text.to_owned(), reason };
        let (number, unit) = match text.trim() {
            v if v.ends_with('s') => (&v[..v.len() - 1], 1),
            v if v.ends_with('m') => (&v[..v.len() - 1], 60),
            v => (v, 1),
        };
        let n: u64 =
            number.parse().map_err(|_| err(format!("expected whole seconds, e.g. 15s or 1m ({})", self.range())))?;
        let secs = (n.checked_mul(unit).filter(|s| (self.min..=self.max).contains(s)))
            .ok_or_else(|| err(format!("must be {}", self.range())))?;
        Ok(Duration::from_secs(secs))
    }

    fn range(self) -> String {
        match (self.min, self.max) {
            (0, u64::MAX) => "any whole number of seconds".to_owned(),
            (min, u64::MAX) => format!("a whole number of seconds, at least {min}"),
            (min, max) => format!("a whole number of seconds from {min} to {max}"),
        }
    }
}

impl TypedValueParser for Seconds {
    type Value = Duration;

    fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<Duration, clap::Error> {
        let flag = arg.and_then(Arg::get_long).map_or_else(|| "duration".to_owned(), |long| format!("--{long}"));
        let text = value.to_string_lossy();
        // The message names the flag and the value, as the other flag errors of `serve` do.
        self.duration(&flag, &text)
            .map_err(|e| clap::Error::raw(ErrorKind::ValueValidation, format!("{e}\n")).with_cmd(cmd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_and_ranges() {
        let hour = Seconds::UP_TO_AN_HOUR;
        for (text, secs) in [("15s", 15), ("2m", 120), ("7", 7), ("30", 30), ("5s", 5), (" 1m ", 60), ("3600", 3600)] {
            assert_eq!(hour.duration("--x", text), Ok(Duration::from_secs(secs)), "{text}");
        }
        for bad in ["", "0s", "0", "1.5s", "abc", "2h", "-1s", "-1", "3601", "61m"] {
            let err = hour.duration("--x", bad).unwrap_err().to_string();
            assert!(err.starts_with(&format!("--x {bad:?}: ")), "{bad}: {err}");
        }
        let err = hour.duration("--x", "1.5s").unwrap_err().to_string();
        assert_eq!(
            err,
            "--x \"1.5s\": expected whole seconds, e.g. 15s or 1m (a whole number of seconds from 1 to 3600)"
        );
        for out_of_range in ["0", "3601"] {
            let err = hour.duration("--request-timeout", out_of_range).unwrap_err().to_string();
            assert!(err.contains("whole number of seconds from 1 to 3600"), "{err}");
        }
        assert_eq!(Seconds::ANY.duration("--x", "0"), Ok(Duration::ZERO));
        assert_eq!(Seconds::ANY.duration("--x", "86400"), Ok(Duration::from_secs(86400)));
        assert!(Seconds::POSITIVE.duration("--x", "0s").unwrap_err().to_string().contains("at least 1"));
        assert!(Seconds::ANY.duration("--x", &format!("{}m", u64::MAX)).is_err(), "overflow is refused");
    }
}
