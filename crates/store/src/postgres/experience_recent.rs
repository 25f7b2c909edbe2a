//! The rows of a server's recent views of devices (docs/experience.md, "At scale"), on
//! PostgreSQL: one query per table for all the devices asked, each confined to the reader's
//! reach, the devices read first.

use std::collections::BTreeMap;

use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use toolgate_domain::groups::Reach;

use super::confinement::reach_param;
use super::experience::confined;
use super::{Pg, PostgresStore, rows};
use crate::HOUR_MS;
use crate::experience::{DeviceExperience, RecentRows, RecentWanted};

/// The columns [`device_row`] reads, in its order.
pub(super) const DEVICE_COLUMNS: &str = "agent_id, measured, absent, fullest_filesystem, last_sample_ms, revision";

pub(super) fn device_row(r: &Row) -> Pg<DeviceExperience> {
    let absent: String = r.try_get(2)?;
    Ok(DeviceExperience {
        agent_id: r.try_get(0)?,
        measured: r.try_get(1)?,
        absent: serde_json::from_str(&absent).unwrap_or_default(),
        fullest_filesystem: r.try_get(3)?,
        last_sample_ms: r.try_get(4)?,
        revision: r.try_get(5)?,
    })
}

impl PostgresStore {
    pub(super) async fn revisions(&self, reach: &Reach) -> Pg<Vec<(String, i64)>> {
        let groups = reach_param(reach);
        let values: Vec<&(dyn ToSql + Sync)> = groups.iter().map(|g| g as &(dyn ToSql + Sync)).collect();
        let sql = format!(
            "SELECT agent_id, revision FROM experience_device WHERE TRUE{} ORDER BY agent_id",
            confined("agent_id", &groups, 1)
        );
        rows(&*self.conn().await?, &sql, &values).await?.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect()
    }

    pub(super) async fn recent_rows_of(
        &self,
        reach: &Reach,
        agent_ids: &[String],
        wanted: RecentWanted<'_>,
    ) -> Pg<Vec<RecentRows>> {
        let c = self.conn().await?;
        let groups = reach_param(reach);
        let (hourly, raw) = (wanted.hourly.to_vec(), wanted.raw.to_vec());
        let (values, condition) = with_reach(vec![&agent_ids], &groups, 2);
        let sql = format!(
            "SELECT {DEVICE_COLUMNS} FROM experience_device WHERE agent_id = ANY($1){condition} ORDER BY agent_id"
        );
        let mut read: BTreeMap<String, RecentRows> = BTreeMap::new();
        for r in rows(&*c, &sql, &values).await? {
            let device = device_row(&r)?;
            read.insert(device.agent_id.clone(), RecentRows { device, hours: Vec::new(), raw: Vec::new() });
        }
        let (values, condition) = with_reach(vec![&agent_ids, &hourly, &HOUR_MS, &wanted.hours_since_ms], &groups, 5);
        let sql = format!(
            "SELECT agent_id, metric, start_ms, count, sum FROM experience_rollup
             WHERE agent_id = ANY($1) AND metric = ANY($2) AND span_ms = $3 AND start_ms >= $4{condition}
             ORDER BY agent_id, metric, start_ms"
        );
        for r in rows(&*c, &sql, &values).await? {
            if let Some(rows) = read.get_mut(&r.try_get::<_, String>(0)?) {
                rows.hours.push((r.try_get(1)?, r.try_get(2)?, r.try_get(3)?, r.try_get(4)?));
            }
        }
        let (values, condition) = with_reach(vec![&agent_ids, &raw, &wanted.raw_since_ms], &groups, 4);
        let sql = format!(
            "SELECT agent_id, metric, at_ms, value FROM experience_sample
             WHERE agent_id = ANY($1) AND metric = ANY($2) AND at_ms >= $3{condition} ORDER BY agent_id, metric, at_ms"
        );
        for r in rows(&*c, &sql, &values).await? {
            if let Some(rows) = read.get_mut(&r.try_get::<_, String>(0)?) {
                rows.raw.push((r.try_get(1)?, r.try_get(2)?, r.try_get(3)?));
            }
        }
        // In the order asked, as SQLite answers.
        Ok(agent_ids.iter().filter_map(|id| read.remove(id)).collect())
    }
}

/// `values` and the reach's array (bound at `$n`, after them), and the condition that reads it.
fn with_reach<'a>(
    mut values: Vec<&'a (dyn ToSql + Sync)>,
    groups: &'a Option<Vec<String>>,
    n: usize,
) -> (Vec<&'a (dyn ToSql + Sync)>, String) {
    if let Some(groups) = groups {
        values.push(groups);
    }
    (values, confined("agent_id", groups, n))
}
