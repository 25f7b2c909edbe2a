//! Group commit of experience reports. Every report is committed with an fsync before its
//! agent is told (the agent then forgets it), and SQLite has one writer: at 10,000 agents
//! reporting each minute that is 170 fsyncs a second, one after the other, and as many again
//! for what the reports show of the signals (a device whose disk stays full has its
//! occurrence carried on by every report). Instead each of these writes joins a queue,
//! and one commit at a time waits for the connection: once it holds it, it commits everything
//! queued in one transaction (each write in its own savepoint, so that one that fails fails
//! alone) and answers every caller in it. An idle store commits each write alone, as before; a busy one commits the
//! writes that arrived while it was busy, together.

use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;
use toolgate_domain::StoreError;
use toolgate_domain::fleet::experience::ExperienceReport;

use super::experience_parts::{save_packages, save_parts};
use super::experience_recent::{DEVICE_COLUMNS, device_row};
use super::{SqliteStore, db};
use crate::experience::{Observed, Result, Saved, measured_name, rollups};

/// A write waiting for its commit, and who waits for it.
enum Queued {
    Report { agent_id: String, report: ExperienceReport, received_at_ms: i64, answer: oneshot::Sender<Result<Saved>> },
    Observed { agent_id: String, observed: Vec<(String, Observed)>, answer: oneshot::Sender<Result<()>> },
}

impl Queued {
    /// Writes it on `c`: what saving a report did (none for observations).
    fn write(&self, c: &Connection) -> rusqlite::Result<Option<Saved>> {
        match self {
            Queued::Report { agent_id, report, received_at_ms, .. } => {
                save_one(c, agent_id, report, *received_at_ms).map(Some)
            }
            Queued::Observed { agent_id, observed, .. } => observe_one(c, agent_id, observed).map(|()| None),
        }
    }

    /// Tells its caller how it went. A caller that stopped waiting is told nothing; what was
    /// kept stays kept.
    fn answer(self, outcome: Result<Option<Saved>>) {
        match self {
            // A report's write always says what it did.
            Queued::Report { answer, .. } => drop(answer.send(outcome.map(Option::unwrap_or_default))),
            Queued::Observed { answer, .. } => drop(answer.send(outcome.map(drop))),
        }
    }
}

/// The writes waiting for the next commit.
#[derive(Clone, Default)]
pub(super) struct WriteQueue(Arc<Mutex<Waiting>>);

#[derive(Default)]
struct Waiting {
    writes: Vec<Queued>,
    /// A commit is waiting for the connection, and will take what is queued when it has it.
    commit_started: bool,
}

impl std::fmt::Debug for WriteQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waiting = self.0.lock().map_or(0, |q| q.writes.len());
        f.debug_struct("WriteQueue").field("waiting", &waiting).finish()
    }
}

impl WriteQueue {
    /// Queues `queued`; whether the caller is to start a commit (none is waiting to take it).
    fn push(&self, queued: Queued) -> Result<bool> {
        let mut waiting = self.0.lock().map_err(|_| poisoned())?;
        waiting.writes.push(queued);
        Ok(!std::mem::replace(&mut waiting.commit_started, true))
    }

    /// What is queued, for the commit that holds the connection (a write queued after this
    /// starts a commit of its own).
    fn take(&self) -> Vec<Queued> {
        self.0
            .lock()
            .map(|mut waiting| {
                waiting.commit_started = false;
                std::mem::take(&mut waiting.writes)
            })
            .unwrap_or_default()
    }
}

fn poisoned() -> StoreError {
    StoreError::Unavailable("the queue of experience reports was poisoned by a panic in another request".into())
}

impl SqliteStore {
    /// Keeps `report` in the next group commit; what that did.
    pub(super) async fn save_grouped(
        &self,
        agent_id: &str,
        report: &ExperienceReport,
        received_at_ms: i64,
    ) -> Result<Saved> {
        let (answer, answered) = oneshot::channel();
        let agent_id = agent_id.to_string();
        self.commit_with(Queued::Report { agent_id, report: report.clone(), received_at_ms, answer }).await?;
        answered.await.map_err(|_| unanswered())?
    }

    /// Records what a device's samples say of its signals in the next group commit.
    pub(super) async fn observe_grouped(&self, agent_id: &str, observed: &[(&str, Observed)]) -> Result<()> {
        let (answer, answered) = oneshot::channel();
        let observed = observed.iter().map(|(signal, o)| (signal.to_string(), *o)).collect();
        self.commit_with(Queued::Observed { agent_id: agent_id.to_string(), observed, answer }).await?;
        answered.await.map_err(|_| unanswered())?
    }

    /// Queues `queued` for the commit waiting for the connection, or starts that commit. One
    /// commit waits at a time: with a blocking thread per write, each waited for the
    /// connection in turn only to find its write taken by the commit before.
    async fn commit_with(&self, queued: Queued) -> Result<()> {
        if !self.experience_writes.push(queued)? {
            return Ok(());
        }
        let queue = self.experience_writes.clone();
        let committed = self
            .run(move |c| {
                commit_queued(c, queue.take());
                Ok(())
            })
            .await;
        if let Err(e) = committed {
            // It never held the connection: what it would have taken is told why, and the
            // next write starts a commit again.
            for queued in self.experience_writes.take() {
                queued.answer(Err(StoreError::Unavailable(format!(
                    "the commit of experience reports could not start: {e}"
                ))));
            }
        }
        Ok(())
    }
}

fn unanswered() -> StoreError {
    StoreError::Unavailable("the commit that took this write ended without an answer".into())
}

/// Commits `batch` in one transaction and answers each write: what it did, or its own error
/// (its savepoint rolled back, the others kept), or the commit's error for all.
fn commit_queued(c: &mut Connection, batch: Vec<Queued>) {
    if batch.is_empty() {
        return;
    }
    let committed = (|| {
        let mut tx = c.transaction()?;
        let mut each = Vec::with_capacity(batch.len());
        for queued in &batch {
            let savepoint = tx.savepoint()?;
            match queued.write(&savepoint) {
                Ok(written) => {
                    savepoint.commit()?;
                    each.push(Ok(written));
                }
                // Dropping the savepoint rolls this report back alone.
                Err(e) => each.push(Err(db(e))),
            }
        }
        tx.commit()?;
        Ok::<_, rusqlite::Error>(each)
    })();
    match committed {
        Ok(each) => {
            for (queued, outcome) in batch.into_iter().zip(each) {
                queued.answer(outcome);
            }
        }
        Err(e) => {
            let (why, count) = (e.to_string(), batch.len());
            for queued in batch {
                let failed =
                    StoreError::Unavailable(format!("the commit of {count} writes with this one failed: {why}"));
                queued.answer(Err(failed));
            }
        }
    }
}

/// Keeps one report's samples, their rollups, parts and packages, and what it says of its
/// device (its revision moved on when a value was new); how many values were new (a sample
/// kept before is kept once) and, when any was, the device's row as it now is.
fn save_one(c: &Connection, agent_id: &str, report: &ExperienceReport, received_at_ms: i64) -> rusqlite::Result<Saved> {
    let mut kept = Vec::new();
    let mut insert = c.prepare_cached(
        "INSERT OR IGNORE INTO experience_sample (agent_id, metric, at_ms, value) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for sample in &report.samples {
        for (metric, value) in &sample.values {
            if insert.execute(params![agent_id, metric, sample.at_ms, value])? == 1 {
                kept.push((metric.clone(), sample.at_ms, *value));
            }
        }
    }
    let mut roll = c.prepare_cached(
        "INSERT INTO experience_rollup (agent_id, metric, span_ms, start_ms, count, sum, min, max)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (agent_id, metric, span_ms, start_ms) DO UPDATE SET count = count + excluded.count,
             sum = sum + excluded.sum, min = min(min, excluded.min), max = max(max, excluded.max)",
    )?;
    for r in rollups(&kept) {
        roll.execute(params![agent_id, r.key, r.span_ms, r.start_ms, r.count, r.sum, r.min, r.max])?;
    }
    save_parts(c, agent_id, report)?;
    save_packages(c, agent_id, report)?;
    if let Some(newest) = report.samples.iter().max_by_key(|s| s.at_ms) {
        let absent = serde_json::to_string(&report.absent).expect("strings");
        c.prepare_cached(
            "INSERT INTO experience_device (agent_id, measured, absent, fullest_filesystem, last_sample_ms, received_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (agent_id) DO UPDATE SET measured = excluded.measured, absent = excluded.absent,
                 fullest_filesystem = excluded.fullest_filesystem, last_sample_ms = excluded.last_sample_ms,
                 received_at_ms = excluded.received_at_ms
             WHERE excluded.last_sample_ms >= experience_device.last_sample_ms",
        )?
        .execute(params![agent_id, measured_name(report), absent, newest.fullest_filesystem, newest.at_ms, received_at_ms])?;
    }
    let mut device = None;
    if !kept.is_empty() {
        c.prepare_cached("UPDATE experience_device SET revision = revision + 1 WHERE agent_id = ?1")?
            .execute([agent_id])?;
        device = c
            .prepare_cached(&format!("SELECT {DEVICE_COLUMNS} FROM experience_device WHERE agent_id = ?1"))?
            .query_row([agent_id], device_row)
            .optional()?;
    }
    Ok(Saved { added: kept.len() as u64, device })
}

/// Records what a device's newest samples say of each signal: an occurrence opened or carried
/// on while it holds, ended at the first sample that does not meet it.
fn observe_one(c: &Connection, agent_id: &str, observed: &[(String, Observed)]) -> rusqlite::Result<()> {
    for (signal, observed) in observed {
        match *observed {
            Observed::Holding { started_ms, last_ms, peak, rising } => {
                let furthest = if rising { "max(peak, ?3)" } else { "min(peak, ?3)" };
                let carried = c
                    .prepare_cached(&format!(
                        "UPDATE experience_signal SET last_ms = max(last_ms, ?4), peak = {furthest}
                         WHERE agent_id = ?1 AND signal = ?2 AND ended_ms IS NULL"
                    ))?
                    .execute(params![agent_id, signal, peak, last_ms])?;
                if carried == 0 {
                    c.prepare_cached(
                        "INSERT OR IGNORE INTO experience_signal (agent_id, signal, started_ms, last_ms, ended_ms, peak)
                         VALUES (?1, ?2, ?3, ?4, NULL, ?5)",
                    )?
                    .execute(params![agent_id, signal, started_ms, last_ms, peak])?;
                }
            }
            Observed::Ended { at_ms } => {
                c.prepare_cached(
                    "UPDATE experience_signal SET ended_ms = ?3
                     WHERE agent_id = ?1 AND signal = ?2 AND ended_ms IS NULL AND last_ms < ?3",
                )?
                .execute(params![agent_id, signal, at_ms])?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use toolgate_domain::fleet::experience::{Measured, Sample};

    use super::*;

    fn report(at_ms: i64, value: f64) -> ExperienceReport {
        let sample =
            Sample { at_ms, values: BTreeMap::from([("cpu_busy_pct".to_string(), value)]), ..Sample::default() };
        ExperienceReport { measured: Measured::Host, absent: BTreeMap::new(), samples: vec![sample] }
    }

    fn queued(agent_id: &str, report: ExperienceReport) -> (Queued, oneshot::Receiver<Result<Saved>>) {
        let (answer, answered) = oneshot::channel();
        (Queued::Report { agent_id: agent_id.into(), report, received_at_ms: 1, answer }, answered)
    }

    /// Makes the store refuse device `b`'s rows in `table`.
    fn refuse_b(conn: &Connection, table: &str) {
        conn.execute_batch(&format!(
            "CREATE TEMP TRIGGER refuse_b BEFORE INSERT ON {table} WHEN NEW.agent_id = 'b'
             BEGIN SELECT RAISE(ABORT, 'refused for the test'); END;"
        ))
        .unwrap();
    }

    #[test]
    fn a_batch_answers_each_report_and_one_that_fails_fails_alone() {
        let store = SqliteStore::open_in_memory().unwrap();
        let mut conn = store.conn.lock().unwrap();
        // A report the store refuses, after its samples and rollups went in.
        refuse_b(&conn, "experience_device");
        let (a, mut a_answer) = queued("a", report(1_000, 10.0));
        let (bad, mut bad_answer) = queued("b", report(1_000, 20.0));
        let (c, mut c_answer) = queued("c", report(1_000, 30.0));
        commit_queued(&mut conn, vec![a, bad, c]);
        assert_eq!(a_answer.try_recv().unwrap().unwrap().added, 1);
        let refused = bad_answer.try_recv().unwrap().unwrap_err().to_string();
        assert!(refused.contains("refused for the test"), "{refused}");
        let c_saved = c_answer.try_recv().unwrap().unwrap();
        assert_eq!((c_saved.added, c_saved.device.map(|d| (d.agent_id, d.revision))), (1, Some(("c".into(), 1))));
        let kept: Vec<(String, i64)> = conn
            .prepare("SELECT d.agent_id, (SELECT COUNT(*) FROM experience_rollup r WHERE r.agent_id = d.agent_id) FROM experience_device d ORDER BY 1")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            kept,
            [("a".to_string(), 2), ("c".to_string(), 2)],
            "the failed report left nothing, not even its device"
        );
        // Sent again (its answer was lost): kept once, nothing new.
        let (again, mut again_answer) = queued("a", report(1_000, 10.0));
        commit_queued(&mut conn, vec![again]);
        assert_eq!(again_answer.try_recv().unwrap().unwrap(), Saved { added: 0, device: None });
    }

    fn observed(agent_id: &str, seen: Observed) -> (Queued, oneshot::Receiver<Result<()>>) {
        let (answer, answered) = oneshot::channel();
        (Queued::Observed { agent_id: agent_id.into(), observed: vec![("cpu_high".into(), seen)], answer }, answered)
    }

    #[test]
    fn observations_commit_with_the_reports_and_one_that_fails_fails_alone() {
        let store = SqliteStore::open_in_memory().unwrap();
        let mut conn = store.conn.lock().unwrap();
        refuse_b(&conn, "experience_signal");
        let holding = Observed::Holding { started_ms: 1_000, last_ms: 3_000, peak: 97.0, rising: true };
        let (report_a, mut report_answer) = queued("a", report(3_000, 97.0));
        let (seen_a, mut seen_a_answer) = observed("a", holding);
        let (seen_b, mut seen_b_answer) = observed("b", holding);
        commit_queued(&mut conn, vec![report_a, seen_a, seen_b]);
        assert_eq!(report_answer.try_recv().unwrap().unwrap().added, 1);
        seen_a_answer.try_recv().unwrap().unwrap();
        let refused = seen_b_answer.try_recv().unwrap().unwrap_err().to_string();
        assert!(refused.contains("refused for the test"), "{refused}");
        let (ended, mut ended_answer) = observed("a", Observed::Ended { at_ms: 4_000 });
        commit_queued(&mut conn, vec![ended]);
        ended_answer.try_recv().unwrap().unwrap();
        let signals: Vec<(String, i64, Option<i64>, f64)> = conn
            .prepare("SELECT agent_id, started_ms, ended_ms, peak FROM experience_signal ORDER BY agent_id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(signals, [("a".to_string(), 1_000, Some(4_000), 97.0)], "b's refused, a's opened then ended");
    }
}
