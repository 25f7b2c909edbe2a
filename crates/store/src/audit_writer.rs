//! The audit writer: one task owns the inserts and writes whatever has queued up in one
//! transaction (one fsync for many rows: group commit). A state-changing call waits for its
//! row to be durable before it answers ([`AuditWriter::record_durable`]); a read does not
//! wait ([`AuditSink::record`]). Shutdown drains the queue before exit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;
use toolgate_domain::audit::{AuditEvent, AuditSink};

use crate::AuditStore;

const MAX_BATCH: usize = 512;
const WRITE_ATTEMPTS: u32 = 5;

/// A row, and who waits for it to be durable.
struct Queued {
    event: AuditEvent,
    durable: Option<oneshot::Sender<bool>>,
}

/// Where rows are sent; cheap to clone. The writer ends when every sender is gone.
#[derive(Clone, Debug)]
pub struct AuditWriter {
    tx: mpsc::UnboundedSender<Queued>,
    /// Rows handed to the writer and not yet stored (or given up on).
    queued: Arc<AtomicUsize>,
    /// Ends a lingering writer's wait: a row someone waits on, or a full batch, arrived.
    write_now: Arc<Notify>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.event.fmt(f)
    }
}

impl AuditWriter {
    /// Starts the writer on the current runtime.
    pub fn start(store: Arc<dyn AuditStore>) -> (Self, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let write_now = Arc::new(Notify::new());
        let writer = Self { tx, queued: queued.clone(), write_now: write_now.clone() };
        (writer, tokio::spawn(write_loop(store, rx, queued, write_now)))
    }

    /// Rows queued and not yet stored: the audit queue's depth (a gauge of /metrics).
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Queues a row; gives it back when the writer is gone.
    fn send(&self, queued: Queued) -> Result<(), Box<Queued>> {
        let durable = queued.durable.is_some();
        let depth = self.queued.fetch_add(1, Ordering::Relaxed) + 1;
        self.tx.send(queued).map_err(|lost| {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            Box::new(lost.0)
        })?;
        if durable || depth.is_multiple_of(MAX_BATCH) {
            self.write_now.notify_waiters();
        }
        Ok(())
    }

    /// Queues the row and waits until it is committed. `false` when it could not be stored
    /// (it was then logged instead, as every lost row is).
    pub async fn record_durable(&self, event: AuditEvent) -> bool {
        let (done, durable) = oneshot::channel();
        if let Err(lost) = self.send(Queued { event, durable: Some(done) }) {
            tracing::error!(row = ?lost, "audit writer gone; row logged instead");
            return false;
        }
        durable.await.unwrap_or(false)
    }
}

impl AuditSink for AuditWriter {
    fn record(&self, event: AuditEvent) {
        if let Err(lost) = self.send(Queued { event, durable: None }) {
            // Only after shutdown began: keep the row in the log rather than lose it.
            tracing::error!(row = ?lost, "audit writer gone; row logged instead");
        }
    }
}

fn drain(rx: &mut mpsc::UnboundedReceiver<Queued>, batch: &mut Vec<Queued>) {
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(e) => batch.push(e),
            Err(_) => break,
        }
    }
}

/// How long rows nobody waits on may gather before they are written: one commit then serves
/// many calls. A crash can lose at most this much of them (docs/operations.md).
const LINGER: Duration = Duration::from_millis(5);

async fn write_loop(
    store: Arc<dyn AuditStore>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    queued: Arc<AtomicUsize>,
    write_now: Arc<Notify>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        // Made before the drain: a durable row or a full batch sent from now on ends the wait.
        let woken = write_now.notified();
        drain(&mut rx, &mut batch);
        if batch.len() < MAX_BATCH && batch.iter().all(|q| q.durable.is_none()) {
            // Gather until the linger ends, a durable row arrives (someone waits on it: write
            // now) or a batch is full, without being woken for every row that arrives.
            tokio::select! {
                () = tokio::time::sleep(LINGER) => {}
                () = woken => {}
            }
        } else if batch.len() > 1 {
            // Durable rows are written at once; under load, let the requests that are ready run
            // first so that their rows share this commit's fsync (group commit).
            tokio::task::yield_now().await;
        }
        drain(&mut rx, &mut batch);
        let durable = batch.iter().any(|q| q.durable.is_some());
        let (events, waiting): (Vec<AuditEvent>, Vec<Option<oneshot::Sender<bool>>>) =
            batch.into_iter().map(|q| (q.event, q.durable)).unzip();
        let events: Arc<[AuditEvent]> = events.into();
        let stored = write(store.as_ref(), &events, durable).await;
        queued.fetch_sub(events.len(), Ordering::Relaxed);
        for done in waiting.into_iter().flatten() {
            let _ = done.send(stored);
        }
    }
}

async fn write(store: &dyn AuditStore, batch: &Arc<[AuditEvent]>, durable: bool) -> bool {
    for attempt in 1..=WRITE_ATTEMPTS {
        match store.append(batch.clone(), durable).await {
            Ok(()) => return true,
            Err(e) => tracing::warn!(attempt, rows = batch.len(), "audit write failed: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
    }
    for row in batch.iter() {
        tracing::error!(row = %serde_json::to_string(row).unwrap_or_default(), "audit row could not be stored; logged instead");
    }
    false
}

/// The `agents` column, as both backends keep it: a JSON array, or NULL for a row about no
/// agent.
pub(crate) fn agents_json(agents: &[String]) -> Option<String> {
    (!agents.is_empty()).then(|| serde_json::to_string(agents).expect("strings"))
}

/// The ids an `agents` column holds (none for NULL or, never expected, unreadable text).
pub(crate) fn agents_of(column: Option<String>) -> Vec<String> {
    column.and_then(|text| serde_json::from_str(&text).ok()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use tokio::time::Instant;
    use toolgate_domain::StoreError;
    use toolgate_domain::audit::{AuditFilter, AuditOutcome};

    use super::*;

    /// Remembers each batch it is given (how many rows, durable or not): what the writer
    /// decides is what these tests look at, on a paused clock.
    #[derive(Default)]
    struct Batches(Mutex<Vec<(usize, bool)>>);

    #[async_trait]
    impl AuditStore for Batches {
        async fn append(&self, events: Arc<[AuditEvent]>, durable: bool) -> Result<(), StoreError> {
            self.0.lock().unwrap().push((events.len(), durable));
            Ok(())
        }
        async fn query(&self, _: &AuditFilter) -> Result<Vec<AuditEvent>, StoreError> {
            Ok(Vec::new())
        }
        async fn page(&self, _: &AuditFilter) -> Result<crate::AuditPage, StoreError> {
            Ok(crate::AuditPage::default())
        }
        async fn prune(&self, _: i64) -> Result<u64, StoreError> {
            Ok(0)
        }
    }

    fn row() -> AuditEvent {
        AuditEvent::new(0, "mcp.tools/call", AuditOutcome::Success)
    }

    fn start() -> (AuditWriter, Arc<Batches>) {
        let batches = Arc::new(Batches::default());
        (AuditWriter::start(batches.clone()).0, batches)
    }

    /// Lets the writer run as far as it can without the clock moving.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    fn written(batches: &Batches) -> Vec<(usize, bool)> {
        batches.0.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn rows_nobody_waits_on_share_one_commit_after_the_linger() {
        let (writer, batches) = start();
        for _ in 0..10 {
            writer.record(row());
        }
        settle().await;
        assert_eq!(written(&batches), vec![], "still lingering");
        tokio::time::advance(LINGER).await;
        settle().await;
        assert_eq!(written(&batches), vec![(10, false)]);
        assert_eq!(writer.queued(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_durable_row_ends_the_linger_and_shares_its_commit() {
        let (writer, batches) = start();
        for _ in 0..3 {
            writer.record(row());
        }
        settle().await;
        let started = Instant::now();
        assert!(writer.record_durable(row()).await, "stored");
        assert!(started.elapsed() < LINGER, "the durable row did not wait out the linger");
        assert_eq!(written(&batches), vec![(4, true)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_is_written_without_waiting_out_the_linger() {
        let (writer, batches) = start();
        writer.record(row());
        settle().await;
        for _ in 1..MAX_BATCH {
            writer.record(row());
        }
        settle().await;
        assert_eq!(written(&batches), vec![(MAX_BATCH, false)], "written at once, the clock unmoved");
    }
}
