#!/usr/bin/env python3
"""A synthetic history of experience for a benchmark (never for a real fleet): hourly and daily
rollups of the declared metrics (crates/domain/src/fleet/experience.rs) for DAYS days before
now, for every enrolled, unrevoked agent of a stopped server's SQLite store, written in the
store's own tables as the server's rollups are. Values are made up (a level per agent and metric
plus an hourly wobble); rows the server already has are left as they are.

    python3 bench/experience_backfill.py DATA_DIR [--days 30] [--metrics all|cpu_busy_pct,...] [--tag KEY]

--tag KEY also tags every agent KEY=even or KEY=odd (by its row number): two cohorts to diff.
"""
import argparse, os, re, sqlite3, time

HOUR, DAY = 3_600_000, 86_400_000
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def declared_metrics():
    text = open(os.path.join(root, "crates/domain/src/fleet/experience.rs")).read()
    block = text[text.index("pub const METRICS"):text.index("const NET_DEV")]
    return re.findall(r'metric\(\s*"([a-z0-9_]+)"', block)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--metrics", default="all", help="all, or metric names separated by commas")
    ap.add_argument("--tag", help="tag every agent KEY=even|odd")
    args = ap.parse_args()
    declared = declared_metrics()
    metrics = declared if args.metrics == "all" else args.metrics.split(",")
    unknown = [m for m in metrics if m not in declared]
    if unknown:
        raise SystemExit(f"not declared metrics: {', '.join(unknown)} (declared: {', '.join(declared)})")
    db = sqlite3.connect(os.path.join(args.data_dir, "toolgate.sqlite3"))
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = OFF")
    db.execute("CREATE TEMP TABLE backfill_metric (k INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    db.executemany("INSERT INTO backfill_metric VALUES (?, ?)", list(enumerate(metrics)))
    agents = db.execute("SELECT COUNT(*) FROM agent WHERE revoked_at_ms IS NULL").fetchone()[0]
    now = int(time.time() * 1000)
    this_hour = now - now % HOUR
    started = time.time()
    # A level per agent and metric (0-80) and a wobble per hour (0-20): integer arithmetic, so
    # that the three columns of one row agree.
    value = "(((a.rowid * 7919 + m.k * 104729) % 8000) + ((a.rowid * 31 + h.n * 17 + m.k * 7) % 2000)) / 100.0"
    for span, count, per in ((HOUR, 60, 24), (DAY, 1440, 1)):
        first = this_hour - HOUR if span == HOUR else now - now % DAY - DAY
        db.execute(f"""
            WITH RECURSIVE h(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM h WHERE n < ?1 - 1)
            INSERT OR IGNORE INTO experience_rollup (agent_id, metric, span_ms, start_ms, count, sum, min, max)
            SELECT a.agent_id, m.name, ?2, ?3 - h.n * ?2, ?4, ?4 * {value}, {value} * 0.8, {value} * 1.2
            FROM agent a CROSS JOIN backfill_metric m CROSS JOIN h WHERE a.revoked_at_ms IS NULL""",
                   (args.days * per, span, first, count))
        db.commit()
    if args.tag:
        db.execute("""INSERT OR REPLACE INTO agent_tag (agent_id, key, value, updated_at, updated_by)
                      SELECT agent_id, ?1, CASE rowid % 2 WHEN 0 THEN 'even' ELSE 'odd' END, ?2, 'bench'
                      FROM agent WHERE revoked_at_ms IS NULL""", (args.tag, now))
        db.commit()
    rows = db.execute("SELECT COUNT(*) FROM experience_rollup").fetchone()[0]
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    size = os.path.getsize(os.path.join(args.data_dir, "toolgate.sqlite3"))
    print(f"SYNTHETIC backfill: {agents} agents, {len(metrics)} metrics, {args.days} days hourly and daily: "
          f"{rows} rollup rows in {time.time() - started:.0f} s; store {size / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
