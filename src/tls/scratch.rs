//! The ephemeral CA's directory: created under `$TMPDIR` with an unpredictable name and mode
//! 0700, its file created fresh (never through a planted symlink), and removed when dropped.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

/// A private directory holding `ca.crt`; removed with its contents on drop.
pub(crate) struct CaDir {
    dir: tempfile::TempDir,
}

impl CaDir {
    /// Creates the directory in `parent` and writes `ca_pem` to `ca.crt` in it.
    pub(crate) fn create(parent: &Path, ca_pem: &str) -> std::io::Result<CaDir> {
        // A random name created with mkdir (fails if it exists) and mode 0700, so no other user
        // can pre-plant or read it.
        let mut builder = tempfile::Builder::new();
        builder.prefix("ingress-status-guard-");
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
        let dir = builder.tempdir_in(parent)?;
        let dir = CaDir { dir };
        write_new(&dir.ca(), ca_pem.as_bytes())?;
        Ok(dir)
    }

    pub(crate) fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }
}

/// Writes a file that must not exist yet: `create_new` is `O_CREAT|O_EXCL`, which fails on an
/// existing path, a symlink included, instead of writing through it.
fn write_new(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o644);
    options.open(path)?.write_all(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The directory itself, as the operator sees it: the CA file's parent.
    fn dir_of(ca: &CaDir) -> PathBuf {
        ca.ca().parent().expect("ca.crt lies in the directory").to_owned()
    }

    #[test]
    fn private_random_and_removed() {
        let parent = tempfile::tempdir().unwrap();
        let a = CaDir::create(parent.path(), "pem-a").unwrap();
        let b = CaDir::create(parent.path(), "pem-b").unwrap();
        assert_ne!(dir_of(&a), dir_of(&b));
        assert_eq!(std::fs::read_to_string(a.ca()).unwrap(), "pem-a");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(std::fs::metadata(dir_of(&a)).unwrap().permissions().mode() & 0o777, 0o700);
        }
        let dir = dir_of(&a);
        drop(a);
        assert!(!dir.exists(), "removed on drop");
    }

    #[cfg(unix)]
    #[test]
    fn planted_symlink_is_not_followed() {
        let scratch = tempfile::tempdir().unwrap();
        let target = scratch.path().join("victim");
        std::fs::write(&target, "precious").unwrap();
        let planted = scratch.path().join("ca.crt");
        std::os::unix::fs::symlink(&target, &planted).unwrap();
        let err = write_new(&planted, b"attacker-controlled").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    }
}
