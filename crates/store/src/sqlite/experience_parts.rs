//! The experience series broken down by part (programs, interfaces) in SQLite: the parts of
//! [`crate::ExperienceStore`] that keep, read and sweep each breakdown's samples and rollups
//! (tables by [`part_tables`]).

use rusqlite::types::Value as Sql;
use rusqlite::{Connection, Transaction, params};
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::fleet::parts::Breakdown;
use toolgate_domain::groups::Reach;

use super::experience::{confined, over_window};
use crate::experience::{
    PackageSpan, PartValue, Resolution, Retention, package_spans, part_rows, part_tables, rollups, sweep_statement,
};

/// Keeps a report's values of every breakdown (one kept before is kept once) and rolls up the
/// new.
pub(super) fn save_parts(tx: &Connection, agent_id: &str, report: &ExperienceReport) -> rusqlite::Result<()> {
    for breakdown in Breakdown::ALL {
        let (samples, rollup, part) = part_tables(breakdown);
        let mut insert = tx.prepare_cached(&format!(
            "INSERT OR IGNORE INTO {samples} (agent_id, {part}, metric, at_ms, value) VALUES (?1, ?2, ?3, ?4, ?5)"
        ))?;
        let mut kept = Vec::new();
        for (name, metric, at_ms, value) in part_rows(breakdown, report) {
            if insert.execute(params![agent_id, name, metric, at_ms, value])? == 1 {
                kept.push(((name, metric), at_ms, value));
            }
        }
        let mut roll = tx.prepare_cached(&format!(
            "INSERT INTO {rollup} (agent_id, {part}, metric, span_ms, start_ms, count, sum, min, max)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (agent_id, {part}, metric, span_ms, start_ms) DO UPDATE SET count = count + excluded.count,
                 sum = sum + excluded.sum, min = min(min, excluded.min), max = max(max, excluded.max)"
        ))?;
        for r in rollups(&kept) {
            let (name, metric) = r.key;
            roll.execute(params![agent_id, name, metric, r.span_ms, r.start_ms, r.count, r.sum, r.min, r.max])?;
        }
    }
    Ok(())
}

pub(super) fn part_values(
    c: &Connection,
    breakdown: Breakdown,
    reach: &Reach,
    metric: &str,
    since_ms: i64,
    resolution: Resolution,
) -> rusqlite::Result<Vec<PartValue>> {
    let (samples, rollup, part) = part_tables(breakdown);
    let (sql, values) = over_window(
        reach,
        "agent_id",
        Sql::from(metric.to_string()),
        since_ms,
        resolution,
        |condition| {
            format!(
                "SELECT agent_id, {part}, at_ms, value, 1 FROM {samples}
                 WHERE metric = ?1 AND at_ms >= ?2{condition} ORDER BY agent_id, {part}, at_ms"
            )
        },
        |condition| {
            format!(
                "SELECT agent_id, {part}, start_ms, sum, count FROM {rollup}
                 WHERE metric = ?1 AND start_ms >= ?2 AND span_ms = ?3{condition} ORDER BY agent_id, {part}, start_ms"
            )
        },
    );
    let mut statement = c.prepare(&sql)?;
    let rows = statement.query_map(rusqlite::params_from_iter(values.iter()), |r| {
        Ok(PartValue { agent_id: r.get(0)?, part: r.get(1)?, at_ms: r.get(2)?, value: r.get(3)?, samples: r.get(4)? })
    })?;
    rows.collect()
}

/// Deletes every breakdown's rows older than `retention` allows: (raw, hourly, daily) removed.
pub(super) fn sweep_parts(tx: &Transaction, now_ms: i64, retention: Retention) -> rusqlite::Result<(u64, u64, u64)> {
    let mut swept = (0, 0, 0);
    for breakdown in Breakdown::ALL {
        let (samples, rollup, _) = part_tables(breakdown);
        swept.0 += tx.execute(&sweep_statement(samples, false, '?'), [now_ms - retention.raw_ms])? as u64;
        let spans = sweep_statement(rollup, true, '?');
        let (hour, day) = (crate::HOUR_MS, crate::DAY_MS);
        swept.1 += tx.execute(&spans, params![hour, now_ms - retention.hourly_ms - hour])? as u64;
        swept.2 += tx.execute(&spans, params![day, now_ms - retention.daily_ms - day])? as u64;
    }
    // A program's versions are kept as long as the days they explain.
    let packages = "DELETE FROM experience_app_package WHERE last_ms < ?1";
    swept.2 += tx.execute(packages, [now_ms - retention.daily_ms])? as u64;
    Ok(swept)
}

/// Keeps a report's package spans: each widens the span kept of its program and version.
pub(super) fn save_packages(tx: &Connection, agent_id: &str, report: &ExperienceReport) -> rusqlite::Result<()> {
    let mut upsert = tx.prepare_cached(
        "INSERT INTO experience_app_package (agent_id, program, package, version, first_ms, last_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (agent_id, program, package, version) DO UPDATE SET
             first_ms = min(first_ms, excluded.first_ms), last_ms = max(last_ms, excluded.last_ms)",
    )?;
    for (program, package, version, first_ms, last_ms) in package_spans(report) {
        upsert.execute(params![agent_id, program, package, version, first_ms, last_ms])?;
    }
    Ok(())
}

pub(super) fn read_package_spans(c: &Connection, reach: &Reach, since_ms: i64) -> rusqlite::Result<Vec<PackageSpan>> {
    let (condition, groups) = confined("agent_id", reach, 2);
    let mut values = vec![Sql::from(since_ms)];
    values.extend(groups);
    let mut statement = c.prepare(&format!(
        "SELECT agent_id, program, package, version, first_ms, last_ms FROM experience_app_package
         WHERE last_ms >= ?1{condition} ORDER BY agent_id, program, first_ms"
    ))?;
    let rows = statement.query_map(rusqlite::params_from_iter(values.iter()), |r| {
        Ok(PackageSpan {
            agent_id: r.get(0)?,
            program: r.get(1)?,
            package: r.get(2)?,
            version: r.get(3)?,
            first_ms: r.get(4)?,
            last_ms: r.get(5)?,
        })
    })?;
    rows.collect()
}
