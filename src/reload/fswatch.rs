//! Noticing that files mounted from a Secret or ConfigMap may have changed: their directories
//! are watched, since the kubelet renames a `..data` symlink and the files themselves never
//! change; a poll covers missed events and network filesystems. A wake-up only says "look again".

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

/// Events come in bursts (the kubelet's swap is several renames); settle before reading.
pub(crate) const SETTLE: Duration = Duration::from_millis(100);

/// Wakes its owner when a watched directory changes, or every poll interval.
pub(crate) struct Changes {
    events: mpsc::Receiver<()>,
    ticker: tokio::time::Interval,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Changes {
    /// Watches the directories of `files` (`what` names them in log lines), inside a tokio
    /// runtime. Without inotify it only polls.
    pub(crate) fn watch(files: &[&Path], poll: Duration, what: &str) -> Changes {
        let (tx, events) = mpsc::channel::<()>(1);
        let watcher = match notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // Our own reads show up as Access events; only changes matter.
            if event.is_ok_and(|e| !matches!(e.kind, EventKind::Access(_))) {
                let _ = tx.try_send(());
            }
        }) {
            Ok(mut watcher) => {
                for dir in directories(files) {
                    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
                        tracing::warn!(directory = %dir.display(), error = %e, "cannot watch the {what} directory; polling only");
                    }
                }
                Some(watcher)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the {what} files; polling only");
                None
            }
        };
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + poll, poll);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Changes { events, ticker, _watcher: watcher }
    }

    /// Returns at the next filesystem event (after it settled) or poll tick.
    pub(crate) async fn next(&mut self) {
        tokio::select! {
            Some(()) = self.events.recv() => tokio::time::sleep(SETTLE).await,
            _ = self.ticker.tick() => {}
        }
        while self.events.try_recv().is_ok() {}
    }
}

/// The directories to watch: where the files (or the symlinks naming them) live.
fn directories(files: &[&Path]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = files
        .iter()
        .map(|f| match f.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_of_files() {
        let files = [Path::new("/a/b/c.pem"), Path::new("/a/b/d.pem"), Path::new("e.yaml"), Path::new("/x/y")];
        let want: Vec<PathBuf> = ["/a/b", ".", "/x"].iter().map(PathBuf::from).collect::<Vec<_>>();
        let mut want = want;
        want.sort();
        assert_eq!(directories(&files), want);
    }

    #[tokio::test]
    async fn wakes_on_a_symlink_swap() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.yaml");
        std::fs::write(&file, "a").unwrap();
        let mut changes = Changes::watch(&[&file], Duration::from_secs(3600), "test");
        // The kubelet's swap: a new target, then a rename over the link.
        std::fs::write(dir.path().join("new"), "b").unwrap();
        std::os::unix::fs::symlink(dir.path().join("new"), dir.path().join("..tmp")).unwrap();
        std::fs::rename(dir.path().join("..tmp"), &file).unwrap();
        let woke = tokio::time::timeout(Duration::from_secs(20), changes.next()).await;
        assert!(woke.is_ok(), "no wake-up for a rename in the watched directory");
    }
}
