//! Experience samples on PostgreSQL (see [`crate::ExperienceStore`] and the SQLite twin).

use std::collections::BTreeMap;

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::groups::Reach;

use super::confinement::{reach_agents, reach_param};
use super::{PostgresStore, execute, pg, rows};
use crate::experience::{DeviceExperience, ExperienceStore, Result, measured_name};

/// ` AND` the row's agent (`column`) is within the reach bound at `$n` (nothing for the whole fleet).
fn confined(column: &str, groups: &Option<Vec<String>>, n: usize) -> String {
    match groups {
        Some(_) => format!(" AND {column} IN ({})", reach_agents(n)),
        None => String::new(),
    }
}

#[async_trait]
impl ExperienceStore for PostgresStore {
    async fn save_experience(&self, agent_id: &str, report: &ExperienceReport, received_at_ms: i64) -> Result<u64> {
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
            // One statement for the whole batch: arrays unnested into rows.
            let added = execute(
                &tx,
                "INSERT INTO experience_sample (agent_id, metric, at_ms, value)
                 SELECT $1, m, t, v FROM UNNEST($2::text[], $3::bigint[], $4::float8[]) AS u(m, t, v)
                 ON CONFLICT DO NOTHING",
                &[&agent_id, &metrics, &times, &values],
            )
            .await?;
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
            tx.commit().await?;
            Ok(added)
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
                "SELECT d.agent_id, d.measured, d.absent, d.fullest_filesystem, d.last_sample_ms FROM experience_device d
                 WHERE ($1::text IS NULL OR d.agent_id = $1){} ORDER BY d.agent_id",
                confined("d.agent_id", &groups, 2)
            );
            let mut devices = Vec::new();
            for r in rows(&*c, &sql, &values).await? {
                let absent: String = r.try_get(2)?;
                devices.push(DeviceExperience {
                    agent_id: r.try_get(0)?,
                    measured: r.try_get(1)?,
                    absent: serde_json::from_str(&absent).unwrap_or_default(),
                    fullest_filesystem: r.try_get(3)?,
                    last_sample_ms: r.try_get(4)?,
                    latest: BTreeMap::new(),
                });
            }
            let sql = format!(
                "SELECT DISTINCT ON (s.agent_id, s.metric) s.agent_id, s.metric, s.at_ms, s.value FROM experience_sample s
                 WHERE ($1::text IS NULL OR s.agent_id = $1){} ORDER BY s.agent_id, s.metric, s.at_ms DESC",
                confined("s.agent_id", &groups, 2)
            );
            for r in rows(&*c, &sql, &values).await? {
                let agent: String = r.try_get(0)?;
                if let Ok(at) = devices.binary_search_by(|d| d.agent_id.as_str().cmp(&agent)) {
                    devices[at].latest.insert(r.try_get(1)?, (r.try_get(2)?, r.try_get(3)?));
                }
            }
            Ok(devices)
        })
        .await
    }
}
