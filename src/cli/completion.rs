//! Shell completion: `completion SHELL` prints a thin script that asks the hidden `__complete`
//! for every word, which prints the candidates and cobra's directive line (the format kubectl
//! reads from a plugin's helper): one engine in the binary, so the shells never disagree.

use std::{io::Write as _, path::Path, time::Duration};

use clap::{Arg, ArgAction, Args, Command, CommandFactory as _, ValueEnum};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Namespace},
    networking::v1::Ingress,
};
use kube::{
    Api,
    api::ListParams,
    core::{ApiResource, DynamicObject, GroupVersionKind},
};

use super::{Cli, plugin::PLUGIN_EXECUTABLE};
use crate::client::Target;

/// The longest a completion waits for the cluster: a shell waiting on a Tab must not hang.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(5);
/// The binary's own name, which the bash script completes.
const BINARY: &str = "ingress-status-guard";

/// cobra's `ShellCompDirectiveNoFileComp`: only the candidates.
const NO_FILES: u8 = 4;
/// cobra's `ShellCompDirectiveDefault`: the shell may offer file names.
const FILES: u8 = 0;

#[derive(Args, Debug)]
pub(crate) struct CompletionArgs {
    /// The shell to print a completion script for; `kubectl` prints the `kubectl_complete-isg`
    /// helper kubectl (1.26 or later) runs to complete `kubectl isg`.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
    Kubectl,
}

/// The words typed after the program's name, the last being the one completed (empty when the
/// cursor follows a space). The scripts pass `--` first, so no word is read as a flag here.
#[derive(Args, Debug)]
pub(crate) struct CompleteArgs {
    #[arg(num_args = 0.., allow_hyphen_values = true, trailing_var_arg = true)]
    pub words: Vec<String>,
}

/// The completion script for `shell`.
pub(crate) fn script(shell: Shell) -> String {
    let template = match shell {
        Shell::Bash => BASH,
        Shell::Zsh => ZSH,
        Shell::Fish => FISH,
        Shell::Powershell => POWERSHELL,
        Shell::Kubectl => return KUBECTL.replace("@PLUGIN@", PLUGIN_EXECUTABLE).replace("@BINARY@", BINARY),
    };
    template.replace("@BINARY@", BINARY).replace("@FUNCTION@", "_ingress_status_guard")
}

/// zsh: `words[2,CURRENT]` are the words after the program up to the completed one (zsh does
/// not split on `=`, so the candidates, which carry the whole word, match it as typed).
/// Autoloaded from `fpath` (the `#compdef` line) or sourced (then `compdef` registers it).
const ZSH: &str = r#"#compdef @BINARY@ kubectl-isg
# zsh completion for @BINARY@ (and kubectl-isg): save as _@BINARY@ in a directory of $fpath,
# or source it after compinit. Every word is completed by `@BINARY@ __complete`.
@FUNCTION@() {
    local out entry directive=4
    local -a candidates
    out=$("${words[1]}" __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
    for entry in "${(@f)out}"; do
        case $entry in
            :*) directive=${entry#:} ;;
            *) candidates+=("$entry") ;;
        esac
    done
    if (( ${#candidates} )); then
        compadd -- "${candidates[@]}"
    elif [[ $directive == 0 ]]; then
        _files
    fi
}
if [[ ${funcstack[1]} == @FUNCTION@ ]]; then
    @FUNCTION@ "$@"
else
    compdef @FUNCTION@ @BINARY@ kubectl-isg
fi
"#;

/// fish: `commandline -opc` are the words before the cursor, `commandline -ct` the one being
/// completed.
const FISH: &str = r#"# fish completion for @BINARY@ (and kubectl-isg): save as
# ~/.config/fish/completions/@BINARY@.fish. Every word is completed by `@BINARY@ __complete`.
function __@FUNCTION@_complete
    set -l words (commandline -opc)
    set -l current (commandline -ct)
    set -l program $words[1]
    set -e words[1]
    set -l out ($program __complete -- $words "$current" 2>/dev/null)
    or return
    set -l directive 4
    set -l found 0
    for entry in $out
        if string match -q -- ':*' $entry
            set directive (string sub -s 2 -- $entry)
        else
            set found 1
            echo $entry
        end
    end
    if test $found = 0 -a "$directive" = 0
        __fish_complete_path $current
    end
end
complete -c @BINARY@ -f -a '(__@FUNCTION@_complete)'
complete -c kubectl-isg -f -a '(__@FUNCTION@_complete)'
"#;

/// PowerShell: the command's elements before the cursor, and an empty word when the cursor
/// follows a space. Before 7.3 PowerShell drops an empty argument to a native command, so it is
/// passed as `""` there, which `__complete` reads as empty (cobra's workaround).
const POWERSHELL: &str = r#"# PowerShell completion for @BINARY@ (and kubectl-isg): add it to your $PROFILE.
# Every word is completed by `@BINARY@ __complete`.
Register-ArgumentCompleter -Native -CommandName '@BINARY@', 'kubectl-isg' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)
    $words = @($commandAst.CommandElements |
        Where-Object { $_.Extent.StartOffset -lt $cursorPosition } |
        ForEach-Object { $_.Extent.Text })
    if ($wordToComplete -eq '') {
        if ($PSVersionTable.PSVersion -lt [version]'7.3') { $words += '""' } else { $words += '' }
    }
    $program = $words[0]
    $rest = @()
    if ($words.Count -gt 1) { $rest = $words[1..($words.Count - 1)] }
    $out = & $program __complete -- @rest 2>$null
    $directive = 4
    $candidates = @()
    foreach ($entry in $out) {
        if ($entry.StartsWith(':')) { $directive = [int]$entry.Substring(1) } else { $candidates += $entry }
    }
    if ($candidates.Count -eq 0 -and $directive -eq 0) { return }
    foreach ($c in $candidates) {
        [System.Management.Automation.CompletionResult]::new($c, $c, 'ParameterValue', $c)
    }
}
"#;

/// Bash: the words up to the cursor split on blanks (not on `=` and `:` as `COMP_WORDS` is),
/// and the candidates cut back to the part bash replaces.
const BASH: &str = r#"# bash completion for @BINARY@ (and kubectl-isg): source it, or put it in
# /etc/bash_completion.d/. Every word is completed by `@BINARY@ __complete`.
@FUNCTION@() {
    local line=${COMP_LINE:0:COMP_POINT} out entry directive=4
    local -a words candidates=()
    read -ra words <<< "$line"
    [[ $line =~ [[:space:]]$ ]] && words+=("")
    local cur=${words[${#words[@]}-1]} word=${COMP_WORDS[COMP_CWORD]}
    [[ $word == "=" || $word == ":" ]] && word=""
    local prefix=${cur%"$word"}
    out=$("${words[0]}" __complete -- "${words[@]:1}" 2>/dev/null) || return 0
    while IFS= read -r entry; do
        case $entry in
            :*) directive=${entry#:} ;;
            *) candidates+=("${entry#"$prefix"}") ;;
        esac
    done <<< "$out"
    COMPREPLY=("${candidates[@]}")
    if [[ ${#COMPREPLY[@]} -eq 0 && $directive == 0 ]]; then
        mapfile -t COMPREPLY < <(compgen -f -- "$word")
    fi
}
complete -F @FUNCTION@ @BINARY@ kubectl-isg
"#;

/// kubectl's plugin completion runs `kubectl_complete-<plugin>` with the words after the
/// plugin's name and reads cobra's output format.
const KUBECTL: &str = r#"#!/bin/sh
# Completion of `kubectl isg` for kubectl 1.26 or later: save as an executable file named
# kubectl_complete-isg on PATH, beside @PLUGIN@.
if command -v @PLUGIN@ >/dev/null 2>&1; then
    exec @PLUGIN@ __complete -- "$@"
fi
exec @BINARY@ __complete -- "$@"
"#;

/// Prints the candidates and the directive line; never fails (a Tab wants nothing, not an error).
pub(crate) async fn complete(args: CompleteArgs) {
    let mut words = args.words;
    // PowerShell before 7.3 drops an empty argument: its script sends `""` for one.
    if let Some(last) = words.last_mut().filter(|w| *w == "\"\"") {
        last.clear();
    }
    let (candidates, directive) = candidates(&Cli::command(), &words).await;
    let out: String = candidates.iter().map(|c| format!("{c}\n")).chain([format!(":{directive}\n")]).collect();
    let _ = std::io::stdout().write_all(out.as_bytes());
}

/// What the words before the completed one say: subcommand, pending flag, cluster flags.
#[derive(Debug, Default)]
struct Parsed {
    path: Vec<String>,
    /// The flag (its id) expecting a value in the completed word.
    pending: Option<String>,
    positionals: usize,
    kubeconfig: Option<String>,
    context: Option<String>,
    namespace: Option<String>,
    config_map: Option<String>,
    key: Option<String>,
    kind: Option<String>,
}

/// The flag `word` names among `command`'s (and the root's global ones): `--long`, `-s`.
fn find_arg<'a>(command: &'a Command, root: &'a Command, word: &str) -> Option<&'a Arg> {
    let matches = |a: &&Arg| match word.strip_prefix("--") {
        Some(long) => a.get_long() == Some(long),
        None => word
            .strip_prefix('-')
            .is_some_and(|s| s.len() == 1 && a.get_short().map(String::from).as_deref() == Some(s)),
    };
    command.get_arguments().find(matches).or_else(|| root.get_arguments().filter(|a| a.is_global_set()).find(matches))
}

fn parse<'a>(root: &'a Command, before: &[String]) -> (&'a Command, Parsed) {
    let mut command = root;
    let mut parsed = Parsed::default();
    let mut words = before.iter();
    let mut only_positionals = false;
    while let Some(word) = words.next() {
        if !only_positionals && word == "--" {
            only_positionals = true;
        } else if !only_positionals && word.starts_with('-') && word.len() > 1 {
            let (flag, inline) = match word.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_owned())),
                None => (word.as_str(), None),
            };
            let Some(arg) = find_arg(command, root, flag) else { continue };
            if !matches!(arg.get_action(), ArgAction::Set | ArgAction::Append) {
                continue;
            }
            let Some(value) = inline.or_else(|| words.next().cloned()) else {
                parsed.pending = Some(arg.get_id().to_string());
                break;
            };
            let slot = match arg.get_id().as_str() {
                "kubeconfig" => &mut parsed.kubeconfig,
                "context" => &mut parsed.context,
                "namespace" => &mut parsed.namespace,
                "config_map" => &mut parsed.config_map,
                "key" => &mut parsed.key,
                "kind" => &mut parsed.kind,
                _ => continue,
            };
            *slot = Some(value);
        } else if let Some(sub) = (!only_positionals).then(|| command.find_subcommand(word)).flatten() {
            parsed.path.push(sub.get_name().to_owned());
            command = sub;
        } else {
            parsed.positionals += 1;
        }
    }
    (command, parsed)
}

/// The candidates for the last of `words`, filtered by what it starts with, and the directive.
async fn candidates(root: &Command, words: &[String]) -> (Vec<String>, u8) {
    let (current, before) = match words.split_last() {
        Some((current, before)) => (current.as_str(), before),
        None => ("", &[][..]),
    };
    let (command, parsed) = parse(root, before);
    let keep = |all: Vec<String>, prefix: &str| all.into_iter().filter(|c| c.starts_with(prefix)).collect::<Vec<_>>();
    if let Some(id) = parsed.pending.clone() {
        let arg = command.get_arguments().chain(root.get_arguments()).find(|a| a.get_id() == id.as_str());
        return match arg {
            Some(arg) => values(arg, &parsed, current).await,
            None => (Vec::new(), NO_FILES),
        };
    }
    if let Some((flag, typed)) = current.split_once('=').filter(|(flag, _)| flag.starts_with("--")) {
        let Some(arg) = find_arg(command, root, flag) else { return (Vec::new(), NO_FILES) };
        let (found, directive) = values(arg, &parsed, typed).await;
        return (found.into_iter().map(|v| format!("{flag}={v}")).collect(), directive);
    }
    if current.starts_with('-') {
        let flags = command
            .get_arguments()
            .chain(root.get_arguments().filter(|a| a.is_global_set()))
            .filter(|a| !a.is_hide_set())
            .flat_map(|a| {
                let long = a.get_long().map(|l| format!("--{l}"));
                let short = a.get_short().map(|s| format!("-{s}"));
                long.into_iter().chain(short)
            })
            .collect();
        return (keep(flags, current), NO_FILES);
    }
    if command.has_subcommands() {
        let subs = command.get_subcommands().filter(|s| !s.is_hide_set()).map(|s| s.get_name().to_owned()).collect();
        return (keep(subs, current), NO_FILES);
    }
    if parsed.path.last().map(String::as_str) == Some("explain") && parsed.positionals == 0 {
        return (keep(objects(&parsed).await, current), NO_FILES);
    }
    match command.get_positionals().nth(parsed.positionals) {
        Some(arg) => values(arg, &parsed, current).await,
        None => (Vec::new(), FILES),
    }
}

/// The values of flag `arg`: its enumerated ones, or what the cluster has for it.
async fn values(arg: &Arg, parsed: &Parsed, typed: &str) -> (Vec<String>, u8) {
    let keep = |all: Vec<String>| all.into_iter().filter(|c| c.starts_with(typed)).collect::<Vec<_>>();
    let enumerated: Vec<String> =
        arg.get_possible_values().iter().filter(|v| !v.is_hide_set()).map(|v| v.get_name().to_owned()).collect();
    if !enumerated.is_empty() {
        return (keep(enumerated), NO_FILES);
    }
    let id = arg.get_id().as_str();
    let found = match id {
        "namespace" | "leader_election_namespace" | "publish_pods_namespace" | "probe_namespace" => {
            namespaces(parsed).await
        }
        "probe" => ingress_names(parsed, true).await,
        "context" => crate::client::context_names(parsed.kubeconfig.as_deref().map(Path::new)).unwrap_or_default(),
        "policy" => policies(parsed).await,
        "kubeconfig" | "config" | "file" | "tls_cert" | "tls_key" | "client_ca" => return (Vec::new(), FILES),
        _ if matches!(arg.get_value_hint(), clap::ValueHint::FilePath | clap::ValueHint::AnyPath) => {
            return (Vec::new(), FILES);
        }
        _ => Vec::new(),
    };
    (keep(found), NO_FILES)
}

async fn client(parsed: &Parsed) -> Option<kube::Client> {
    let target = Target { kubeconfig: parsed.kubeconfig.as_ref().map(Into::into), context: parsed.context.clone() };
    crate::client::connect_within(&target, CLUSTER_TIMEOUT).await.ok()
}

async fn within<T>(call: impl Future<Output = kube::Result<T>>) -> Option<T> {
    tokio::time::timeout(CLUSTER_TIMEOUT, call).await.ok()?.ok()
}

async fn namespaces(parsed: &Parsed) -> Vec<String> {
    let Some(client) = client(parsed).await else { return Vec::new() };
    let list = within(Api::<Namespace>::all(client).list_metadata(&ListParams::default())).await;
    list.map(|l| l.items.into_iter().filter_map(|n| n.metadata.name).collect()).unwrap_or_default()
}

/// Ingress names for `explain` and `--probe`: in `--namespace` as NAME (unless `qualified`),
/// else every namespace's as NAMESPACE/NAME.
async fn ingress_names(parsed: &Parsed, qualified: bool) -> Vec<String> {
    let Some(client) = client(parsed).await else { return Vec::new() };
    let api = match &parsed.namespace {
        Some(ns) => Api::<Ingress>::namespaced(client, ns),
        None => Api::all(client),
    };
    let list = within(api.list_metadata(&ListParams::default())).await;
    let items = list.map(|l| l.items).unwrap_or_default();
    items.into_iter().filter_map(|i| name(&i.metadata, parsed, qualified)).collect()
}

fn name(meta: &kube::api::ObjectMeta, parsed: &Parsed, qualified: bool) -> Option<String> {
    let name = meta.name.clone()?;
    let qualify = qualified || parsed.namespace.is_none();
    Some(if qualify { format!("{}/{name}", meta.namespace.as_deref()?) } else { name })
}

/// `explain`'s object: Ingresses, and Gateways (`gateway/NAMESPACE/NAME`) when served.
async fn objects(parsed: &Parsed) -> Vec<String> {
    let mut found = Vec::new();
    if parsed.kind.as_deref() != Some("gateway") {
        found = ingress_names(parsed, false).await;
    }
    if parsed.kind.as_deref().is_none_or(|k| k == "gateway")
        && let Some(client) = client(parsed).await
    {
        let gvk = GroupVersionKind::gvk(crate::kind::gateway::GROUP, "v1", "Gateway");
        let resource = ApiResource::from_gvk(&gvk);
        let api: Api<DynamicObject> = match &parsed.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &resource),
            None => Api::all_with(client, &resource),
        };
        if let Some(list) = within(api.list_metadata(&ListParams::default())).await {
            found.extend(
                list.items.iter().filter_map(|g| name(&g.metadata, parsed, true)).map(|n| format!("gateway/{n}")),
            );
        }
    }
    found
}

/// The policy names in cutover's `--config-map` (its `--key`, default `config.yaml`).
async fn policies(parsed: &Parsed) -> Vec<String> {
    let Some(config_map) = &parsed.config_map else { return Vec::new() };
    let Some(client) = client(parsed).await else { return Vec::new() };
    let (namespace, name) = match config_map.split_once('/') {
        Some((ns, name)) => (ns.to_owned(), name.to_owned()),
        None => (parsed.namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned()), config_map.clone()),
    };
    let Some(found) = within(Api::<ConfigMap>::namespaced(client, &namespace).get(&name)).await else {
        return Vec::new();
    };
    let key = parsed.key.as_deref().unwrap_or(crate::cutover::DEFAULT_KEY);
    let Some(text) = found.data.as_ref().and_then(|d| d.get(key)) else { return Vec::new() };
    let Ok(config) = serde_norway::from_str::<serde_json::Value>(text) else { return Vec::new() };
    let listed = config["policies"].as_array().cloned().unwrap_or_default();
    listed.iter().filter_map(|p| p["name"].as_str().map(str::to_owned)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        let mut words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        if line.ends_with(' ') {
            words.push(String::new());
        }
        words
    }

    /// Completion of what needs no cluster.
    fn offline(line: &str) -> (Vec<String>, u8) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(candidates(&Cli::command(), &words(line)))
    }

    #[test]
    fn subcommands_flags_and_enumerated_values() {
        let (subs, directive) = offline("");
        assert!(subs.contains(&"check".to_owned()) && subs.contains(&"completion".to_owned()), "{subs:?}");
        assert!(!subs.iter().any(|s| s.starts_with("__")), "the hidden one is not offered: {subs:?}");
        assert_eq!(directive, NO_FILES);
        assert_eq!(offline("ch").0, ["check"]);
        let (flags, _) = offline("doctor --w");
        assert!(
            flags.contains(&"--wait".to_owned()) && flags.contains(&"--webhook-configuration".to_owned()),
            "{flags:?}"
        );
        assert!(offline("doctor --").0.contains(&"--log-format".to_owned()), "global flags too");
        assert_eq!(offline("doctor -o ").0, ["table", "json", "yaml"]);
        assert_eq!(offline("version --output=y").0, ["--output=yaml"]);
        assert_eq!(offline("completion ").0, ["bash", "zsh", "fish", "powershell", "kubectl"]);
        assert_eq!(offline("check --kubeconfig ").1, FILES, "a path: the shell offers files");
    }

    #[test]
    fn each_script_is_generated() {
        let bash = script(Shell::Bash);
        assert!(bash.contains("complete -F _ingress_status_guard ingress-status-guard kubectl-isg"), "{bash}");
        assert!(script(Shell::Kubectl).contains("exec kubectl-isg __complete -- \"$@\""));
        // Each shell asks `__complete`, so each completes from the cluster as bash does.
        for shell in [Shell::Zsh, Shell::Fish, Shell::Powershell] {
            let text = script(shell);
            assert!(text.contains("__complete --"), "{shell:?}: {text}");
            assert!(!text.contains("@BINARY@") && !text.contains("@FUNCTION@"), "{shell:?}: a placeholder left");
        }
        assert!(script(Shell::Zsh).starts_with("#compdef ingress-status-guard kubectl-isg\n"));
        assert!(script(Shell::Fish).contains("complete -c kubectl-isg -f -a '(___ingress_status_guard_complete)'"));
        assert!(
            script(Shell::Powershell)
                .contains("Register-ArgumentCompleter -Native -CommandName 'ingress-status-guard', 'kubectl-isg'")
        );
    }
}
