//! Experience samples on PostgreSQL (see [`crate::ExperienceStore`] and the SQLite twin).

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::fleet::parts::Breakdown;
use toolgate_domain::groups::Reach;

use super::confinement::{reach_agents, reach_param};
use super::experience_parts::{part_values, read_package_spans, save_packages, save_parts, sweep_parts};
use super::experience_recent::{DEVICE_COLUMNS, device_row};
use super::{Pg, PostgresStore, execute, pg, rows};
use crate::experience::{
    Averaged, DeviceExperience, ExperienceStore, ExperienceSwept, Observed, Occurrence, PackageSpan, PartValue, Point,
    RecentRows, RecentWanted, Resolution, Result, Retention, Saved, measured_name, rollups, sweep_statement,
};

/// ` AND` the row's agent (`column`) is within the reach bound at `$n` (nothing for the whole fleet).
pub(super) fn confined(column: &str, groups: &Option<Vec<String>>, n: usize) -> String {
    match groups {
        Some(_) => format!(" AND {column} IN ({})", reach_agents(n)),
        None => String::new(),
    }
}

/// A read of one metric over a window at a resolution: the query written around the reach's
/// condition, and its parameters (the metric $1, the start $2, the span $3 for rollups, then the
/// reach's). The placeholders are counted here once, not in every read.
pub(super) struct Window {
    since_ms: i64,
    span_ms: Option<i64>,
    groups: Option<Vec<String>>,
}

impl Window {
    pub(super) fn new(reach: &Reach, since_ms: i64, resolution: Resolution) -> Window {
        Window { since_ms, span_ms: resolution.span_ms(), groups: reach_param(reach) }
    }

    /// `raw` or `rollup` (as the resolution asks) around the reach's condition.
    pub(super) fn sql(&self, raw: impl FnOnce(&str) -> String, rollup: impl FnOnce(&str) -> String) -> String {
        let condition = confined("agent_id", &self.groups, if self.span_ms.is_some() { 4 } else { 3 });
        if self.span_ms.is_some() { rollup(&condition) } else { raw(&condition) }
    }

    pub(super) fn params<'a>(&'a self, metric: &'a (dyn ToSql + Sync)) -> Vec<&'a (dyn ToSql + Sync)> {
        let mut values: Vec<&(dyn ToSql + Sync)> = vec![metric, &self.since_ms];
        if let Some(span_ms) = &self.span_ms {
            values.push(span_ms);
        }
        if let Some(groups) = &self.groups {
            values.push(groups);
        }
        values
    }
}

#[async_trait]
impl ExperienceStore for PostgresStore {
    async fn keep_experience(&self, agent_id: &str, report: &ExperienceReport, received_at_ms: i64) -> Result<Saved> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let (mut metrics, mut times, mut values) = (Vec::new(), Vec::new(), Vec::new());
            for sample in &report.samples {
                for (metric, value) in &sample.values {
                    metrics.push(metric.as_str());
                    times.push(sample.at_ms);
                    values.push(*value);
                }
            }
            // One statement for the whole batch: arrays unnested into rows; what it kept (not
            // what was kept before) is rolled up.
            let kept: Vec<(String, i64, f64)> = rows(
                &tx,
                "INSERT INTO experience_sample (agent_id, metric, at_ms, value)
                 SELECT $1, m, t, v FROM UNNEST($2::text[], $3::bigint[], $4::float8[]) AS u(m, t, v)
                 ON CONFLICT DO NOTHING RETURNING metric, at_ms, value",
                &[&agent_id, &metrics, &times, &values],
            )
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect::<Pg<_>>()?;
            let rolled = rollups(&kept);
            let columns = (
                rolled.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
                rolled.iter().map(|r| r.span_ms).collect::<Vec<_>>(),
                rolled.iter().map(|r| r.start_ms).collect::<Vec<_>>(),
                rolled.iter().map(|r| r.count).collect::<Vec<_>>(),
                rolled.iter().map(|r| r.sum).collect::<Vec<_>>(),
                rolled.iter().map(|r| r.min).collect::<Vec<_>>(),
                rolled.iter().map(|r| r.max).collect::<Vec<_>>(),
            );
            execute(
                &tx,
                "INSERT INTO experience_rollup AS r (agent_id, metric, span_ms, start_ms, count, sum, min, max)
                 SELECT $1, * FROM UNNEST($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::float8[], $7::float8[], $8::float8[])
                 ON CONFLICT (agent_id, metric, span_ms, start_ms) DO UPDATE SET count = r.count + excluded.count,
                     sum = r.sum + excluded.sum, min = LEAST(r.min, excluded.min), max = GREATEST(r.max, excluded.max)",
                &[&agent_id, &columns.0, &columns.1, &columns.2, &columns.3, &columns.4, &columns.5, &columns.6],
            )
            .await?;
            save_parts(&tx, agent_id, report).await?;
            save_packages(&tx, agent_id, report).await?;
            let added = kept.len() as u64;
            if let Some(newest) = report.samples.iter().max_by_key(|s| s.at_ms) {
                let absent = serde_json::to_string(&report.absent).expect("strings");
                execute(
                    &tx,
                    "INSERT INTO experience_device (agent_id, measured, absent, fullest_filesystem, last_sample_ms, received_at_ms)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (agent_id) DO UPDATE SET measured = excluded.measured, absent = excluded.absent,
                         fullest_filesystem = excluded.fullest_filesystem, last_sample_ms = excluded.last_sample_ms,
                         received_at_ms = excluded.received_at_ms
                     WHERE excluded.last_sample_ms >= experience_device.last_sample_ms",
                    &[&agent_id, &measured_name(report), &absent, &newest.fullest_filesystem, &newest.at_ms, &received_at_ms],
                )
                .await?;
            }
            let mut device = None;
            if added > 0 {
                // Under the row's lock: this report's revision, and the row as it left it.
                let revised = rows(
                    &tx,
                    &format!("UPDATE experience_device SET revision = revision + 1 WHERE agent_id = $1 RETURNING {DEVICE_COLUMNS}"),
                    &[&agent_id],
                )
                .await?;
                device = revised.first().map(device_row).transpose()?;
            }
            tx.commit().await?;
            Ok(Saved { added, device })
        })
        .await
    }

    async fn device_experience(&self, reach: &Reach, agent_id: Option<&str>) -> Result<Vec<DeviceExperience>> {
        pg(async {
            let c = self.conn().await?;
            let groups = reach_param(reach);
            let mut values: Vec<&(dyn ToSql + Sync)> = vec![&agent_id];
            if let Some(groups) = &groups {
                values.push(groups);
            }
            let sql = format!(
                "SELECT {DEVICE_COLUMNS} FROM experience_device WHERE ($1::text IS NULL OR agent_id = $1){} ORDER BY agent_id",
                confined("agent_id", &groups, 2)
            );
            let devices = rows(&*c, &sql, &values).await?.iter().map(device_row).collect::<Pg<Vec<_>>>()?;
            Ok(devices)
        })
        .await
    }

    async fn experience_revisions(&self, reach: &Reach) -> Result<Vec<(String, i64)>> {
        pg(self.revisions(reach)).await
    }

    async fn recent_rows(
        &self,
        reach: &Reach,
        agent_ids: &[String],
        wanted: RecentWanted<'_>,
    ) -> Result<Vec<RecentRows>> {
        pg(self.recent_rows_of(reach, agent_ids, wanted)).await
    }

    async fn averages(
        &self,
        reach: &Reach,
        metrics: &[&str],
        since_ms: i64,
        resolution: Resolution,
    ) -> Result<Vec<Averaged>> {
        pg(async {
            let metrics: Vec<&str> = metrics.to_vec();
            let window = Window::new(reach, since_ms, resolution);
            let sql = window.sql(
                |condition| {
                    format!(
                        "SELECT agent_id, metric, COUNT(*), AVG(value), MIN(value), MAX(value), MAX(at_ms) FROM experience_sample
                         WHERE metric = ANY($1) AND at_ms >= $2{condition} GROUP BY agent_id, metric ORDER BY agent_id, metric"
                    )
                },
                |condition| {
                    format!(
                        "SELECT agent_id, metric, SUM(count)::bigint, SUM(sum) / SUM(count), MIN(min), MAX(max), MAX(start_ms)
                         FROM experience_rollup WHERE metric = ANY($1) AND start_ms >= $2 AND span_ms = $3{condition}
                         GROUP BY agent_id, metric ORDER BY agent_id, metric"
                    )
                },
            );
            let values = window.params(&metrics);
            rows(&*self.conn().await?, &sql, &values)
                .await?
                .iter()
                .map(|r| {
                    Ok(Averaged {
                        agent_id: r.try_get(0)?,
                        metric: r.try_get(1)?,
                        samples: r.try_get(2)?,
                        average: r.try_get(3)?,
                        min: r.try_get(4)?,
                        max: r.try_get(5)?,
                        last_ms: r.try_get(6)?,
                    })
                })
                .collect()
        })
        .await
    }

    async fn series(&self, reach: &Reach, metric: &str, since_ms: i64, resolution: Resolution) -> Result<Vec<Point>> {
        pg(async {
            let window = Window::new(reach, since_ms, resolution);
            let sql = window.sql(
                |condition| {
                    format!(
                        "SELECT agent_id, at_ms, value FROM experience_sample
                         WHERE metric = $1 AND at_ms >= $2{condition} ORDER BY agent_id, at_ms"
                    )
                },
                |condition| {
                    format!(
                        "SELECT agent_id, start_ms, sum / count FROM experience_rollup
                         WHERE metric = $1 AND start_ms >= $2 AND span_ms = $3{condition} ORDER BY agent_id, start_ms"
                    )
                },
            );
            let values = window.params(&metric);
            rows(&*self.conn().await?, &sql, &values)
                .await?
                .iter()
                .map(|r| Ok(Point { agent_id: r.try_get(0)?, at_ms: r.try_get(1)?, value: r.try_get(2)? }))
                .collect()
        })
        .await
    }

    async fn recent_values(&self, agent_id: &str, wanted: &[(&str, usize)]) -> Result<Vec<Vec<(i64, f64)>>> {
        pg(async {
            let c = self.conn().await?;
            let mut answers = Vec::with_capacity(wanted.len());
            for (metric, n) in wanted {
                let n = *n as i64;
                let values = rows(
                    &*c,
                    "SELECT at_ms, value FROM experience_sample WHERE agent_id = $1 AND metric = $2 ORDER BY at_ms DESC LIMIT $3",
                    &[&agent_id, metric, &n],
                )
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<std::result::Result<_, tokio_postgres::Error>>()?;
                answers.push(values);
            }
            Ok(answers)
        })
        .await
    }

    async fn observe(&self, agent_id: &str, observed: &[(&str, Observed)]) -> Result<()> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            for (signal, observed) in observed {
                match *observed {
                    Observed::Holding { started_ms, last_ms, peak, rising } => {
                        let furthest = if rising { "GREATEST(peak, $3)" } else { "LEAST(peak, $3)" };
                        let carried = execute(
                            &tx,
                            &format!(
                                "UPDATE experience_signal SET last_ms = GREATEST(last_ms, $4), peak = {furthest}
                                 WHERE agent_id = $1 AND signal = $2 AND ended_ms IS NULL"
                            ),
                            &[&agent_id, signal, &peak, &last_ms],
                        )
                        .await?;
                        if carried == 0 {
                            execute(
                                &tx,
                                "INSERT INTO experience_signal (agent_id, signal, started_ms, last_ms, ended_ms, peak)
                                 VALUES ($1, $2, $3, $4, NULL, $5) ON CONFLICT DO NOTHING",
                                &[&agent_id, signal, &started_ms, &last_ms, &peak],
                            )
                            .await?;
                        }
                    }
                    Observed::Ended { at_ms } => {
                        execute(
                            &tx,
                            "UPDATE experience_signal SET ended_ms = $3
                             WHERE agent_id = $1 AND signal = $2 AND ended_ms IS NULL AND last_ms < $3",
                            &[&agent_id, signal, &at_ms],
                        )
                        .await?;
                    }
                }
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn occurrences(&self, reach: &Reach, since_ms: i64, signal: Option<&str>) -> Result<Vec<Occurrence>> {
        pg(async {
            let groups = reach_param(reach);
            let sql = format!(
                "SELECT agent_id, signal, started_ms, last_ms, ended_ms, peak FROM experience_signal
                 WHERE last_ms >= $1 AND ($2::text IS NULL OR signal = $2){} ORDER BY last_ms DESC, agent_id, signal",
                confined("agent_id", &groups, 3)
            );
            let mut values: Vec<&(dyn ToSql + Sync)> = vec![&since_ms, &signal];
            if let Some(groups) = &groups {
                values.push(groups);
            }
            rows(&*self.conn().await?, &sql, &values)
                .await?
                .iter()
                .map(|r| {
                    Ok(Occurrence {
                        agent_id: r.try_get(0)?,
                        signal: r.try_get(1)?,
                        started_ms: r.try_get(2)?,
                        last_ms: r.try_get(3)?,
                        ended_ms: r.try_get(4)?,
                        peak: r.try_get(5)?,
                    })
                })
                .collect()
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
        pg(async { part_values(&*self.conn().await?, breakdown, reach, metric, since_ms, resolution).await }).await
    }

    async fn package_spans(&self, reach: &Reach, since_ms: i64) -> Result<Vec<PackageSpan>> {
        pg(async { read_package_spans(&*self.conn().await?, reach, since_ms).await }).await
    }

    async fn sweep_experience(&self, now_ms: i64, retention: Retention) -> Result<ExperienceSwept> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            let raw = execute(&tx, &sweep_statement("experience_sample", false, '$'), &[&(now_ms - retention.raw_ms)])
                .await?;
            // A span goes once it ended before the cut: its start plus its length.
            let rollup = &sweep_statement("experience_rollup", true, '$');
            let (hour, day) = (crate::HOUR_MS, crate::DAY_MS);
            let hourly = execute(&tx, rollup, &[&hour, &(now_ms - retention.hourly_ms - hour)]).await?;
            // An occurrence is kept as long as the hours it happened in.
            let ended_before = now_ms - retention.hourly_ms;
            execute(
                &tx,
                "DELETE FROM experience_signal WHERE ended_ms IS NOT NULL AND ended_ms < $1",
                &[&ended_before],
            )
            .await?;
            let daily = execute(&tx, rollup, &[&day, &(now_ms - retention.daily_ms - day)]).await?;
            let parts = sweep_parts(&tx, now_ms, retention).await?;
            tx.commit().await?;
            Ok(ExperienceSwept { raw: raw + parts.0, hourly: hourly + parts.1, daily: daily + parts.2 })
        })
        .await
    }
}
