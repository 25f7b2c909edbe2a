//! The experience series broken down by part (programs, interfaces) on PostgreSQL (see the
//! SQLite twin): keeping, reading and sweeping each breakdown's samples and rollups.

use deadpool_postgres::GenericClient;
use toolgate_domain::fleet::experience::ExperienceReport;
use toolgate_domain::fleet::parts::Breakdown;
use toolgate_domain::groups::Reach;

use super::confinement::reach_param;
use super::experience::{Window, confined};
use super::{Pg, execute, rows};
use crate::experience::{
    PackageSpan, PartValue, Resolution, Retention, Rollup, package_spans, part_rows, part_tables, rollups,
    sweep_statement,
};

/// Keeps a report's values of every breakdown (one kept before is kept once) and rolls up the
/// new, in one statement each.
pub(super) async fn save_parts(tx: &impl GenericClient, agent_id: &str, report: &ExperienceReport) -> Pg<()> {
    for breakdown in Breakdown::ALL {
        let all = part_rows(breakdown, report);
        if all.is_empty() {
            continue;
        }
        let (samples, rollup, part) = part_tables(breakdown);
        let names: Vec<&str> = all.iter().map(|r| r.0.as_str()).collect();
        let metrics: Vec<&str> = all.iter().map(|r| r.1.as_str()).collect();
        let times: Vec<i64> = all.iter().map(|r| r.2).collect();
        let values: Vec<f64> = all.iter().map(|r| r.3).collect();
        let kept: Vec<((String, String), i64, f64)> = rows(
            tx,
            &format!(
                "INSERT INTO {samples} (agent_id, {part}, metric, at_ms, value)
                 SELECT $1, p, m, t, v FROM UNNEST($2::text[], $3::text[], $4::bigint[], $5::float8[]) AS u(p, m, t, v)
                 ON CONFLICT DO NOTHING RETURNING {part}, metric, at_ms, value"
            ),
            &[&agent_id, &names, &metrics, &times, &values],
        )
        .await?
        .iter()
        .map(|r| Ok(((r.try_get(0)?, r.try_get(1)?), r.try_get(2)?, r.try_get(3)?)))
        .collect::<Pg<_>>()?;
        let rolled = rollups(&kept);
        let whole = |f: fn(&Rollup<(String, String)>) -> i64| rolled.iter().map(f).collect::<Vec<i64>>();
        let real = |f: fn(&Rollup<(String, String)>) -> f64| rolled.iter().map(f).collect::<Vec<f64>>();
        let names: Vec<&str> = rolled.iter().map(|r| r.key.0.as_str()).collect();
        let metrics: Vec<&str> = rolled.iter().map(|r| r.key.1.as_str()).collect();
        execute(
            tx,
            &format!(
                "INSERT INTO {rollup} AS r (agent_id, {part}, metric, span_ms, start_ms, count, sum, min, max)
                 SELECT $1, * FROM UNNEST($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::float8[], $8::float8[], $9::float8[])
                 ON CONFLICT (agent_id, {part}, metric, span_ms, start_ms) DO UPDATE SET count = r.count + excluded.count,
                     sum = r.sum + excluded.sum, min = LEAST(r.min, excluded.min), max = GREATEST(r.max, excluded.max)"
            ),
            &[
                &agent_id,
                &names,
                &metrics,
                &whole(|r| r.span_ms),
                &whole(|r| r.start_ms),
                &whole(|r| r.count),
                &real(|r| r.sum),
                &real(|r| r.min),
                &real(|r| r.max),
            ],
        )
        .await?;
    }
    Ok(())
}

pub(super) async fn part_values(
    c: &impl GenericClient,
    breakdown: Breakdown,
    reach: &Reach,
    metric: &str,
    since_ms: i64,
    resolution: Resolution,
) -> Pg<Vec<PartValue>> {
    let (samples, rollup, part) = part_tables(breakdown);
    let window = Window::new(reach, since_ms, resolution);
    let sql = window.sql(
        |condition| {
            format!(
                "SELECT agent_id, {part}, at_ms, value, 1::bigint FROM {samples}
                 WHERE metric = $1 AND at_ms >= $2{condition} ORDER BY agent_id, {part}, at_ms"
            )
        },
        |condition| {
            format!(
                "SELECT agent_id, {part}, start_ms, sum, count FROM {rollup}
                 WHERE metric = $1 AND start_ms >= $2 AND span_ms = $3{condition} ORDER BY agent_id, {part}, start_ms"
            )
        },
    );
    let values = window.params(&metric);
    rows(c, &sql, &values)
        .await?
        .iter()
        .map(|r| {
            Ok(PartValue {
                agent_id: r.try_get(0)?,
                part: r.try_get(1)?,
                at_ms: r.try_get(2)?,
                value: r.try_get(3)?,
                samples: r.try_get(4)?,
            })
        })
        .collect()
}

/// Deletes every breakdown's rows older than `retention` allows: (raw, hourly, daily) removed.
pub(super) async fn sweep_parts(tx: &impl GenericClient, now_ms: i64, retention: Retention) -> Pg<(u64, u64, u64)> {
    let mut swept = (0, 0, 0);
    for breakdown in Breakdown::ALL {
        let (samples, rollup, _) = part_tables(breakdown);
        let raw_cut = now_ms - retention.raw_ms;
        swept.0 += execute(tx, &sweep_statement(samples, false, '$'), &[&raw_cut]).await?;
        let spans = sweep_statement(rollup, true, '$');
        let (hour, day) = (crate::HOUR_MS, crate::DAY_MS);
        swept.1 += execute(tx, &spans, &[&hour, &(now_ms - retention.hourly_ms - hour)]).await?;
        swept.2 += execute(tx, &spans, &[&day, &(now_ms - retention.daily_ms - day)]).await?;
    }
    // A program's versions are kept as long as the days they explain.
    let packages = "DELETE FROM experience_app_package WHERE last_ms < $1";
    swept.2 += execute(tx, packages, &[&(now_ms - retention.daily_ms)]).await?;
    Ok(swept)
}

/// Keeps a report's package spans (see the SQLite twin), in one statement.
pub(super) async fn save_packages(tx: &impl GenericClient, agent_id: &str, report: &ExperienceReport) -> Pg<()> {
    let spans = package_spans(report);
    if spans.is_empty() {
        return Ok(());
    }
    let text = |f: fn(&(String, String, String, i64, i64)) -> &str| spans.iter().map(f).collect::<Vec<&str>>();
    let firsts: Vec<i64> = spans.iter().map(|s| s.3).collect();
    let lasts: Vec<i64> = spans.iter().map(|s| s.4).collect();
    execute(
        tx,
        "INSERT INTO experience_app_package AS k (agent_id, program, package, version, first_ms, last_ms)
         SELECT $1, * FROM UNNEST($2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
         ON CONFLICT (agent_id, program, package, version) DO UPDATE SET
             first_ms = LEAST(k.first_ms, excluded.first_ms), last_ms = GREATEST(k.last_ms, excluded.last_ms)",
        &[&agent_id, &text(|s| &s.0), &text(|s| &s.1), &text(|s| &s.2), &firsts, &lasts],
    )
    .await?;
    Ok(())
}

pub(super) async fn read_package_spans(c: &impl GenericClient, reach: &Reach, since_ms: i64) -> Pg<Vec<PackageSpan>> {
    let groups = reach_param(reach);
    let mut values: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&since_ms];
    if let Some(groups) = &groups {
        values.push(groups);
    }
    let sql = format!(
        "SELECT agent_id, program, package, version, first_ms, last_ms FROM experience_app_package
         WHERE last_ms >= $1{} ORDER BY agent_id, program, first_ms",
        confined("agent_id", &groups, 2)
    );
    rows(c, &sql, &values)
        .await?
        .iter()
        .map(|r| {
            Ok(PackageSpan {
                agent_id: r.try_get(0)?,
                program: r.try_get(1)?,
                package: r.try_get(2)?,
                version: r.try_get(3)?,
                first_ms: r.try_get(4)?,
                last_ms: r.try_get(5)?,
            })
        })
        .collect()
}
