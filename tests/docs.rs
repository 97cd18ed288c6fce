//! The documentation's links: every relative link and every `#anchor` in README.md,
//! BENCHMARKS.md and docs/*.md resolves. A link's file must exist (relative to the page that
//! links it), and its anchor must be the slug of a heading of the target page as GitHub makes
//! it: lowercase, each space a `-`, punctuation other than `-` and `_` dropped (so inline code's
//! backticks go), a link in a heading read as its text, and the second and later headings of one
//! slug suffixed `-1`, `-2`, ... Fenced code blocks and inline code spans are not Markdown, so
//! nothing in them is a heading or a link. Also: README.md stays a front page of at most 300
//! lines. Only std, no network: a broken link fails naming the file, the line and the link.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

/// The longest README.md may be: a newcomer's five-minute read; the reference is in docs/.
const README_MAX_LINES: usize = 300;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, BENCHMARKS.md and every docs/*.md, relative to the repository root.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md"), PathBuf::from("BENCHMARKS.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|entry| PathBuf::from("docs").join(entry.expect("docs/ entry").file_name()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The lines of `text` that are Markdown rather than code: (1-based line number, line) for
/// every line outside fenced code blocks (``` or ~~~, closed by a fence of the same character
/// at least as long, indented or not, as inside a list item).
fn markdown_lines(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let opener = ['`', '~'].into_iter().find_map(|c| {
            let run = trimmed.chars().take_while(|&x| x == c).count();
            (run >= 3).then_some((c, run))
        });
        match (fence, opener) {
            (None, Some(open)) => fence = Some(open),
            (Some((c, len)), Some((c2, len2))) if c == c2 && len2 >= len && trimmed[len2..].trim().is_empty() => {
                fence = None;
            }
            (None, None) => lines.push((index + 1, line)),
            (Some(_), _) => {}
        }
    }
    lines
}

/// `line` without its inline code spans (a run of backticks up to the next run of the same
/// length); an unmatched run is kept as text, as CommonMark does.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let run = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + run..];
        let closing = find_run(after, run);
        match closing {
            Some(end) => rest = &after[end + run..],
            None => {
                out.push_str(&rest[start..start + run]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where a run of exactly `run` backticks starts in `text`.
fn find_run(text: &str, run: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            let len = bytes[i..].iter().take_while(|&&b| b == b'`').count();
            if len == run {
                return Some(i);
            }
            i += len;
        } else {
            i += 1;
        }
    }
    None
}

/// The text of an ATX heading (`# Title`, up to six `#`, at most three spaces of indent), or
/// None if `line` is not one.
fn heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let hashes = rest.chars().take_while(|&c| c == '#').count();
    if hashes == 0 || hashes > 6 {
        return None;
    }
    let text = &rest[hashes..];
    if !(text.is_empty() || text.starts_with(' ') || text.starts_with('\t')) {
        return None;
    }
    let text = text.trim();
    // A closing sequence of `#`s (preceded by a space) is not part of the heading.
    let text = match text.trim_end_matches('#') {
        stripped if stripped.is_empty() || stripped.ends_with(' ') => stripped.trim_end(),
        _ => text,
    };
    Some(text)
}

/// `text` with each link `[label](target)` replaced by its label.
fn link_labels(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](").and_then(|close| after[close + 2..].find(')').map(|end| (close, close + 2 + end))) {
            Some((close, end)) => {
                out.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// GitHub's anchor for a heading's text (before de-duplication).
fn slug(text: &str) -> String {
    // Inline code's backticks go, its text stays.
    let text = link_labels(&text.replace('`', ""));
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor of a page: its headings' slugs, duplicates suffixed `-1`, `-2`, ...
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = HashSet::new();
    for (_, line) in markdown_lines(text) {
        let Some(heading) = heading(line) else { continue };
        let base = slug(heading);
        let mut candidate = base.clone();
        while anchors.contains(&candidate) {
            let count = seen.entry(base.clone()).or_insert(0);
            *count += 1;
            candidate = format!("{base}-{count}");
        }
        anchors.insert(candidate);
    }
    anchors
}

/// The link targets of a page: (line, target) for every inline link or image `[..](target)`
/// and every reference definition `[label]: target`, outside code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    for (number, line) in markdown_lines(text) {
        let line = without_code_spans(line);
        let trimmed = line.trim_start();
        // `[label]: target`: the label's `]` is the line's first, and a `:` follows it.
        if let Some(label_end) = trimmed.strip_prefix('[').and_then(|label| label.find(']'))
            && let Some(definition) = trimmed[label_end + 2..].strip_prefix(':')
        {
            if let Some(target) = definition.split_whitespace().next() {
                links.push((number, target.to_string()));
            }
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(|c: char| c == ')' || c.is_whitespace()).unwrap_or(after.len());
            let target = after[..end].trim_start_matches('<').trim_end_matches('>');
            if !target.is_empty() {
                links.push((number, target.to_string()));
            }
            rest = &after[end..];
        }
    }
    links
}

/// `base/relative` with `.` and `..` folded, so `docs/../README.md` is `README.md`.
fn join(base: &Path, relative: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for component in base.join(relative).components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every broken link of `pages`, as `file:line: link: why`, in page order.
fn broken_links(pages: &[PathBuf]) -> Vec<String> {
    let mut anchor_cache: BTreeMap<PathBuf, HashSet<String>> = BTreeMap::new();
    let mut broken = Vec::new();
    for page in pages {
        let text = read(page);
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() { page.clone() } else { join(page.parent().unwrap_or(Path::new("")), path) };
            let why = if !root().join(&file).exists() {
                Some(format!("{} does not exist", file.display()))
            } else if let Some(anchor) = anchor.filter(|_| file.extension().is_some_and(|ext| ext == "md")) {
                let known = anchor_cache.entry(file.clone()).or_insert_with(|| anchors(&read(&file)));
                (!known.contains(anchor)).then(|| format!("no heading of {} has the anchor #{anchor}", file.display()))
            } else {
                None
            };
            if let Some(why) = why {
                broken.push(format!("{}:{line}: ({target}): {why}", page.display()));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let pages = pages();
    assert!(pages.len() > 3, "docs/*.md not found: {pages:?}");
    let broken = broken_links(&pages);
    assert!(broken.is_empty(), "{} broken link(s) in the docs:\n{}", broken.len(), broken.join("\n"));
}

/// A test file a page names (`tests/cluster/cutover/guide.rs`) exists: tests move, and a page
/// that says which test runs its commands must follow them.
#[test]
fn every_test_file_the_docs_name_exists() {
    let mut missing = Vec::new();
    for page in pages() {
        let text = read(&page);
        for (at, _) in text.match_indices("tests/") {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || "_-./".contains(c)) {
                continue;
            }
            let path: String =
                text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || "_-./".contains(*c)).collect();
            let path = path.trim_end_matches('.');
            if (path.ends_with(".rs") || path.ends_with(".sh")) && !root().join(path).exists() {
                missing.push(format!("{}: {path}", page.display()));
            }
        }
    }
    assert!(missing.is_empty(), "test files named by the docs that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn the_readme_is_a_front_page_of_at_most_300_lines() {
    let lines = read(Path::new("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move reference text into docs/ and link it"
    );
}

#[test]
fn slugs_follow_githubs_rules() {
    assert_eq!(
        slug("Gateway API: `publishGateway` and governed Gateways"),
        "gateway-api-publishgateway-and-governed-gateways"
    );
    assert_eq!(slug("Why throughput is below 85 % of the baseline"), "why-throughput-is-below-85--of-the-baseline");
    assert_eq!(slug("Ingress → Gateway API"), "ingress--gateway-api");
    assert_eq!(slug("Reconciler at 10,000 Ingresses (issue 10)"), "reconciler-at-10000-ingresses-issue-10");
    assert_eq!(slug("One scope: the webhook's"), "one-scope-the-webhooks");
    assert_eq!(slug("See [the guide](docs/migration.md) now"), "see-the-guide-now");
    assert_eq!(slug("snake_case and-dash"), "snake_case-and-dash");
    let page = "# A\n\n## Run\n\n```sh\n# Run\n```\n\n## Run\n\n### Run\n";
    let found = anchors(page);
    let expected: HashSet<String> = ["a", "run", "run-1", "run-2"].into_iter().map(String::from).collect();
    assert_eq!(found, expected, "a heading inside a code block is no heading; duplicates get -1, -2");
}

#[test]
fn links_outside_code_are_found_with_their_line() {
    let page = "See [a](a.md#x) and `[b](b.md)`.\n\n```\n[c](c.md)\n```\n![d](d.png \"title\")\n[e]: e.md\n";
    assert_eq!(links(page), vec![(1, "a.md#x".into()), (6, "d.png".into()), (7, "e.md".into())]);
}
