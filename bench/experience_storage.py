#!/usr/bin/env python3
"""Storage of the experience series per device and day, on SQLite with the store's own
migrations (crates/store/migrations/sqlite), filled with the rows the store writes for a day of
samples at one a minute: every declared metric (crates/domain/src/fleet/experience.rs) per
sample with its hourly and daily rollups, and PROGRAMS programs ending each minute with their
per-program rows and rollups, NAMED programs the process table names each minute (the busiest
and largest: CPU seconds and resident memory, and a package span each), and INTERFACES
interfaces with their four rates and rollups.
Synthetic values, real schema and indexes; the database is vacuumed before it is measured.

    python3 bench/experience_storage.py [--devices 10] [--programs 3] [--named 12] [--interfaces 1]
"""
import argparse, os, random, re, sqlite3, tempfile

HOUR, DAY = 3_600_000, 86_400_000
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def declared_metrics():
    text = open(os.path.join(root, "crates/domain/src/fleet/experience.rs")).read()
    block = text[text.index("pub const METRICS"):text.index("const NET_DEV")]
    return re.findall(r'metric\(\s*"([a-z0-9_]+)"', block)


def size(path):
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=10)
    ap.add_argument("--programs", type=int, default=3, help="programs that end each minute on a device")
    ap.add_argument("--named", type=int, default=12,
                    help="programs a sample names for their CPU time and memory (at most 16: the 8 busiest, the 8 largest)")
    ap.add_argument("--interfaces", type=int, default=1, help="network interfaces but loopback")
    args = ap.parse_args()
    metrics = declared_metrics()
    programs = [f"prog-{n:02d}" for n in range(max(args.programs * 4, 1))]
    with tempfile.TemporaryDirectory() as tmp:
        db_path = os.path.join(tmp, "experience.db")
        db = sqlite3.connect(db_path)
        migrations = os.path.join(root, "crates/store/migrations/sqlite")
        for name in sorted(os.listdir(migrations)):
            if "experience" in name:
                db.executescript(open(os.path.join(migrations, name)).read())
        t0 = 1_800_000_000_000
        rnd = random.Random(7)
        for device in range(args.devices):
            agent = f"agt-{device:016x}"
            rollup, app_rollup, if_rollup = {}, {}, {}
            for minute in range(1440):
                at = t0 + minute * 60_000
                for metric in metrics:
                    value = round(rnd.uniform(0, 100), 3)
                    db.execute("INSERT INTO experience_sample VALUES (?, ?, ?, ?)", (agent, metric, at, value))
                    for span in (HOUR, DAY):
                        key = (metric, span, at - at % span)
                        c, s, lo, hi = rollup.get(key, (0, 0.0, value, value))
                        rollup[key] = (c + 1, s + value, min(lo, value), max(hi, value))
                for n in range(args.interfaces):
                    for metric in ("rx_bytes_per_s", "tx_bytes_per_s", "errors_per_s", "drops_per_s"):
                        value = round(rnd.uniform(0, 1e6), 3) if "bytes" in metric else 0.0
                        db.execute("INSERT INTO experience_interface_sample VALUES (?, ?, ?, ?, ?)", (agent, f"eth{n}", metric, at, value))
                        for span in (HOUR, DAY):
                            key = (f"eth{n}", metric, span, at - at % span)
                            c, s, lo, hi = if_rollup.get(key, (0, 0.0, value, value))
                            if_rollup[key] = (c + 1, s + value, min(lo, value), max(hi, value))
                ended = {p: {"exits": float(rnd.randint(1, 20))} for p in rnd.sample(programs, args.programs)}
                for counts in ended.values():
                    if rnd.random() < 0.05:
                        counts["crashes"] = 1.0
                # The same long-lived programs are the largest minute after minute; the busiest vary.
                for n in range(args.named):
                    named = f"daemon-{n:02d}" if n < args.named * 3 // 4 else rnd.choice(programs)
                    counts = ended.setdefault(named, {})
                    counts["cpu_seconds"] = round(rnd.uniform(0, 30), 3)
                    counts["rss_bytes"] = float(rnd.randint(1 << 20, 1 << 30))
                for program, counts in ended.items():
                    for metric, value in counts.items():
                        db.execute("INSERT INTO experience_app_sample VALUES (?, ?, ?, ?, ?)", (agent, program, metric, at, value))
                        for span in (HOUR, DAY):
                            key = (program, metric, span, at - at % span)
                            c, s, lo, hi = app_rollup.get(key, (0, 0.0, value, value))
                            app_rollup[key] = (c + 1, s + value, min(lo, value), max(hi, value))
            db.executemany("INSERT INTO experience_app_package VALUES (?, ?, ?, ?, ?, ?)",
                           [(agent, p, f"pkg-{p}", "1.2.3-1", t0, t0 + DAY) for p in {k[0] for k in app_rollup}])
            db.executemany("INSERT INTO experience_rollup VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           [(agent, m, span, start, *v) for (m, span, start), v in rollup.items()])
            db.executemany("INSERT INTO experience_app_rollup VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [(agent, p, m, span, start, *v) for (p, m, span, start), v in app_rollup.items()])
            db.executemany("INSERT INTO experience_interface_rollup VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [(agent, i, m, span, start, *v) for (i, m, span, start), v in if_rollup.items()])
        db.commit()
        db.execute("VACUUM")
        per_table = {}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'experience%'"):
            rows = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            per_table[table] = rows
        db.close()
        total = size(db_path)
        # Each table's share, by dropping it (and its indexes) from a copy.
        shares = {}
        for table in per_table:
            copy = os.path.join(tmp, f"{table}.db")
            src = sqlite3.connect(db_path)
            dst = sqlite3.connect(copy)
            src.backup(dst)
            src.close()
            dst.execute(f"DROP TABLE {table}")
            dst.commit()
            dst.execute("VACUUM")
            dst.close()
            shares[table] = total - size(copy)
            os.remove(copy)
    print(f"{args.devices} devices, a day at one sample a minute, {len(metrics)} metrics, "
          f"{args.programs} programs ending a minute, {args.named} named, {args.interfaces} interfaces (synthetic values, the store's schema):")
    for table, rows in sorted(per_table.items()):
        mb = shares[table] / args.devices / 1e6
        print(f"  {table:24} {rows // args.devices:>7} rows  {mb:6.2f} MB per device and day")
    print(f"  {'total':24} {'':>7}       {total / args.devices / 1e6:6.2f} MB per device and day")


if __name__ == "__main__":
    main()
