//! The rows of a server's recent views of devices (docs/experience.md, "At scale"), in SQLite.
//! Each device is read through its primary keys: its device row (confined to the reader's
//! reach: a device outside it is left out, and nothing else of it is read), then its hourly
//! rollups and raw samples of the metrics asked.

use rusqlite::types::Value as Sql;
use rusqlite::{Connection, Row, params};
use toolgate_domain::groups::Reach;

use super::experience::confined;
use crate::HOUR_MS;
use crate::experience::{DeviceExperience, RecentRows, RecentWanted};

/// The columns [`device_row`] reads, in its order.
pub(super) const DEVICE_COLUMNS: &str = "agent_id, measured, absent, fullest_filesystem, last_sample_ms, revision";

pub(super) fn device_row(r: &Row) -> rusqlite::Result<DeviceExperience> {
    let absent: String = r.get(2)?;
    Ok(DeviceExperience {
        agent_id: r.get(0)?,
        measured: r.get(1)?,
        absent: serde_json::from_str(&absent).unwrap_or_default(),
        fullest_filesystem: r.get(3)?,
        last_sample_ms: r.get(4)?,
        revision: r.get(5)?,
    })
}

pub(super) fn revisions(c: &Connection, reach: &Reach) -> rusqlite::Result<Vec<(String, i64)>> {
    let (condition, groups) = confined("agent_id", reach, 1);
    let mut statement = c.prepare(&format!(
        "SELECT agent_id, revision FROM experience_device WHERE 1 = 1{condition} ORDER BY agent_id"
    ))?;
    let rows = statement.query_map(rusqlite::params_from_iter(groups.iter()), |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

pub(super) fn recent_rows(
    c: &Connection,
    reach: &Reach,
    agent_ids: &[String],
    wanted: RecentWanted<'_>,
) -> rusqlite::Result<Vec<RecentRows>> {
    let (condition, groups) = confined("agent_id", reach, 2);
    let mut device =
        c.prepare(&format!("SELECT {DEVICE_COLUMNS} FROM experience_device WHERE agent_id = ?1{condition}"))?;
    let mut hours = c.prepare_cached(
        "SELECT metric, start_ms, count, sum FROM experience_rollup
         WHERE agent_id = ?1 AND metric IN (SELECT value FROM json_each(?2)) AND span_ms = ?3 AND start_ms >= ?4
         ORDER BY metric, start_ms",
    )?;
    let mut raw = c.prepare_cached(
        "SELECT metric, at_ms, value FROM experience_sample
         WHERE agent_id = ?1 AND metric IN (SELECT value FROM json_each(?2)) AND at_ms >= ?3 ORDER BY metric, at_ms",
    )?;
    let hourly = serde_json::to_string(wanted.hourly).expect("strings");
    let sampled = serde_json::to_string(wanted.raw).expect("strings");
    let mut read = Vec::with_capacity(agent_ids.len());
    for agent_id in agent_ids {
        let mut values = vec![Sql::from(agent_id.clone())];
        values.extend(groups.clone());
        let Some(found) = device.query_map(rusqlite::params_from_iter(values.iter()), device_row)?.next() else {
            continue;
        };
        let device = found?;
        let hours = hours
            .query_map(params![agent_id, hourly, HOUR_MS, wanted.hours_since_ms], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?
            .collect::<rusqlite::Result<_>>()?;
        let raw = raw
            .query_map(params![agent_id, sampled, wanted.raw_since_ms], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        read.push(RecentRows { device, hours, raw });
    }
    Ok(read)
}
