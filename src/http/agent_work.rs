//! The agents' work on threads of its own, at a lower priority than the calls' (`--agent-nice`).
//! At 10,000 agents the reports take most of a core (docs/experience.md, "At scale"): on the
//! threads that answer calls they shared it evenly with a person's question, which then took
//! five to ten times its own time. On these threads, niced, the question goes first whenever
//! both want the core; the reports take whatever the calls leave, and wait some milliseconds
//! more when the core is busy (an agent keeps a report until it is acknowledged). The views
//! of the devices made again as each hour begins (10,000 of them) are made here too: no caller
//! waits for them either.

use std::future::Future;

use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

/// The name of the agents' threads, for `top -H` and `ps -L`.
pub const THREAD_NAME: &str = "toolgate-agents";

/// A runtime for agent connections whose threads (workers and blocking pool alike: the
/// store's writes of reports run on the latter) run at `nice`.
pub struct AgentWork {
    /// Always Some until dropped: a runtime cannot be dropped where blocking is not allowed
    /// (in the server's own runtime), so it is shut down in the background instead.
    runtime: Option<Runtime>,
}

impl AgentWork {
    /// Threads as many as the calls' runtime has, at `nice` (0 to 19; 0: as the calls).
    pub fn start(nice: i32) -> std::io::Result<AgentWork> {
        let runtime = Builder::new_multi_thread()
            .thread_name(THREAD_NAME)
            .on_thread_start(move || lower_priority(nice))
            .enable_all()
            .build()?;
        Ok(AgentWork { runtime: Some(runtime) })
    }

    /// Runs `work` on the agents' threads, and waits for it. Dropped, the wait ends and
    /// `work` goes on to its end there.
    pub async fn run<F>(&self, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if let Err(e) = self.spawn(work).await
            && e.is_panic()
        {
            tracing::error!("an agent connection's task panicked: {e}");
        }
    }

    /// Starts `work` on the agents' threads: work of theirs that no caller waits for.
    pub fn spawn<F>(&self, work: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime.as_ref().expect("the agents' runtime lives until AgentWork is dropped").spawn(work)
    }
}

impl Drop for AgentWork {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Sets the calling thread's niceness to `nice`, unless it already runs nicer (raising a
/// priority needs a privilege the server should not have). Linux keeps a niceness per thread.
#[cfg(target_os = "linux")]
fn lower_priority(nice: i32) {
    let current = thread_nice();
    if nice <= current {
        return;
    }
    // SAFETY: setpriority only reads its integer arguments; `0` is the calling thread.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::warn!("cannot lower the agents' threads to nice {nice}: {e}; they run at {current}");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority(_nice: i32) {}

/// The calling thread's niceness.
#[cfg(target_os = "linux")]
fn thread_nice() -> i32 {
    // SAFETY: getpriority only reads its integer arguments; -1 is a valid niceness, so errno
    // is what tells an error apart, and a thread can always read its own.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both kinds of the runtime's threads run at the niceness asked for (or the process's,
    /// if that is already nicer), and the calling thread keeps its own.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_agents_threads_run_nicer_than_the_callers() {
        let before = thread_nice();
        let wanted = (before + 7).min(19);
        let work = AgentWork::start(wanted).unwrap();
        let outside = Builder::new_current_thread().enable_all().build().unwrap();
        let (on_worker, on_blocking, name) = outside.block_on(async {
            let (tx, rx) = tokio::sync::oneshot::channel();
            work.run(async move {
                let name = std::thread::current().name().map(str::to_string);
                let on_blocking = tokio::task::spawn_blocking(thread_nice).await.unwrap();
                let _ = tx.send((thread_nice(), on_blocking, name));
            })
            .await;
            rx.await.unwrap()
        });
        assert_eq!((on_worker, on_blocking), (wanted, wanted));
        assert_eq!(name.as_deref(), Some(THREAD_NAME));
        assert_eq!(thread_nice(), before, "the caller's thread is left as it was");
        drop(work);
    }
}
