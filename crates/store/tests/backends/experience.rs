//! Experience samples on every backend: a batch sent again is kept once, the newest value of
//! each metric is read back with what the device could not measure, and reads are confined.

use std::collections::BTreeMap;

use toolgate_domain::fleet::experience::{AppPackage, ExperienceReport, Measured, Sample};
use toolgate_domain::fleet::parts::Breakdown;
use toolgate_domain::groups::Reach;
use toolgate_store::{DAY_MS, ExperienceSwept, HOUR_MS, Observed, RecentWanted, Repositories, Resolution, Retention};

use crate::fleet_work::with_agents;

crate::matrix!(
    samples_are_kept_once_and_the_newest_read_back,
    experience_is_read_only_within_the_readers_reach,
    rollups_count_each_sample_once_and_each_resolution_is_kept_its_time,
    a_signal_occurrence_opens_carries_on_ends_and_is_read_within_the_reach,
    parts_are_kept_once_rolled_up_swept_and_confined,
    a_metrics_series_is_read_raw_or_averaged_within_the_reach,
    a_programs_package_versions_are_kept_as_spans_confined_and_swept,
    reports_saved_at_once_are_each_kept_and_answered,
    a_devices_recent_rows_and_revision_are_read_within_the_reach,
);

const T0: i64 = 1_800_000_000_000;

fn report(samples: &[(i64, &[(&str, f64)])]) -> ExperienceReport {
    ExperienceReport {
        measured: Measured::Cgroup,
        absent: BTreeMap::from([("load_1".to_string(), "the kernel keeps it for the whole machine".to_string())]),
        samples: samples
            .iter()
            .map(|(at, values)| Sample {
                at_ms: T0 + at,
                values: values.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                fullest_filesystem: Some("/".into()),
                apps: BTreeMap::new(),
                interfaces: BTreeMap::new(),
                packages: BTreeMap::new(),
            })
            .collect(),
    }
}

async fn samples_are_kept_once_and_the_newest_read_back(r: Repositories) {
    let agents = with_agents(&r, 2).await;
    let first = report(&[(0, &[("cpu_busy_pct", 10.0), ("disk_free_pct", 50.0)]), (60_000, &[("cpu_busy_pct", 95.5)])]);
    assert_eq!(r.experience.save_experience(&agents[0], &first, T0 + 61_000).await.unwrap(), 3);
    // Its answer was lost, so the agent sends it again with one more sample: only that is new.
    let again = report(&[
        (0, &[("cpu_busy_pct", 10.0)]),
        (60_000, &[("cpu_busy_pct", 95.5)]),
        (120_000, &[("disk_free_pct", 49.0)]),
    ]);
    assert_eq!(r.experience.save_experience(&agents[0], &again, T0 + 121_000).await.unwrap(), 1);
    // An older batch arriving late adds its values but does not roll the device back.
    let late = report(&[(30_000, &[("cpu_busy_pct", 20.0)])]);
    assert_eq!(r.experience.save_experience(&agents[0], &late, T0 + 122_000).await.unwrap(), 1);

    let devices = r.experience.device_experience(&Reach::Fleet, None).await.unwrap();
    assert_eq!(devices.len(), 1, "an agent that never reported has no experience");
    let device = &devices[0];
    assert_eq!((device.agent_id.as_str(), device.measured.as_str()), (agents[0].as_str(), "cgroup"));
    assert_eq!(device.last_sample_ms, T0 + 120_000);
    let newest = r.experience.recent_values(&agents[0], &[("cpu_busy_pct", 1), ("disk_free_pct", 1)]).await.unwrap();
    assert_eq!(newest, [[(T0 + 60_000, 95.5)], [(T0 + 120_000, 49.0)]]);
    assert_eq!(device.absent["load_1"], "the kernel keeps it for the whole machine");
    assert_eq!(device.fullest_filesystem.as_deref(), Some("/"));
    let one = r.experience.device_experience(&Reach::Fleet, Some(&agents[1])).await.unwrap();
    assert!(one.is_empty());
}

async fn experience_is_read_only_within_the_readers_reach(r: Repositories) {
    let agents = with_agents(&r, 2).await;
    for agent in &agents {
        r.experience.save_experience(agent, &report(&[(0, &[("cpu_busy_pct", 1.0)])]), T0).await.unwrap();
    }
    let team = crate::groups::top_group(&r, "Team").await;
    let reach = Reach::Groups(vec![team.id.clone()].into());
    assert!(r.experience.device_experience(&reach, None).await.unwrap().is_empty());
    r.groups.add_member(&team.id, &agents[1]).await.unwrap().unwrap();
    let seen = r.experience.device_experience(&reach, None).await.unwrap();
    assert_eq!(seen.iter().map(|d| d.agent_id.as_str()).collect::<Vec<_>>(), [agents[1].as_str()]);
    assert!(r.experience.device_experience(&reach, Some(&agents[0])).await.unwrap().is_empty());
}

async fn rollups_count_each_sample_once_and_each_resolution_is_kept_its_time(r: Repositories) {
    let agents = with_agents(&r, 1).await;
    let e = &r.experience;
    let first = report(&[(0, &[("cpu_busy_pct", 10.0)]), (60_000, &[("cpu_busy_pct", 30.0)])]);
    e.save_experience(&agents[0], &first, T0).await.unwrap();
    e.save_experience(&agents[0], &first, T0).await.unwrap();
    e.save_experience(&agents[0], &report(&[(HOUR_MS, &[("cpu_busy_pct", 50.0)])]), T0).await.unwrap();
    let read = |since: i64, resolution: Resolution| async move {
        e.averages(&Reach::Fleet, &["cpu_busy_pct"], since, resolution).await.unwrap()
    };
    // T0 starts an hour: two hours of rollups, the batch sent twice counted once.
    let hourly = read(T0, Resolution::Hourly).await;
    assert_eq!(hourly.len(), 1);
    let h = &hourly[0];
    assert_eq!((h.samples, h.average, h.min, h.max, h.last_ms), (3, 30.0, 10.0, 50.0, T0 + HOUR_MS));
    assert_eq!(read(T0 + HOUR_MS, Resolution::Hourly).await[0].samples, 1, "the second hour alone");
    let raw = read(T0 + 30_000, Resolution::Raw).await;
    assert_eq!((raw[0].samples, raw[0].average, raw[0].last_ms), (2, 40.0, T0 + HOUR_MS));
    let day_start = T0 - T0.rem_euclid(DAY_MS);
    assert_eq!(read(day_start, Resolution::Daily).await[0].samples, 3);
    assert!(e.averages(&Reach::Fleet, &["load_1"], T0, Resolution::Raw).await.unwrap().is_empty());

    // A day and two hours on, the raw samples are gone and the hours and the day remain.
    let kept = Retention::default();
    let swept = e.sweep_experience(T0 + DAY_MS + 2 * HOUR_MS, kept).await.unwrap();
    assert_eq!(swept, ExperienceSwept { raw: 3, hourly: 0, daily: 0 });
    assert!(read(T0, Resolution::Raw).await.is_empty());
    assert_eq!(read(T0, Resolution::Hourly).await[0].samples, 3);
    // Thirty days after the hours ended they go too; the day stays for 400.
    let swept = e.sweep_experience(T0 + 2 * HOUR_MS + 30 * DAY_MS, kept).await.unwrap();
    assert_eq!(swept, ExperienceSwept { raw: 0, hourly: 2, daily: 0 });
    assert_eq!(read(day_start, Resolution::Daily).await[0].samples, 3);
    let swept = e.sweep_experience(day_start + 401 * DAY_MS, kept).await.unwrap();
    assert_eq!(swept.daily, 1);

    // The metrics asked for, each of them and no other; confined like every read.
    let two = [("cpu_busy_pct", 1.0), ("disk_free_pct", 50.0), ("load_1", 0.5)];
    e.save_experience(&agents[0], &report(&[(0, &two)]), T0).await.unwrap();
    let asked = ["cpu_busy_pct", "disk_free_pct"];
    for resolution in [Resolution::Raw, Resolution::Hourly] {
        let named: Vec<String> =
            e.averages(&Reach::Fleet, &asked, T0, resolution).await.unwrap().into_iter().map(|a| a.metric).collect();
        assert_eq!(named, asked, "{resolution:?}");
    }
    let team = crate::groups::top_group(&r, "Team").await;
    let elsewhere = Reach::Groups(vec![team.id].into());
    assert!(e.averages(&elsewhere, &asked, 0, Resolution::Raw).await.unwrap().is_empty());
    assert!(e.averages(&elsewhere, &asked, 0, Resolution::Hourly).await.unwrap().is_empty());
}

async fn a_signal_occurrence_opens_carries_on_ends_and_is_read_within_the_reach(r: Repositories) {
    let agents = with_agents(&r, 2).await;
    let e = &r.experience;
    let samples = report(&[
        (0, &[("cpu_busy_pct", 91.0)]),
        (1_000, &[("cpu_busy_pct", 97.0)]),
        (2_000, &[("cpu_busy_pct", 40.0)]),
    ]);
    e.save_experience(&agents[0], &samples, T0).await.unwrap();
    let recent = e.recent_values(&agents[0], &[("cpu_busy_pct", 2), ("load_1", 3), ("cpu_busy_pct", 1)]).await.unwrap();
    assert_eq!(
        recent,
        [vec![(T0 + 2_000, 40.0), (T0 + 1_000, 97.0)], vec![], vec![(T0 + 2_000, 40.0)]],
        "each in its order"
    );
    let holding = |started: i64, last: i64, peak: f64| Observed::Holding {
        started_ms: T0 + started,
        last_ms: T0 + last,
        peak,
        rising: true,
    };
    e.observe(&agents[0], &[("cpu_high", holding(0, 1_000, 97.0))]).await.unwrap();
    // Carried on: the same occurrence, its newest sample and peak moved on.
    e.observe(&agents[0], &[("cpu_high", holding(500, 1_500, 93.0))]).await.unwrap();
    let open = e.occurrences(&Reach::Fleet, T0, None).await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!((open[0].started_ms, open[0].last_ms, open[0].peak, open[0].ended_ms), (T0, T0 + 1_500, 97.0, None));
    // Several signals in one call: one ends, one opens.
    let two = [("cpu_high", Observed::Ended { at_ms: T0 + 2_000 }), ("disk_slow", holding(1_000, 2_000, 80.0))];
    e.observe(&agents[0], &two).await.unwrap();
    assert_eq!(e.occurrences(&Reach::Fleet, T0, Some("disk_slow")).await.unwrap().len(), 1);
    // A new occurrence after the end is another row.
    e.observe(&agents[0], &[("cpu_high", holding(5_000, 6_000, 95.0))]).await.unwrap();
    let both = e.occurrences(&Reach::Fleet, T0, Some("cpu_high")).await.unwrap();
    assert_eq!(both.iter().map(|o| o.ended_ms).collect::<Vec<_>>(), [None, Some(T0 + 2_000)], "newest first");
    assert!(e.occurrences(&Reach::Fleet, T0, Some("disk_nearly_full")).await.unwrap().is_empty());
    assert!(e.occurrences(&Reach::Fleet, T0 + 7_000, None).await.unwrap().is_empty(), "none held since");

    let team = crate::groups::top_group(&r, "Team").await;
    let reach = Reach::Groups(vec![team.id.clone()].into());
    assert!(e.occurrences(&reach, 0, None).await.unwrap().is_empty());
    r.groups.add_member(&team.id, &agents[0]).await.unwrap().unwrap();
    assert_eq!(e.occurrences(&reach, 0, None).await.unwrap().len(), 3);
    // Ended occurrences go with the hours they happened in; open ones stay.
    e.sweep_experience(T0 + 2_001 + 30 * DAY_MS, Retention::default()).await.unwrap();
    assert_eq!(e.occurrences(&Reach::Fleet, 0, None).await.unwrap().len(), 2);
}

/// A sample at `at` (after T0) in which `app` crashed `crashes` times.
fn crashed(at: i64, app: &str, crashes: f64) -> Sample {
    let counts = BTreeMap::from([("exits".to_string(), crashes), ("crashes".to_string(), crashes)]);
    Sample {
        at_ms: T0 + at,
        values: BTreeMap::from([("app_crashes".to_string(), crashes)]),
        fullest_filesystem: None,
        apps: BTreeMap::from([(app.to_string(), counts)]),
        interfaces: BTreeMap::from([("eth0".to_string(), BTreeMap::from([("rx_bytes_per_s".to_string(), 100.0)]))]),
        packages: BTreeMap::new(),
    }
}

async fn parts_are_kept_once_rolled_up_swept_and_confined(r: Repositories) {
    let agents = with_agents(&r, 2).await;
    let e = &r.experience;
    let batch = |samples| ExperienceReport { measured: Measured::Host, absent: BTreeMap::new(), samples };
    e.save_experience(&agents[0], &batch(vec![crashed(0, "flaky", 1.0), crashed(60_000, "flaky", 2.0)]), T0)
        .await
        .unwrap();
    // Sent again with one more: only that one is new, and the hour counts each once.
    let again = batch(vec![crashed(60_000, "flaky", 2.0), crashed(120_000, "burner", 1.0)]);
    e.save_experience(&agents[0], &again, T0).await.unwrap();
    e.save_experience(&agents[1], &batch(vec![crashed(0, "other", 4.0)]), T0).await.unwrap();

    let raw = e.part_values(Breakdown::Apps, &Reach::Fleet, "crashes", T0, Resolution::Raw).await.unwrap();
    let mine: Vec<(&str, i64, f64)> =
        raw.iter().filter(|v| v.agent_id == agents[0]).map(|v| (v.part.as_str(), v.at_ms - T0, v.value)).collect();
    assert_eq!(mine, [("burner", 120_000, 1.0), ("flaky", 0, 1.0), ("flaky", 60_000, 2.0)]);
    let hour_start = T0 - T0.rem_euclid(HOUR_MS);
    let hourly =
        e.part_values(Breakdown::Apps, &Reach::Fleet, "crashes", hour_start, Resolution::Hourly).await.unwrap();
    let flaky: Vec<(f64, i64)> = hourly.iter().filter(|v| v.part == "flaky").map(|v| (v.value, v.samples)).collect();
    // (T0 starts an hour: the three samples share it.)
    assert_eq!(flaky, [(3.0, 2)], "{hourly:?}");
    assert!(e.part_values(Breakdown::Apps, &Reach::Fleet, "oom_kills", 0, Resolution::Raw).await.unwrap().is_empty());
    // Interfaces are a series of their own: each sample's eth0, once.
    let eth0 =
        e.part_values(Breakdown::Interfaces, &Reach::Fleet, "rx_bytes_per_s", T0, Resolution::Raw).await.unwrap();
    assert_eq!(eth0.len(), 4, "{eth0:?}");
    assert!(eth0.iter().all(|v| v.part == "eth0" && v.value == 100.0));

    let team = crate::groups::top_group(&r, "Team").await;
    let reach = Reach::Groups(vec![team.id.clone()].into());
    r.groups.add_member(&team.id, &agents[1]).await.unwrap().unwrap();
    for resolution in [Resolution::Raw, Resolution::Hourly, Resolution::Daily] {
        let seen = e.part_values(Breakdown::Apps, &reach, "crashes", 0, resolution).await.unwrap();
        assert!(seen.iter().all(|v| v.agent_id == agents[1] && v.part == "other"), "{resolution:?}: {seen:?}");
        assert_eq!(seen.len(), 1, "{resolution:?}");
    }

    // Swept with the device's series: raw after a day, hours after thirty.
    let swept = e.sweep_experience(T0 + DAY_MS + 2 * HOUR_MS, Retention::default()).await.unwrap();
    assert_eq!(swept.raw, 4 + 8 + 4, "the four samples' app_crashes, eight program counts, four interface rates");
    assert!(e.part_values(Breakdown::Apps, &Reach::Fleet, "crashes", 0, Resolution::Raw).await.unwrap().is_empty());
    assert_eq!(e.part_values(Breakdown::Apps, &Reach::Fleet, "crashes", 0, Resolution::Hourly).await.unwrap().len(), 3);
}

async fn a_metrics_series_is_read_raw_or_averaged_within_the_reach(r: Repositories) {
    let agents = with_agents(&r, 2).await;
    let e = &r.experience;
    let busy = report(&[(0, &[("cpu_busy_pct", 90.0)]), (60_000, &[("cpu_busy_pct", 100.0)])]);
    e.save_experience(&agents[0], &busy, T0).await.unwrap();
    e.save_experience(&agents[1], &report(&[(0, &[("cpu_busy_pct", 2.0), ("load_1", 0.1)])]), T0).await.unwrap();
    let raw = e.series(&Reach::Fleet, "cpu_busy_pct", T0, Resolution::Raw).await.unwrap();
    let seen: Vec<(&str, i64, f64)> = raw.iter().map(|p| (p.agent_id.as_str(), p.at_ms - T0, p.value)).collect();
    let mut expected =
        vec![(agents[0].as_str(), 0, 90.0), (agents[0].as_str(), 60_000, 100.0), (agents[1].as_str(), 0, 2.0)];
    expected.sort_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(&b.1)));
    assert_eq!(seen, expected);
    let hourly = e.series(&Reach::Fleet, "cpu_busy_pct", T0, Resolution::Hourly).await.unwrap();
    let first: Vec<f64> = hourly.iter().filter(|p| p.agent_id == agents[0]).map(|p| p.value).collect();
    assert_eq!(first, [95.0], "an hour's average");
    let team = crate::groups::top_group(&r, "Team").await;
    r.groups.add_member(&team.id, &agents[1]).await.unwrap().unwrap();
    let reach = Reach::Groups(vec![team.id].into());
    for resolution in [Resolution::Raw, Resolution::Hourly] {
        let confined = e.series(&reach, "cpu_busy_pct", 0, resolution).await.unwrap();
        assert!(confined.len() == 1 && confined[0].agent_id == agents[1], "{resolution:?}: {confined:?}");
    }
}

/// A sample at `at` (after T0) in which `program` of `package` at `version` ran.
fn ran(at: i64, program: &str, package: &str, version: &str) -> Sample {
    Sample {
        at_ms: T0 + at,
        apps: BTreeMap::from([(program.to_string(), BTreeMap::from([("cpu_seconds".to_string(), 1.0)]))]),
        packages: BTreeMap::from([(
            program.to_string(),
            AppPackage { package: package.to_string(), version: version.to_string() },
        )]),
        ..Sample::default()
    }
}

async fn a_programs_package_versions_are_kept_as_spans_confined_and_swept(r: Repositories) {
    let agents = with_agents(&r, 2).await;
    let e = &r.experience;
    let batch = |samples| ExperienceReport { measured: Measured::Host, absent: BTreeMap::new(), samples };
    let old = |at| ran(at, "probe", "toolgate-probe", "1.0");
    let new = |at| ran(at, "probe", "toolgate-probe", "1.1");
    e.save_experience(&agents[0], &batch(vec![old(0), old(60_000)]), T0).await.unwrap();
    // Upgraded: a later batch widens 1.0's span once more, then 1.1 begins; one sent again
    // changes nothing.
    e.save_experience(&agents[0], &batch(vec![old(120_000), new(180_000), new(240_000)]), T0).await.unwrap();
    e.save_experience(&agents[0], &batch(vec![new(180_000)]), T0).await.unwrap();
    e.save_experience(&agents[1], &batch(vec![ran(0, "sleep", "coreutils", "9.1-1")]), T0).await.unwrap();

    let spans = e.package_spans(&Reach::Fleet, 0).await.unwrap();
    let mine: Vec<(&str, &str, i64, i64)> = spans
        .iter()
        .filter(|s| s.agent_id == agents[0])
        .map(|s| (s.program.as_str(), s.version.as_str(), s.first_ms - T0, s.last_ms - T0))
        .collect();
    assert_eq!(mine, [("probe", "1.0", 0, 120_000), ("probe", "1.1", 180_000, 240_000)]);
    let later = e.package_spans(&Reach::Fleet, T0 + 150_000).await.unwrap();
    assert!(later.iter().all(|s| s.version == "1.1"), "spans that ended before the start are not read: {later:?}");

    let team = crate::groups::top_group(&r, "Team").await;
    r.groups.add_member(&team.id, &agents[1]).await.unwrap().unwrap();
    let confined = e.package_spans(&Reach::Groups(vec![team.id.clone()].into()), 0).await.unwrap();
    assert_eq!(
        confined.iter().map(|s| (s.agent_id.as_str(), s.package.as_str())).collect::<Vec<_>>(),
        [(agents[1].as_str(), "coreutils")]
    );

    // Kept as long as the daily rollups they explain.
    e.sweep_experience(T0 + 300 * DAY_MS, Retention::default()).await.unwrap();
    assert_eq!(e.package_spans(&Reach::Fleet, 0).await.unwrap().len(), 3);
    e.sweep_experience(T0 + 401 * DAY_MS, Retention::default()).await.unwrap();
    assert!(e.package_spans(&Reach::Fleet, 0).await.unwrap().is_empty());
}

/// Many agents reporting at the same moment (SQLite commits them together): each is kept, and
/// each is told its own count.
async fn reports_saved_at_once_are_each_kept_and_answered(r: Repositories) {
    let agents = with_agents(&r, 12).await;
    let saves = agents.iter().enumerate().map(|(i, agent)| {
        let values: &[(&str, f64)] =
            if i % 2 == 0 { &[("cpu_busy_pct", 1.0)] } else { &[("cpu_busy_pct", 1.0), ("mem_used_pct", 2.0)] };
        let e = r.experience.clone();
        let (agent, batch) = (agent.clone(), report(&[(0, values)]));
        tokio::spawn(async move { e.save_experience(&agent, &batch, T0).await.unwrap() })
    });
    let counts: Vec<u64> = futures_util::future::join_all(saves).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(counts, (0..12).map(|i| if i % 2 == 0 { 1 } else { 2 }).collect::<Vec<u64>>());
    let devices = r.experience.device_experience(&Reach::Fleet, None).await.unwrap();
    assert_eq!(devices.len(), 12);
    let averaged = r.experience.averages(&Reach::Fleet, &["mem_used_pct"], T0, Resolution::Raw).await.unwrap();
    assert_eq!(averaged.len(), 6);
}

/// What a server's recent view of a device is made of: its revision moves on with each report
/// that brought something new (not with one sent again), and its rows are those asked for.
async fn a_devices_recent_rows_and_revision_are_read_within_the_reach(r: Repositories) {
    let agents = with_agents(&r, 2).await;
    let e = &r.experience;
    let first = report(&[(-HOUR_MS, &[("cpu_busy_pct", 5.0)]), (0, &[("cpu_busy_pct", 10.0), ("mem_used_pct", 40.0)])]);
    e.save_experience(&agents[0], &first, T0).await.unwrap();
    e.save_experience(&agents[0], &first, T0).await.unwrap();
    assert_eq!(
        e.experience_revisions(&Reach::Fleet).await.unwrap(),
        [(agents[0].clone(), 1)],
        "sent again: nothing new"
    );
    let again = e.keep_experience(&agents[0], &first, T0).await.unwrap();
    assert_eq!((again.added, again.device), (0, None), "nothing new: no row to carry a view forward with");
    let saved = e.keep_experience(&agents[0], &report(&[(60_000, &[("cpu_busy_pct", 30.0)])]), T0).await.unwrap();
    assert_eq!(e.experience_revisions(&Reach::Fleet).await.unwrap(), [(agents[0].clone(), 2)]);
    let device = saved.device.expect("a new value: the row as the report left it");
    assert_eq!((saved.added, device.revision, device.last_sample_ms), (1, 2, T0 + 60_000));

    let wanted = RecentWanted {
        hourly: &["cpu_busy_pct", "mem_used_pct"],
        hours_since_ms: T0,
        raw: &["cpu_busy_pct"],
        raw_since_ms: T0 + 30_000,
    };
    let asked = [agents[1].clone(), agents[0].clone(), "never-enrolled".to_string()];
    let read = e.recent_rows(&Reach::Fleet, &asked, wanted).await.unwrap();
    assert_eq!(read.len(), 1, "only a device that reported");
    assert_eq!(read[0].device, device, "what the save said is what a read finds");
    let hours = [("cpu_busy_pct".to_string(), T0, 2, 40.0), ("mem_used_pct".to_string(), T0, 1, 40.0)];
    assert_eq!(read[0].hours, hours, "the hour before T0 is not asked for");
    assert_eq!(read[0].raw, [("cpu_busy_pct".to_string(), T0 + 60_000, 30.0)]);

    let team = crate::groups::top_group(&r, "Team").await;
    let reach = Reach::Groups(vec![team.id.clone()].into());
    assert!(e.experience_revisions(&reach).await.unwrap().is_empty());
    assert!(e.recent_rows(&reach, &asked, wanted).await.unwrap().is_empty());
    r.groups.add_member(&team.id, &agents[0]).await.unwrap().unwrap();
    assert_eq!(e.recent_rows(&reach, &asked, wanted).await.unwrap(), read);
}
