//! The per-program experience series in SQLite: the parts of [`crate::ExperienceStore`] that
//! keep, read and sweep `experience_app_sample` and `experience_app_rollup`.

use rusqlite::types::Value as Sql;
use rusqlite::{Connection, Transaction, params};
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::groups::Reach;

use super::experience::confined;
use crate::experience::{AppValue, Resolution, Retention, app_rows, rollups};

/// Keeps a report's per-program counts (one kept before is kept once) and rolls up the new.
pub(super) fn save_apps(tx: &Transaction, agent_id: &str, report: &ExperienceReport) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT OR IGNORE INTO experience_app_sample (agent_id, app, metric, at_ms, value) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut kept = Vec::new();
    for (app, metric, at_ms, value) in app_rows(report) {
        if insert.execute(params![agent_id, app, metric, at_ms, value])? == 1 {
            kept.push(((app, metric), at_ms, value));
        }
    }
    let mut roll = tx.prepare_cached(
        "INSERT INTO experience_app_rollup (agent_id, app, metric, span_ms, start_ms, count, sum, min, max)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (agent_id, app, metric, span_ms, start_ms) DO UPDATE SET count = count + excluded.count,
             sum = sum + excluded.sum, min = min(min, excluded.min), max = max(max, excluded.max)",
    )?;
    for r in rollups(&kept) {
        let (app, metric) = r.key;
        roll.execute(params![agent_id, app, metric, r.span_ms, r.start_ms, r.count, r.sum, r.min, r.max])?;
    }
    Ok(())
}

pub(super) fn app_values(
    c: &Connection,
    reach: &Reach,
    metric: &str,
    since_ms: i64,
    resolution: Resolution,
) -> rusqlite::Result<Vec<AppValue>> {
    let mut values = vec![Sql::from(metric.to_string()), Sql::from(since_ms)];
    let sql = match resolution.span_ms() {
        None => {
            let (condition, groups) = confined("agent_id", reach, 3);
            values.extend(groups);
            format!(
                "SELECT agent_id, app, at_ms, value FROM experience_app_sample
                 WHERE metric = ?1 AND at_ms >= ?2{condition} ORDER BY agent_id, app, at_ms"
            )
        }
        Some(span_ms) => {
            let (condition, groups) = confined("agent_id", reach, 4);
            values.push(Sql::from(span_ms));
            values.extend(groups);
            format!(
                "SELECT agent_id, app, start_ms, sum FROM experience_app_rollup
                 WHERE metric = ?1 AND start_ms >= ?2 AND span_ms = ?3{condition} ORDER BY agent_id, app, start_ms"
            )
        }
    };
    let mut statement = c.prepare(&sql)?;
    let rows = statement.query_map(rusqlite::params_from_iter(values.iter()), |r| {
        Ok(AppValue { agent_id: r.get(0)?, app: r.get(1)?, at_ms: r.get(2)?, value: r.get(3)? })
    })?;
    rows.collect()
}

/// Deletes per-program rows older than `retention` allows: (raw, hourly, daily) removed.
pub(super) fn sweep_apps(tx: &Transaction, now_ms: i64, retention: Retention) -> rusqlite::Result<(u64, u64, u64)> {
    let raw = tx.execute("DELETE FROM experience_app_sample WHERE at_ms < ?1", [now_ms - retention.raw_ms])?;
    let rollup = |span_ms: i64, keep_ms: i64| {
        tx.execute(
            "DELETE FROM experience_app_rollup WHERE span_ms = ?1 AND start_ms + ?1 <= ?2",
            params![span_ms, now_ms - keep_ms],
        )
    };
    let hourly = rollup(crate::HOUR_MS, retention.hourly_ms)?;
    let daily = rollup(crate::DAY_MS, retention.daily_ms)?;
    Ok((raw as u64, hourly as u64, daily as u64))
}
