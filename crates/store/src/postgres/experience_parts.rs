//! The per-program experience series on PostgreSQL (see the SQLite twin): the parts of
//! [`crate::ExperienceStore`] that keep, read and sweep `experience_app_sample` and
//! `experience_app_rollup`.

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::groups::Reach;

use super::confinement::reach_param;
use super::experience::confined;
use super::{Pg, execute, rows};
use crate::experience::{AppValue, Resolution, Retention, app_rows, rollups};

/// Keeps a report's per-program counts (one kept before is kept once) and rolls up the new, in
/// one statement each.
pub(super) async fn save_apps(tx: &impl GenericClient, agent_id: &str, report: &ExperienceReport) -> Pg<()> {
    let all = app_rows(report);
    if all.is_empty() {
        return Ok(());
    }
    let apps: Vec<&str> = all.iter().map(|r| r.0.as_str()).collect();
    let metrics: Vec<&str> = all.iter().map(|r| r.1.as_str()).collect();
    let times: Vec<i64> = all.iter().map(|r| r.2).collect();
    let values: Vec<f64> = all.iter().map(|r| r.3).collect();
    let kept: Vec<((String, String), i64, f64)> = rows(
        tx,
        "INSERT INTO experience_app_sample (agent_id, app, metric, at_ms, value)
         SELECT $1, a, m, t, v FROM UNNEST($2::text[], $3::text[], $4::bigint[], $5::float8[]) AS u(a, m, t, v)
         ON CONFLICT DO NOTHING RETURNING app, metric, at_ms, value",
        &[&agent_id, &apps, &metrics, &times, &values],
    )
    .await?
    .iter()
    .map(|r| Ok(((r.try_get(0)?, r.try_get(1)?), r.try_get(2)?, r.try_get(3)?)))
    .collect::<Pg<_>>()?;
    let rolled = rollups(&kept);
    let column =
        |f: fn(&crate::experience::Rollup<(String, String)>) -> i64| rolled.iter().map(f).collect::<Vec<i64>>();
    let (spans, starts, counts) = (column(|r| r.span_ms), column(|r| r.start_ms), column(|r| r.count));
    let apps: Vec<&str> = rolled.iter().map(|r| r.key.0.as_str()).collect();
    let metrics: Vec<&str> = rolled.iter().map(|r| r.key.1.as_str()).collect();
    let sums: Vec<f64> = rolled.iter().map(|r| r.sum).collect();
    let mins: Vec<f64> = rolled.iter().map(|r| r.min).collect();
    let maxes: Vec<f64> = rolled.iter().map(|r| r.max).collect();
    execute(
        tx,
        "INSERT INTO experience_app_rollup AS r (agent_id, app, metric, span_ms, start_ms, count, sum, min, max)
         SELECT $1, * FROM UNNEST($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::float8[], $8::float8[], $9::float8[])
         ON CONFLICT (agent_id, app, metric, span_ms, start_ms) DO UPDATE SET count = r.count + excluded.count,
             sum = r.sum + excluded.sum, min = LEAST(r.min, excluded.min), max = GREATEST(r.max, excluded.max)",
        &[&agent_id, &apps, &metrics, &spans, &starts, &counts, &sums, &mins, &maxes],
    )
    .await?;
    Ok(())
}

pub(super) async fn app_values(
    c: &impl GenericClient,
    reach: &Reach,
    metric: &str,
    since_ms: i64,
    resolution: Resolution,
) -> Pg<Vec<AppValue>> {
    let groups = reach_param(reach);
    let span_ms = resolution.span_ms();
    let mut values: Vec<&(dyn ToSql + Sync)> = vec![&metric, &since_ms];
    let sql = match &span_ms {
        None => format!(
            "SELECT agent_id, app, at_ms, value FROM experience_app_sample
             WHERE metric = $1 AND at_ms >= $2{} ORDER BY agent_id, app, at_ms",
            confined("agent_id", &groups, 3)
        ),
        Some(span_ms) => {
            values.push(span_ms);
            format!(
                "SELECT agent_id, app, start_ms, sum FROM experience_app_rollup
                 WHERE metric = $1 AND start_ms >= $2 AND span_ms = $3{} ORDER BY agent_id, app, start_ms",
                confined("agent_id", &groups, 4)
            )
        }
    };
    if let Some(groups) = &groups {
        values.push(groups);
    }
    rows(c, &sql, &values)
        .await?
        .iter()
        .map(|r| {
            Ok(AppValue { agent_id: r.try_get(0)?, app: r.try_get(1)?, at_ms: r.try_get(2)?, value: r.try_get(3)? })
        })
        .collect()
}

/// Deletes per-program rows older than `retention` allows: (raw, hourly, daily) removed.
pub(super) async fn sweep_apps(tx: &impl GenericClient, now_ms: i64, retention: Retention) -> Pg<(u64, u64, u64)> {
    let raw =
        execute(tx, "DELETE FROM experience_app_sample WHERE at_ms < $1", &[&(now_ms - retention.raw_ms)]).await?;
    let rollup = "DELETE FROM experience_app_rollup WHERE span_ms = $1 AND start_ms + $1 <= $2";
    let hourly = execute(tx, rollup, &[&crate::HOUR_MS, &(now_ms - retention.hourly_ms)]).await?;
    let daily = execute(tx, rollup, &[&crate::DAY_MS, &(now_ms - retention.daily_ms)]).await?;
    Ok((raw, hourly, daily))
}
