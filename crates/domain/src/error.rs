//! The one error every store backend reports, so no backend's types leak upward.

/// A store operation failed. Callers answer "retry shortly" (503, -32603 with
/// `retry_after_ms`); the text is for logs and operators.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend refused or failed (I/O, a constraint, a missing table).
    #[error("the store failed: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store cannot be reached at all (a lock poisoned by a panic, a worker gone).
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
}

impl StoreError {
    pub fn backend(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Backend(Box::new(e))
    }
}
