//! Build script: records the git revision the binary is built from, for `--version` and the
//! `ingress_status_guard_build_info` metric, as the `ISG_GIT_REVISION` compile-time variable.
//!
//! Order: the `ISG_GIT_REVISION` environment variable (the Dockerfile and scripts/image.sh pass
//! it in), else `git rev-parse` when this crate is the top of a git checkout, else "unknown" (a
//! source tarball, or a crate vendored inside someone else's repository).

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// A revision is a label value and a line of `--version`: short and plain, or not at all.
fn plain(revision: &str) -> bool {
    (1..=64).contains(&revision.len()) && revision.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

fn from_git(dir: &Path) -> Option<String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch it points at (a commit).
    for path in ["HEAD".to_owned(), git(dir, &["symbolic-ref", "-q", "HEAD"]).unwrap_or_default()] {
        if let Some(file) = git(dir, &["rev-parse", "--git-path", &path]).filter(|_| !path.is_empty()) {
            let file = dir.join(file);
            if file.exists() {
                println!("cargo:rerun-if-changed={}", file.display());
            }
        }
    }
    git(dir, &["rev-parse", "--short=12", "HEAD"])
}

fn main() {
    println!("cargo:rerun-if-env-changed=ISG_GIT_REVISION");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let revision = match std::env::var("ISG_GIT_REVISION") {
        Ok(r) if plain(&r) => r,
        Ok(r) if !r.is_empty() => {
            println!(
                "cargo:warning=ISG_GIT_REVISION={r:?} is not a plain revision (letters, digits, . _ -, up to 64); using \"unknown\""
            );
            "unknown".to_owned()
        }
        _ => from_git(Path::new(&dir)).filter(|r| plain(r)).unwrap_or_else(|| "unknown".to_owned()),
    };
    println!("cargo:rustc-env=ISG_GIT_REVISION={revision}");
}
