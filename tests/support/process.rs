//! Child processes (etcd, kube-apiserver, the webhook) that cannot outlive the test process.
//!
//! Every child is forked by one dedicated thread that lives as long as the test process and
//! gets `PR_SET_PDEATHSIG(SIGKILL)`: the kernel delivers that signal when the *thread* that
//! forked the child exits, so forking from short-lived test threads would kill the shared API
//! server at the end of the first test. If the test process dies in any way (panic, failed
//! assertion, `exit`, SIGKILL), the kernel kills the children. `Proc` also kills its child
//! when dropped, which covers per-test processes on panic.

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, Sender};
use std::thread;

type SpawnJob = (Command, Sender<io::Result<Child>>);

fn spawner() -> &'static Sender<SpawnJob> {
    static SPAWNER: OnceLock<Sender<SpawnJob>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (jobs, inbox) = mpsc::channel::<SpawnJob>();
        thread::Builder::new()
            .name("e2e-process-spawner".into())
            .spawn(move || {
                // Ends only when every sender is gone, and the static one never is.
                for (mut command, reply) in inbox {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("start the spawner thread");
        jobs
    })
}

/// A running child process whose stdout and stderr go to a log file.
pub(crate) struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

/// Starts `command` with its output appended to `log`.
pub(crate) fn spawn(name: &str, mut command: Command, log: &Path) -> io::Result<Proc> {
    let out = File::options().create(true).append(true).open(log)?;
    command.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls.
    #[allow(unsafe_code)] // pre_exec runs between fork and exec; prctl is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (reply, answer) = mpsc::channel();
    spawner().send((command, reply)).expect("the spawner thread is alive");
    let child = answer.recv().expect("the spawner thread answers")?;
    Ok(Proc { name: name.to_string(), child, log: log.to_path_buf() })
}

impl Proc {
    /// The exit status if the process has ended.
    /// The child's process id.
    #[allow(dead_code)] // used by benches/reconcile.rs
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub(crate) fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit; SIGKILL after that.
    #[allow(dead_code)] // not every test binary uses it
    pub(crate) fn terminate(&mut self, timeout: std::time::Duration) -> Option<ExitStatus> {
        if self.exited().is_none() {
            #[allow(unsafe_code)] // kill(2) on our own child's pid has no memory effects.
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM)
            };
        }
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        self.kill();
        None
    }

    pub(crate) fn log_path(&self) -> &Path {
        &self.log
    }

    /// The whole log, for assertions.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines of the log, for failure messages.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        format!(
            "--- last {} lines of {} ({}) ---\n{}",
            lines.min(all.len()),
            self.name,
            self.log.display(),
            all[all.len().saturating_sub(lines)..].join("\n")
        )
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}
