//! The kubectl plugin: invoked as `kubectl-isg`, the command line names itself `kubectl isg` in
//! its usage, help and errors; the commands and flags are the same.

use std::{ffi::OsString, path::Path};

use clap::{CommandFactory as _, FromArgMatches as _};

use super::Cli;

/// The executable name kubectl looks up for `kubectl isg`.
pub(crate) const PLUGIN_EXECUTABLE: &str = "kubectl-isg";
/// How kubectl users type it, and so how usage lines spell it.
const PLUGIN_COMMAND: &str = "kubectl isg";

/// Whether `argv0` is the plugin's file name, with or without Windows' `.exe` (krew's layout).
pub(crate) fn is_plugin(argv0: &Path) -> bool {
    argv0.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.strip_suffix(".exe").unwrap_or(n) == PLUGIN_EXECUTABLE)
}

/// Parses `args` (`args[0]` being the invocation name) under the name it was invoked as; exits
/// as clap does on `--help`, `--version` and usage errors.
pub(crate) fn parse_from(args: impl IntoIterator<Item = OsString>) -> Cli {
    let mut args = args.into_iter().peekable();
    let plugin = args.peek().is_some_and(|argv0| is_plugin(Path::new(argv0)));
    let mut command = Cli::command();
    if plugin {
        // `bin_name` set before parsing survives it (clap takes argv[0] only when it is unset),
        // and subcommands' usage lines are built from it: `kubectl isg check ...`.
        command = command.name(PLUGIN_COMMAND).bin_name(PLUGIN_COMMAND);
    }
    let mut matches = command.get_matches_from(args);
    Cli::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| e.format(&mut Cli::command()).exit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn help(args: &[&str]) -> String {
        let mut command = Cli::command();
        if is_plugin(Path::new(args[0])) {
            command = command.name(PLUGIN_COMMAND).bin_name(PLUGIN_COMMAND);
        }
        match command.try_get_matches_from(args) {
            Ok(_) => panic!("{args:?} should print help"),
            Err(e) => e.render().to_string(),
        }
    }

    #[test]
    fn the_plugin_is_known_by_its_file_name() {
        for (argv0, want) in [
            ("kubectl-isg", true),
            ("/home/me/.krew/bin/kubectl-isg", true),
            ("kubectl-isg.exe", true),
            ("ingress-status-guard", false),
            ("/usr/local/bin/ingress-status-guard", false),
            ("kubectl-isg-old", false),
            ("kubectl", false),
        ] {
            assert_eq!(is_plugin(Path::new(argv0)), want, "{argv0}");
        }
    }

    #[test]
    fn usage_lines_say_kubectl_isg_under_the_plugin_name() {
        let text = help(&["/tmp/bin/kubectl-isg", "check", "--help"]);
        assert!(text.contains("Usage: kubectl isg check [OPTIONS]"), "{text}");
        let text = help(&["kubectl-isg", "--help"]);
        assert!(text.contains("Usage: kubectl isg [OPTIONS] <COMMAND>"), "{text}");
        let text = help(&["ingress-status-guard", "check", "--help"]);
        assert!(text.contains("Usage: ingress-status-guard check [OPTIONS]"), "{text}");
    }

    #[test]
    fn the_plugin_parses_the_same_commands() {
        let cli =
            parse_from(["kubectl-isg", "check", "--context", "a", "--context", "b", "-n", "web"].map(OsString::from));
        match cli.command {
            super::super::Command::Check { args, .. } => {
                assert_eq!(args.cluster.client.context, ["a", "b"]);
                assert_eq!(args.namespace.as_deref(), Some("web"));
            }
            other => panic!("parsed as {other:?}"),
        }
    }
}
