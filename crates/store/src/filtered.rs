//! Rows filtered in Rust (globs, versions, a scope's agents) without holding the store: the
//! backend reads chunks of rows in key order, each read a short hold of its connection, and
//! the filter runs between reads on a blocking thread, within a budget for the whole call.
//! A slow filter then delays its own caller only, never authentication or another request.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use toolgate_domain::StoreError;

use crate::RowPage;

/// Rows read per chunk: a short hold of the store, a few hundred KiB at most.
pub(crate) const CHUNK_ROWS: usize = 512;
/// What matching in Rust may cost one call, summed over its chunks, unless the caller says.
pub const FILTER_BUDGET: Duration = Duration::from_secs(2);
/// Rows looked at past a full page to count what remains: a filter matched row by row over a
/// large table would otherwise read all of it for every page. Beyond them the count is a
/// lower bound ([`RowPage::counted_all`] false).
pub(crate) const COUNT_AHEAD_ROWS: usize = 2 * CHUNK_ROWS;
/// How many rows are matched between two looks at the clock.
const ROWS_PER_CLOCK_LOOK: usize = 64;

type Keep = Box<dyn Fn(&str, &Map<String, Value>) -> bool + Send>;

/// Decides whether an inventory row (with its agent id) is wanted, within a time budget.
pub struct RowFilter {
    keep: Keep,
    budget: Duration,
}

impl RowFilter {
    pub fn new(keep: impl Fn(&str, &Map<String, Value>) -> bool + Send + 'static) -> Self {
        Self { keep: Box::new(keep), budget: FILTER_BUDGET }
    }

    /// The same filter with another budget (tests, or a caller that may wait longer).
    pub fn within(self, budget: Duration) -> Self {
        Self { budget, ..self }
    }
}

/// Where a chunked read resumes: after this agent's row of this key (the backend's row id).
pub(crate) type Cursor = (String, i64);
/// A chunk as read: each row's key, agent id and columns, in (agent id, key) order.
pub(crate) type Chunk = Vec<(i64, String, Map<String, Value>)>;

/// Cuts a page out of filtered chunks: `read_after(cursor)` reads the next [`CHUNK_ROWS`]
/// rows in key order, to the last (every match is counted). The page is `over_budget` when
/// the filter's budget ran out first.
pub(crate) async fn filtered_page<F, Fut>(
    mut read_after: F,
    filter: RowFilter,
    offset: usize,
    limit: usize,
) -> Result<RowPage, StoreError>
where
    F: FnMut(Option<Cursor>) -> Fut,
    Fut: Future<Output = Result<Chunk, StoreError>>,
{
    let deadline = Instant::now() + filter.budget;
    let page = RowPage { counted_all: true, ..RowPage::default() };
    let mut cut = Cut { page, keep: filter.keep, skip: offset, limit, ahead: COUNT_AHEAD_ROWS };
    let mut after = None;
    loop {
        let chunk = read_after(after.take()).await?;
        let last_chunk = chunk.len() < CHUNK_ROWS;
        after = chunk.last().map(|(key, agent, _)| (agent.clone(), *key));
        let (back, outcome) = tokio::task::spawn_blocking(move || {
            let outcome = cut.take(chunk, deadline);
            (cut, outcome)
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("a filter task failed: {e}")))?;
        cut = back;
        match outcome {
            Outcome::OverBudget => {
                cut.page.over_budget = true;
                break;
            }
            Outcome::Counted => {
                cut.page.counted_all = false;
                break;
            }
            Outcome::Read if last_chunk => break,
            Outcome::Read => {}
        }
    }
    Ok(cut.page)
}

/// The page being cut: rows kept past the first `skip` of them, `limit` at most.
struct Cut {
    page: RowPage,
    keep: Keep,
    skip: usize,
    limit: usize,
    /// Rows still to look at once the page is full, to count what remains.
    ahead: usize,
}

enum Outcome {
    OverBudget,
    /// The page is full and [`COUNT_AHEAD_ROWS`] more were looked at.
    Counted,
    /// Every row of the chunk was looked at.
    Read,
}

impl Cut {
    fn take(&mut self, chunk: Chunk, deadline: Instant) -> Outcome {
        for (i, (_, agent, row)) in chunk.into_iter().enumerate() {
            if i % ROWS_PER_CLOCK_LOOK == 0 && Instant::now() >= deadline {
                return Outcome::OverBudget;
            }
            if self.page.more {
                if self.ahead == 0 {
                    return Outcome::Counted;
                }
                self.ahead -= 1;
            }
            if !(self.keep)(&agent, &row) {
                continue;
            }
            // Matches are counted, so that the answer can say how many more there are.
            self.page.matched += 1;
            if self.skip > 0 {
                self.skip -= 1;
            } else if self.page.rows.len() < self.limit {
                self.page.rows.push((agent, row));
            } else {
                self.page.more = true;
            }
        }
        Outcome::Read
    }
}
