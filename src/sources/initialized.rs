//! Start-up readiness of the watches, in kubert's `initialized` pattern: each watch drops its
//! [`Handle`] once its first list has been read (or when it stops or dies). Unlike kubert's, it
//! latches: handles given out later are inert, so a reload that adds a watch does not take a
//! serving webhook out of its endpoints.

use std::sync::{Arc, Mutex};

/// Handles given out and not yet dropped; `None` once initialized (latched).
type Count = Mutex<Option<usize>>;

/// Hands out [`Handle`]s and says whether all have been dropped; clones share one count.
#[derive(Debug, Clone)]
pub(crate) struct Initialize(Arc<Count>);

impl Default for Initialize {
    fn default() -> Self {
        Initialize(Arc::new(Mutex::new(Some(0))))
    }
}

/// Held by one watch until its first list; dropping it is the signal.
#[derive(Debug)]
#[must_use = "dropping the handle says the watch has listed"]
pub(crate) struct Handle(Option<Arc<Count>>);

impl Initialize {
    /// A handle to drop once the caller has read what it watches; inert once initialized.
    pub(crate) fn handle(&self) -> Handle {
        let mut outstanding = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &mut *outstanding {
            Some(n) => {
                *n += 1;
                Handle(Some(self.0.clone()))
            }
            None => Handle(None),
        }
    }

    /// Whether no handle is outstanding. The answer latches when first observed, so handles
    /// must be given out before anyone asks (the watches take theirs before `serve` listens).
    pub(crate) fn initialized(&self) -> bool {
        let mut outstanding = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match *outstanding {
            None => true,
            Some(0) => {
                *outstanding = None;
                true
            }
            Some(_) => false,
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let Some(count) = self.0.take() else { return };
        let mut outstanding = count.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = &mut *outstanding {
            *n -= 1;
            if *n == 0 {
                *outstanding = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialized_once_every_handle_is_dropped() {
        let init = Initialize::default();
        let (a, b) = (init.handle(), init.handle());
        assert!(!init.initialized());
        drop(a);
        assert!(!init.initialized(), "one handle is still out");
        let c = init.clone().handle();
        drop(b);
        assert!(!init.initialized(), "a handle given out before initialization counts too");
        drop(c);
        assert!(init.initialized());
    }

    #[test]
    fn latched_handles_given_out_later_are_inert() {
        let init = Initialize::default();
        drop(init.handle());
        let late = init.handle();
        assert!(init.initialized(), "a reload's new watch does not unready a serving webhook");
        drop(late);
        assert!(init.initialized());
    }

    #[test]
    fn nothing_to_wait_for_is_initialized_and_stays() {
        let init = Initialize::default();
        assert!(init.initialized());
        let _late = init.handle();
        assert!(init.initialized(), "a reload's first watch does not unready a serving webhook");
    }

    #[tokio::test]
    async fn a_stopped_watch_drops_its_handle() {
        let init = Initialize::default();
        let (a, b) = (init.handle(), init.handle());
        drop(a);
        // A watch a reload stops (its task aborted) is not waited for.
        let holder = tokio::spawn(async move {
            let _b = b;
            std::future::pending::<()>().await;
        });
        assert!(!init.initialized());
        holder.abort();
        let _ = holder.await;
        assert!(init.initialized());
    }
}
