//! The audit writer: one task owns the inserts and writes whatever has queued up in one
//! transaction (one fsync for many rows: group commit). A state-changing call waits for its
//! row to be durable before it answers ([`AuditWriter::record_durable`]); a read does not
//! wait ([`AuditSink::record`]). Shutdown drains the queue before exit.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
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
        (Self { tx, queued: queued.clone() }, tokio::spawn(write_loop(store, rx, queued)))
    }

    /// Rows queued and not yet stored: the audit queue's depth (a gauge of /metrics).
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Queues a row; gives it back when the writer is gone.
    fn send(&self, queued: Queued) -> Result<(), Box<Queued>> {
        self.queued.fetch_add(1, Ordering::Relaxed);
        self.tx.send(queued).map_err(|lost| {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            Box::new(lost.0)
        })
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

async fn write_loop(store: Arc<dyn AuditStore>, mut rx: mpsc::UnboundedReceiver<Queued>, queued: Arc<AtomicUsize>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        drain(&mut rx, &mut batch);
        if batch.iter().all(|q| q.durable.is_none()) {
            // Gather until the batch is full, a durable row arrives (someone waits on it: write
            // now) or the linger ends.
            let _ = tokio::time::timeout(LINGER, async {
                while batch.len() < MAX_BATCH {
                    let Some(queued) = rx.recv().await else { return };
                    let durable = queued.durable.is_some();
                    batch.push(queued);
                    if durable {
                        return;
                    }
                }
            })
            .await;
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
