//! The import order docs/architecture.md states, held against the code: a module of `src/`
//! imports only the modules above it in that page's table, no files of one module import each
//! other in a circle, `src/` has at most 20 top-level modules, each in the table once, and no
//! file of `src/` is over 600 lines. A row may also name sub-module patterns (`kind/*/admission`):
//! a file is at the row of the longest pattern matching its module path (`*` is one segment, a
//! plain name is a top-level module and everything under it), so a kind's impl of a higher
//! layer's trait sits at that layer. Reads the source as text (every `use` tree and every
//! `crate::`/`super::`/`self::` or child-module path outside comments), so it needs no build of
//! anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_MODULES: usize = 20;
const MAX_LINES: usize = 600;

/// The table's rows, top first: each row's module names and sub-module patterns (`policy/`
/// read as `policy`, `kind/*/admission` as it is).
fn layers() -> Vec<Vec<String>> {
    let page = std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let table = page.split("| module | owns |").nth(1).expect("the module table of docs/architecture.md");
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let first = row.split('|').nth(1).unwrap_or_default();
            first.split('`').skip(1).step_by(2).map(|m| m.trim_end_matches('/').to_owned()).collect()
        })
        .collect()
}

/// Whether `pattern` (`kind/*/admission`, or a plain `kind`) names `module` or a module under it.
fn matches(pattern: &str, module: &[String]) -> bool {
    let segments: Vec<&str> = pattern.split('/').collect();
    segments.len() <= module.len() && segments.iter().zip(module).all(|(p, m)| *p == "*" || p == m)
}

/// Where a file sits in the table: the longest pattern that matches its module path, and its row.
fn placed<'l>(module: &[String], level: &'l BTreeMap<String, usize>) -> Option<(&'l str, usize)> {
    level
        .iter()
        .filter(|(pattern, _)| matches(pattern, module))
        .max_by_key(|(pattern, _)| pattern.split('/').count())
        .map(|(pattern, row)| (pattern.as_str(), *row))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file of `src/` with its module path (`src/check/fetch.rs` is `["check", "fetch"]`).
fn files() -> Vec<(Vec<String>, PathBuf)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src/") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = root().join("src");
    let mut paths = Vec::new();
    walk(&src, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&src).ok()?.with_extension("");
            let module: Vec<String> = relative.iter().map(|c| c.to_string_lossy().into_owned()).collect();
            (module != ["lib"] && module != ["main"]).then_some((module, path))
        })
        .collect()
}

/// The files that only tests compile (`#[cfg(test)] mod x;` in their parent, or inside one):
/// they may reach any module, as the tests in `tests/` do.
fn test_only(files: &[(Vec<String>, PathBuf)]) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for (module, path) in files {
        let t = tokens(&code(&std::fs::read_to_string(path).unwrap()));
        let cfg_test = ["#", "[", "cfg", "(", "test", ")", "]"];
        for (i, _) in t.iter().enumerate().filter(|(i, _)| t[*i..].starts_with(&cfg_test.map(String::from))) {
            let mut j = i + cfg_test.len();
            while t.get(j).is_some_and(|s| s == "#") {
                j += t[j..].iter().position(|s| s == "]").map_or(t.len(), |p| p + 1);
            }
            if t.get(j).is_some_and(|s| s == "mod")
                && let Some(name) = t.get(j + 1)
            {
                let mut child = module.clone();
                child.push(name.clone());
                out.insert(child);
            }
        }
    }
    let all: Vec<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    all.into_iter().filter(|m| out.iter().any(|t| m.starts_with(t))).collect()
}

/// The code of a file without its comments (doc links name modules without importing them)
/// and without an inline `#[cfg(test)] mod tests { … }` at its end (tests reach anything).
fn code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines
                    .get(i + 1)
                    .is_some_and(|next| next.trim_start().starts_with("mod ") && next.trim_end().ends_with('{'))
        })
        .unwrap_or(lines.len());
    lines[..end].iter().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut word = c.to_string();
            while let Some(&n) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                word.push(n);
                chars.next();
            }
            out.push(word);
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.push("::".into());
        } else if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    out
}

/// The paths one `use` tree names (`a::{b, c::d}` is `a::b` and `a::c::d`), from `at` to the
/// end of the tree; returns where it ended.
fn use_tree(t: &[String], mut at: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    while at < t.len() {
        match t[at].as_str() {
            "::" => at += 1,
            "{" => {
                at += 1;
                while at < t.len() && t[at] != "}" {
                    at = use_tree(t, at, &path, out);
                    if t.get(at).is_some_and(|s| s == ",") {
                        at += 1;
                    }
                }
                return at + 1;
            }
            "," | "}" | ";" => break,
            "as" => at += 2,
            word => {
                path.push(word.to_owned());
                at += 1;
            }
        }
    }
    out.push(path);
    at
}

/// Every module path a file names: its `use` trees and its inline `crate::`/`super::` paths.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let t = tokens(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if t[i] == "use" {
            i = use_tree(&t, i + 1, &[], &mut out);
        } else if (t[i] == "crate" || t[i] == "super") && t.get(i + 1).is_some_and(|s| s == "::") {
            let mut path = vec![t[i].clone()];
            let mut j = i + 1;
            while t.get(j).is_some_and(|s| s == "::")
                && t.get(j + 1).is_some_and(|s| s.chars().all(|c| c.is_alphanumeric() || c == '_'))
            {
                path.push(t[j + 1].clone());
                j += 2;
            }
            out.push(path);
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// The file module a path leads to from `from` (the longest prefix that is a file), if it
/// leaves through `crate::` or `super::`.
fn target(from: &[String], path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let child = |name: &String| modules.contains(&[from, std::slice::from_ref(name)].concat());
    let (mut at, rest): (Vec<String>, &[String]) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("super") => (from[..from.len().saturating_sub(1)].to_vec(), &path[1..]),
        Some("self") => (from.to_vec(), &path[1..]),
        // A path that starts at a child module (`use explain::explain;`) is relative to `from`.
        Some(_) if child(&path[0]) => (from.to_vec(), path),
        _ => return None,
    };
    for segment in rest {
        match segment.as_str() {
            "super" => {
                at.pop();
            }
            "self" => {}
            name => {
                let mut next = at.clone();
                next.push(name.to_owned());
                if !modules.contains(&next) {
                    break;
                }
                at = next;
            }
        }
    }
    Some(at)
}

/// The modules `src/lib.rs` declares.
fn top_level_modules() -> Vec<String> {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    code(&lib)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ").or_else(|| l.trim().strip_prefix("pub mod ")))
        .map(|m| m.trim_end_matches(';').to_owned())
        .collect()
}

#[test]
fn src_has_at_most_20_top_level_modules() {
    let declared = top_level_modules();
    assert!(
        declared.len() <= MAX_MODULES,
        "src/ has {} top-level modules, at most {MAX_MODULES}: {declared:?}",
        declared.len()
    );
}

#[test]
fn every_module_imports_only_the_modules_above_it_in_the_architecture_table() {
    let layers = layers();
    let mut level = BTreeMap::new();
    for (i, row) in layers.iter().enumerate() {
        for module in row {
            assert!(level.insert(module.clone(), i).is_none(), "{module} is in the table twice");
        }
    }
    let declared = top_level_modules();
    let declared_set: BTreeSet<&String> = declared.iter().collect();
    let tabled: BTreeSet<&String> = level.keys().filter(|m| !m.contains('/')).collect();
    let untabled: Vec<_> = declared_set.iter().filter(|m| !level.contains_key(**m)).collect();
    let stale: Vec<_> = tabled.iter().filter(|m| !declared_set.contains(**m)).collect();
    assert!(
        untabled.is_empty() && stale.is_empty(),
        "modules not in the table: {untabled:?}; in the table only: {stale:?}"
    );

    let files = files();
    let patterns: Vec<&String> = level.keys().filter(|p| p.contains('/')).collect();
    let unmatched: Vec<_> = patterns.iter().filter(|p| !files.iter().any(|(m, _)| matches(p, m))).collect();
    assert!(unmatched.is_empty(), "patterns of the table that match no file of src/: {unmatched:?}");
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let tests = test_only(&files);
    let mut forbidden = Vec::new();
    for (module, path) in files.iter().filter(|(m, _)| !tests.contains(m)) {
        let Some((own, own_row)) = placed(module, &level) else { continue };
        let text = code(&std::fs::read_to_string(path).unwrap());
        for named in named_paths(&text) {
            let Some(to) = target(module, &named, &modules).filter(|to| !to.is_empty()) else { continue };
            let Some((other, row)) = placed(&to, &level) else { continue };
            // Within one module, or above it; a file a pattern places in a row is a part of
            // that row's module, so it may import it (`kind/*/admission` imports
            // `admission_policy`).
            let allowed = other == own || row < own_row || (row == own_row && own.contains('/'));
            if !allowed {
                forbidden.push(format!(
                    "{} imports {} ({other} is not above {own} in docs/architecture.md's table)",
                    path.strip_prefix(root()).unwrap().display(),
                    named.join("::"),
                ));
            }
        }
    }
    forbidden.sort();
    forbidden.dedup();
    assert!(forbidden.is_empty(), "imports the table forbids:\n{}", forbidden.join("\n"));
}

#[test]
fn no_files_of_a_module_import_each_other_in_a_circle() {
    let files = files();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    // A parent and its parts always name each other (`super::`, `mod`); the circles that
    // matter run between files neither of which contains the other.
    let tests = test_only(&files);
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, path) in files.iter().filter(|(m, _)| !tests.contains(m)) {
        let text = code(&std::fs::read_to_string(path).unwrap());
        for named in named_paths(&text) {
            let Some(to) = target(module, &named, &modules) else { continue };
            if to.is_empty() || to.starts_with(module) || module.starts_with(&to) {
                continue;
            }
            edges.entry(module.clone()).or_default().insert(to);
        }
    }
    let cycle = find_cycle(&edges);
    assert!(cycle.is_none(), "files import each other in a circle: {}", cycle.unwrap_or_default().join(" -> "));
}

/// One circle of the graph, as its files' module paths, if it has one.
fn find_cycle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    fn visit(
        node: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        done: &mut BTreeSet<Vec<String>>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(start) = stack.iter().position(|n| n == node) {
            return Some(stack[start..].iter().chain([node]).map(|m| m.join("::")).collect());
        }
        if !done.insert(node.clone()) {
            return None;
        }
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|n| visit(n, edges, &mut done, &mut Vec::new()))
}

#[test]
fn no_file_of_src_is_over_600_lines() {
    let long: Vec<String> = files()
        .into_iter()
        .filter_map(|(_, path)| {
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", path.strip_prefix(root()).unwrap().display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

#[test]
fn the_reader_sees_what_a_use_tree_names() {
    let paths = named_paths("use crate::{a::b, c::{d, e::f as g}}; fn x() { super::h::i(); }");
    let want =
        [vec!["crate", "a", "b"], vec!["crate", "c", "d"], vec!["crate", "c", "e", "f"], vec!["super", "h", "i"]];
    assert_eq!(paths, want.map(|p| p.iter().map(ToString::to_string).collect::<Vec<_>>()));
}

#[test]
fn a_file_sits_at_the_longest_pattern_that_matches_it() {
    let path = |p: &str| p.split('/').map(str::to_owned).collect::<Vec<_>>();
    assert!(matches("kind/*/admission", &path("kind/ingress/admission")));
    assert!(matches("kind/*/admission", &path("kind/gateway/admission/cel")));
    assert!(!matches("kind/*/admission", &path("kind/ingress")));
    assert!(matches("kind", &path("kind/ingress/admission")));
    let level = BTreeMap::from([("kind".to_owned(), 5), ("kind/*/admission".to_owned(), 10)]);
    assert_eq!(placed(&path("kind/ingress/admission"), &level), Some(("kind/*/admission", 10)));
    assert_eq!(placed(&path("kind/ingress/bounded"), &level), Some(("kind", 5)));
    assert_eq!(placed(&path("policy"), &level), None);
}

#[test]
fn a_path_from_a_child_module_leads_to_that_child() {
    let modules: BTreeSet<Vec<String>> =
        [vec!["check".to_owned()], vec!["check".to_owned(), "explain".to_owned()]].into_iter().collect();
    let from = ["check".to_owned()];
    let named = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(target(&from, &named("explain::explain"), &modules), Some(named("check::explain")));
    assert_eq!(target(&from, &named("self::explain"), &modules), Some(named("check::explain")));
    assert_eq!(target(&from, &named("serde::Serialize"), &modules), None);
}
