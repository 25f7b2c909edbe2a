//! Experience samples in SQLite (see [`crate::ExperienceStore`]).

use std::collections::BTreeMap;

use async_trait::async_trait;
use rusqlite::params;
use rusqlite::types::Value as Sql;
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::groups::Reach;

use super::SqliteStore;
use super::confinement::{reach_agents, reach_param};
use crate::experience::{DeviceExperience, ExperienceStore, Result, measured_name};

/// ` AND` the row's agent (`column`) is within the reach whose JSON parameter is `?n`; the
/// value to bind there (nothing for the whole fleet).
fn confined(column: &str, reach: &Reach, n: usize) -> (String, Option<Sql>) {
    match reach_param(reach) {
        Some(groups) => (format!(" AND {column} IN ({})", reach_agents(&format!("?{n}"))), Some(groups.into())),
        None => (String::new(), None),
    }
}

#[async_trait]
impl ExperienceStore for SqliteStore {
    async fn save_experience(&self, agent_id: &str, report: &ExperienceReport, received_at_ms: i64) -> Result<u64> {
        let (agent_id, report) = (agent_id.to_string(), report.clone());
        self.run(move |c| {
            let tx = c.transaction()?;
            let mut added = 0u64;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT OR IGNORE INTO experience_sample (agent_id, metric, at_ms, value) VALUES (?1, ?2, ?3, ?4)",
                )?;
                for sample in &report.samples {
                    for (metric, value) in &sample.values {
                        added += insert.execute(params![agent_id, metric, sample.at_ms, value])? as u64;
                    }
                }
            }
            if let Some(newest) = report.samples.iter().max_by_key(|s| s.at_ms) {
                let absent = serde_json::to_string(&report.absent).expect("strings");
                tx.execute(
                    "INSERT INTO experience_device (agent_id, measured, absent, fullest_filesystem, last_sample_ms, received_at_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (agent_id) DO UPDATE SET measured = excluded.measured, absent = excluded.absent,
                         fullest_filesystem = excluded.fullest_filesystem, last_sample_ms = excluded.last_sample_ms,
                         received_at_ms = excluded.received_at_ms
                     WHERE excluded.last_sample_ms >= experience_device.last_sample_ms",
                    params![agent_id, measured_name(&report), absent, newest.fullest_filesystem, newest.at_ms, received_at_ms],
                )?;
            }
            tx.commit()?;
            Ok(added)
        })
        .await
    }

    async fn device_experience(&self, reach: &Reach, agent_id: Option<&str>) -> Result<Vec<DeviceExperience>> {
        let (reach, agent_id) = (reach.clone(), agent_id.map(str::to_string));
        self.run(move |c| {
            let (condition, groups) = confined("d.agent_id", &reach, 2);
            let mut values = vec![Sql::from(agent_id.clone())];
            values.extend(groups.clone());
            let mut devices: Vec<DeviceExperience> = c
                .prepare(&format!(
                    "SELECT d.agent_id, d.measured, d.absent, d.fullest_filesystem, d.last_sample_ms FROM experience_device d
                     WHERE (?1 IS NULL OR d.agent_id = ?1){condition} ORDER BY d.agent_id"
                ))?
                .query_map(rusqlite::params_from_iter(values.iter()), |r| {
                    let absent: String = r.get(2)?;
                    Ok(DeviceExperience {
                        agent_id: r.get(0)?,
                        measured: r.get(1)?,
                        absent: serde_json::from_str(&absent).unwrap_or_default(),
                        fullest_filesystem: r.get(3)?,
                        last_sample_ms: r.get(4)?,
                        latest: BTreeMap::new(),
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            let (condition, _) = confined("s.agent_id", &reach, 2);
            let mut newest = c.prepare(&format!(
                "SELECT s.agent_id, s.metric, s.at_ms, s.value FROM experience_sample s
                 WHERE s.at_ms = (SELECT MAX(x.at_ms) FROM experience_sample x WHERE x.agent_id = s.agent_id AND x.metric = s.metric)
                   AND (?1 IS NULL OR s.agent_id = ?1){condition}"
            ))?;
            let mut rows = newest.query(rusqlite::params_from_iter(values.iter()))?;
            while let Some(r) = rows.next()? {
                let agent: String = r.get(0)?;
                if let Ok(at) = devices.binary_search_by(|d| d.agent_id.as_str().cmp(&agent)) {
                    devices[at].latest.insert(r.get(1)?, (r.get(2)?, r.get(3)?));
                }
            }
            Ok(devices)
        })
        .await
    }
}
