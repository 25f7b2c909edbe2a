//! Group commit of experience reports. Every report is committed with an fsync before its
//! agent is told (the agent then forgets it), and SQLite has one writer: at 10,000 agents
//! reporting each minute that is 170 fsyncs a second, one after the other. Instead each report
//! joins a queue; whichever caller next holds the connection commits everything queued in one
//! transaction (each report in its own savepoint, so that one that fails fails alone) and
//! answers every caller in it. An idle store commits each report alone, as before; a busy one
//! commits the reports that arrived while it was busy, together.

use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;
use toolgate_domain::StoreError;
use toolgate_domain::fleet::experience::ExperienceReport;

use super::experience_parts::{save_packages, save_parts};
use super::experience_recent::{DEVICE_COLUMNS, device_row};
use super::{SqliteStore, db};
use crate::experience::{Result, Saved, measured_name, rollups};

/// A report waiting for its commit, and who waits for it.
struct Queued {
    agent_id: String,
    report: ExperienceReport,
    received_at_ms: i64,
    answer: oneshot::Sender<Result<Saved>>,
}

/// The reports waiting for the next commit.
#[derive(Clone, Default)]
pub(super) struct ReportQueue(Arc<Mutex<Vec<Queued>>>);

impl std::fmt::Debug for ReportQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waiting = self.0.lock().map_or(0, |q| q.len());
        f.debug_struct("ReportQueue").field("waiting", &waiting).finish()
    }
}

impl ReportQueue {
    fn push(&self, queued: Queued) -> Result<()> {
        let mut queue = self.0.lock().map_err(|_| poisoned())?;
        queue.push(queued);
        Ok(())
    }

    fn take(&self) -> Vec<Queued> {
        self.0.lock().map(|mut q| std::mem::take(&mut *q)).unwrap_or_default()
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
        let queued = Queued { agent_id: agent_id.to_string(), report: report.clone(), received_at_ms, answer };
        self.reports.push(queued)?;
        // Whoever holds the connection takes every queued report, so by the time this call
        // holds it, this report is either still queued (committed now) or already answered.
        let queue = self.reports.clone();
        self.run(move |c| {
            commit_queued(c, queue.take());
            Ok(())
        })
        .await?;
        answered
            .await
            .map_err(|_| StoreError::Unavailable("the commit that took this report ended without an answer".into()))?
    }
}

/// Commits `batch` in one transaction and answers each report: its own count, or its own
/// error (its savepoint rolled back, the others kept), or the commit's error for all.
fn commit_queued(c: &mut Connection, batch: Vec<Queued>) {
    if batch.is_empty() {
        return;
    }
    let committed = (|| {
        let mut tx = c.transaction()?;
        let mut each = Vec::with_capacity(batch.len());
        for queued in &batch {
            let savepoint = tx.savepoint()?;
            match save_one(&savepoint, &queued.agent_id, &queued.report, queued.received_at_ms) {
                Ok(added) => {
                    savepoint.commit()?;
                    each.push(Ok(added));
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
                // A caller that stopped waiting is told nothing; what was kept stays kept.
                let _ = queued.answer.send(outcome);
            }
        }
        Err(e) => {
            let (why, count) = (e.to_string(), batch.len());
            for queued in batch {
                let failed =
                    StoreError::Unavailable(format!("the commit of {count} reports with this one failed: {why}"));
                let _ = queued.answer.send(Err(failed));
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
        (Queued { agent_id: agent_id.into(), report, received_at_ms: 1, answer }, answered)
    }

    #[test]
    fn a_batch_answers_each_report_and_one_that_fails_fails_alone() {
        let store = SqliteStore::open_in_memory().unwrap();
        let mut conn = store.conn.lock().unwrap();
        // A report the store refuses, after its samples and rollups went in.
        conn.execute_batch(
            "CREATE TEMP TRIGGER refuse_b BEFORE INSERT ON experience_device WHEN NEW.agent_id = 'b'
             BEGIN SELECT RAISE(ABORT, 'refused for the test'); END;",
        )
        .unwrap();
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
}
