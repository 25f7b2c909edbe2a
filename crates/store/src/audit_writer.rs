//! The audit writer: one task owns the inserts and batches whatever has queued up, so calls
//! never wait on the disk for their audit row, and shutdown drains the queue before exit.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use toolgate_domain::audit::{AuditEvent, AuditSink};

use crate::AuditStore;

const MAX_BATCH: usize = 512;
const WRITE_ATTEMPTS: u32 = 5;

/// Where rows are sent; cheap to clone. The writer ends when every sender is gone.
#[derive(Clone, Debug)]
pub struct AuditWriter {
    tx: mpsc::UnboundedSender<AuditEvent>,
}

impl AuditWriter {
    /// Starts the writer on the current runtime.
    pub fn start(store: Arc<dyn AuditStore>) -> (Self, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, tokio::spawn(write_loop(store, rx)))
    }
}

impl AuditSink for AuditWriter {
    fn record(&self, event: AuditEvent) {
        if let Err(lost) = self.tx.send(event) {
            // Only after shutdown began: keep the row in the log rather than lose it.
            tracing::error!(row = ?lost.0, "audit writer gone; row logged instead");
        }
    }
}

async fn write_loop(store: Arc<dyn AuditStore>, mut rx: mpsc::UnboundedReceiver<AuditEvent>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(_) => break,
            }
        }
        write(store.as_ref(), batch).await;
    }
}

async fn write(store: &dyn AuditStore, batch: Vec<AuditEvent>) {
    for attempt in 1..=WRITE_ATTEMPTS {
        match store.append(&batch).await {
            Ok(()) => return,
            Err(e) => tracing::warn!(attempt, rows = batch.len(), "audit write failed: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
    }
    for row in &batch {
        tracing::error!(row = %serde_json::to_string(row).unwrap_or_default(), "audit row could not be stored; logged instead");
    }
}
