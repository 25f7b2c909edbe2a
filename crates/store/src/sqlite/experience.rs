//! Experience samples in SQLite (see [`crate::ExperienceStore`]).

use async_trait::async_trait;
use rusqlite::params;
use rusqlite::types::Value as Sql;
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::fleet::parts::Breakdown;
use toolgate_domain::groups::Reach;

use super::SqliteStore;
use super::confinement::{reach_agents, reach_param};
use super::experience_parts::{part_values, read_package_spans, sweep_parts};
use super::experience_recent::{DEVICE_COLUMNS, device_row, recent_rows, revisions};
use crate::experience::{
    Averaged, DeviceExperience, ExperienceStore, ExperienceSwept, Observed, Occurrence, PackageSpan, PartValue, Point,
    RecentRows, RecentWanted, Resolution, Result, Retention, Saved, sweep_statement,
};

/// ` AND` the row's agent (`column`) is within the reach whose JSON parameter is `?n`; the
/// value to bind there (nothing for the whole fleet).
pub(super) fn confined(column: &str, reach: &Reach, n: usize) -> (String, Option<Sql>) {
    match reach_param(reach) {
        Some(groups) => (format!(" AND {column} IN ({})", reach_agents(&format!("?{n}"))), Some(groups.into())),
        None => (String::new(), None),
    }
}

/// A read of one metric over a window at `resolution`: its parameters (the metric ?1, the
/// start ?2, the span ?3 for rollups, then the reach's) and the query `raw` or `rollup` writes
/// around the reach's condition on `agent_column`. The placeholders are counted here once,
/// not in every read.
pub(super) fn over_window(
    reach: &Reach,
    agent_column: &str,
    metric: Sql,
    since_ms: i64,
    resolution: Resolution,
    raw: impl FnOnce(&str) -> String,
    rollup: impl FnOnce(&str) -> String,
) -> (String, Vec<Sql>) {
    let mut values = vec![metric, Sql::from(since_ms)];
    let span_ms = resolution.span_ms();
    values.extend(span_ms.map(Sql::from));
    let (condition, groups) = confined(agent_column, reach, values.len() + 1);
    values.extend(groups);
    let sql = if span_ms.is_some() { rollup(&condition) } else { raw(&condition) };
    (sql, values)
}

#[async_trait]
impl ExperienceStore for SqliteStore {
    async fn keep_experience(&self, agent_id: &str, report: &ExperienceReport, received_at_ms: i64) -> Result<Saved> {
        self.save_grouped(agent_id, report, received_at_ms).await
    }

    async fn device_experience(&self, reach: &Reach, agent_id: Option<&str>) -> Result<Vec<DeviceExperience>> {
        let (reach, agent_id) = (reach.clone(), agent_id.map(str::to_string));
        self.read(move |c| {
            let (condition, groups) = confined("agent_id", &reach, 2);
            let mut values = vec![Sql::from(agent_id)];
            values.extend(groups);
            let devices: Vec<DeviceExperience> = c
                .prepare(&format!(
                    "SELECT {DEVICE_COLUMNS} FROM experience_device
                     WHERE (?1 IS NULL OR agent_id = ?1){condition} ORDER BY agent_id"
                ))?
                .query_map(rusqlite::params_from_iter(values.iter()), device_row)?
                .collect::<rusqlite::Result<_>>()?;
            Ok(devices)
        })
        .await
    }

    async fn experience_revisions(&self, reach: &Reach) -> Result<Vec<(String, i64)>> {
        let reach = reach.clone();
        self.read(move |c| revisions(c, &reach)).await
    }

    async fn recent_rows(
        &self,
        reach: &Reach,
        agent_ids: &[String],
        wanted: RecentWanted<'_>,
    ) -> Result<Vec<RecentRows>> {
        let (reach, agent_ids) = (reach.clone(), agent_ids.to_vec());
        let (hourly, raw): (Vec<String>, Vec<String>) =
            (wanted.hourly.iter().map(|m| m.to_string()).collect(), wanted.raw.iter().map(|m| m.to_string()).collect());
        let (hours_since_ms, raw_since_ms) = (wanted.hours_since_ms, wanted.raw_since_ms);
        self.read(move |c| {
            let hourly: Vec<&str> = hourly.iter().map(String::as_str).collect();
            let raw: Vec<&str> = raw.iter().map(String::as_str).collect();
            recent_rows(
                c,
                &reach,
                &agent_ids,
                RecentWanted { hourly: &hourly, hours_since_ms, raw: &raw, raw_since_ms },
            )
        })
        .await
    }

    async fn averages(
        &self,
        reach: &Reach,
        metrics: &[&str],
        since_ms: i64,
        resolution: Resolution,
    ) -> Result<Vec<Averaged>> {
        let (reach, metrics) = (reach.clone(), metrics.iter().map(|m| m.to_string()).collect::<Vec<_>>());
        self.read(move |c| {
            let mut averaged = Vec::new();
            // A metric at a time, each device's rows through its primary key: grouped in the
            // order they are read, where all metrics at once were sorted (a temporary B-tree
            // of every row: 36 s for 7 days of 10,000 devices, against 11 s).
            for metric in metrics {
                let (sql, values) = over_window(
                    &reach,
                    "d.agent_id",
                    Sql::from(metric.clone()),
                    since_ms,
                    resolution,
                    |condition| {
                        format!(
                            "SELECT d.agent_id, COUNT(*), AVG(s.value), MIN(s.value), MAX(s.value), MAX(s.at_ms)
                             FROM experience_device d CROSS JOIN experience_sample s
                             WHERE s.agent_id = d.agent_id AND s.metric = ?1 AND s.at_ms >= ?2{condition}
                             GROUP BY d.agent_id ORDER BY d.agent_id"
                        )
                    },
                    |condition| {
                        format!(
                            "SELECT d.agent_id, SUM(r.count), SUM(r.sum) / SUM(r.count), MIN(r.min), MAX(r.max), MAX(r.start_ms)
                             FROM experience_device d CROSS JOIN experience_rollup r
                             WHERE r.agent_id = d.agent_id AND r.metric = ?1 AND r.start_ms >= ?2 AND r.span_ms = ?3{condition}
                             GROUP BY d.agent_id ORDER BY d.agent_id"
                        )
                    },
                );
                let mut statement = c.prepare_cached(&sql)?;
                let rows = statement.query_map(rusqlite::params_from_iter(values.iter()), |r| {
                    Ok(Averaged {
                        agent_id: r.get(0)?,
                        metric: metric.clone(),
                        samples: r.get(1)?,
                        average: r.get(2)?,
                        min: r.get(3)?,
                        max: r.get(4)?,
                        last_ms: r.get(5)?,
                    })
                })?;
                for row in rows {
                    averaged.push(row?);
                }
            }
            averaged.sort_by(|a, b| a.agent_id.cmp(&b.agent_id).then_with(|| a.metric.cmp(&b.metric)));
            Ok(averaged)
        })
        .await
    }

    async fn series(&self, reach: &Reach, metric: &str, since_ms: i64, resolution: Resolution) -> Result<Vec<Point>> {
        let (reach, metric) = (reach.clone(), metric.to_string());
        self.read(move |c| {
            // Each device's rows through its primary key, as averages reads them.
            let (sql, values) = over_window(
                &reach,
                "d.agent_id",
                Sql::from(metric),
                since_ms,
                resolution,
                |condition| {
                    format!(
                        "SELECT d.agent_id, s.at_ms, s.value FROM experience_device d CROSS JOIN experience_sample s
                         WHERE s.agent_id = d.agent_id AND s.metric = ?1 AND s.at_ms >= ?2{condition}
                         ORDER BY d.agent_id, s.at_ms"
                    )
                },
                |condition| {
                    format!(
                        "SELECT d.agent_id, r.start_ms, r.sum / r.count FROM experience_device d CROSS JOIN experience_rollup r
                         WHERE r.agent_id = d.agent_id AND r.metric = ?1 AND r.start_ms >= ?2 AND r.span_ms = ?3{condition}
                         ORDER BY d.agent_id, r.start_ms"
                    )
                },
            );
            let mut statement = c.prepare_cached(&sql)?;
            let rows = statement.query_map(rusqlite::params_from_iter(values.iter()), |r| {
                Ok(Point { agent_id: r.get(0)?, at_ms: r.get(1)?, value: r.get(2)? })
            })?;
            rows.collect::<rusqlite::Result<_>>()
        })
        .await
    }

    async fn recent_values(&self, agent_id: &str, wanted: &[(&str, usize)]) -> Result<Vec<Vec<(i64, f64)>>> {
        let agent_id = agent_id.to_string();
        let wanted: Vec<(String, i64)> = wanted.iter().map(|(metric, n)| (metric.to_string(), *n as i64)).collect();
        self.read(move |c| {
            let mut statement = c.prepare_cached(
                "SELECT at_ms, value FROM experience_sample WHERE agent_id = ?1 AND metric = ?2 ORDER BY at_ms DESC LIMIT ?3",
            )?;
            wanted
                .iter()
                .map(|(metric, n)| {
                    statement.query_map(params![agent_id, metric, n], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
                })
                .collect()
        })
        .await
    }

    async fn observe(&self, agent_id: &str, observed: &[(&str, Observed)]) -> Result<()> {
        self.observe_grouped(agent_id, observed).await
    }

    async fn occurrences(&self, reach: &Reach, since_ms: i64, signal: Option<&str>) -> Result<Vec<Occurrence>> {
        let (reach, signal) = (reach.clone(), signal.map(str::to_string));
        self.read(move |c| {
            let (condition, groups) = confined("agent_id", &reach, 3);
            let mut values = vec![Sql::from(since_ms), Sql::from(signal)];
            values.extend(groups);
            let mut statement = c.prepare(&format!(
                "SELECT agent_id, signal, started_ms, last_ms, ended_ms, peak FROM experience_signal
                 WHERE last_ms >= ?1 AND (?2 IS NULL OR signal = ?2){condition}
                 ORDER BY last_ms DESC, agent_id, signal"
            ))?;
            let rows = statement.query_map(rusqlite::params_from_iter(values.iter()), |r| {
                Ok(Occurrence {
                    agent_id: r.get(0)?,
                    signal: r.get(1)?,
                    started_ms: r.get(2)?,
                    last_ms: r.get(3)?,
                    ended_ms: r.get(4)?,
                    peak: r.get(5)?,
                })
            })?;
            rows.collect::<rusqlite::Result<_>>()
        })
        .await
    }

    async fn part_values(
        &self,
        breakdown: Breakdown,
        reach: &Reach,
        metric: &str,
        since_ms: i64,
        resolution: Resolution,
    ) -> Result<Vec<PartValue>> {
        let (reach, metric) = (reach.clone(), metric.to_string());
        self.read(move |c| part_values(c, breakdown, &reach, &metric, since_ms, resolution)).await
    }

    async fn package_spans(&self, reach: &Reach, since_ms: i64) -> Result<Vec<PackageSpan>> {
        let reach = reach.clone();
        self.read(move |c| read_package_spans(c, &reach, since_ms)).await
    }

    async fn sweep_experience(&self, now_ms: i64, retention: Retention) -> Result<ExperienceSwept> {
        self.run(move |c| {
            let tx = c.transaction()?;
            let raw = tx.execute(&sweep_statement("experience_sample", false, '?'), [now_ms - retention.raw_ms])?;
            let rollup = |span_ms: i64, keep_ms: i64| {
                // A span goes once it ended before the cut: its start plus its length.
                tx.execute(
                    &sweep_statement("experience_rollup", true, '?'),
                    params![span_ms, now_ms - keep_ms - span_ms],
                )
            };
            let hourly = rollup(crate::HOUR_MS, retention.hourly_ms)?;
            // An occurrence is kept as long as the hours it happened in.
            tx.execute(
                "DELETE FROM experience_signal WHERE ended_ms IS NOT NULL AND ended_ms < ?1",
                [now_ms - retention.hourly_ms],
            )?;
            let daily = rollup(crate::DAY_MS, retention.daily_ms)?;
            let parts = sweep_parts(&tx, now_ms, retention)?;
            tx.commit()?;
            Ok(ExperienceSwept {
                raw: raw as u64 + parts.0,
                hourly: hourly as u64 + parts.1,
                daily: daily as u64 + parts.2,
            })
        })
        .await
    }
}
