//! Tests of the recent views: made from the store, carried forward by a report, and when
//! either is not what the store would answer.

use std::collections::BTreeMap;

use toolgate_domain::Clock;
use toolgate_domain::fleet::experience::{ExperienceReport, Measured, Sample};
use toolgate_store::SqliteStore;

use super::*;
use crate::FleetSettings;

const HOUR_START: i64 = 1_800_000_000_000 - 1_800_000_000_000 % HOUR_MS;
const CPU: &str = "cpu_busy_pct";

fn report(samples: &[(i64, f64)]) -> ExperienceReport {
    let samples = samples
        .iter()
        .map(|(at_ms, value)| Sample {
            at_ms: *at_ms,
            values: BTreeMap::from([(CPU.to_string(), *value)]),
            ..Sample::default()
        })
        .collect();
    ExperienceReport { measured: Measured::Host, absent: BTreeMap::new(), samples }
}

#[tokio::test]
async fn a_view_is_what_the_store_holds_and_is_made_again_when_that_changes() {
    let now = HOUR_START + 30 * 60_000;
    let clock = Clock::stopped_at(now);
    let repositories = SqliteStore::open_in_memory().unwrap().repositories();
    let experience = repositories.experience.clone();
    let hub = Hub::load(repositories.fleet, repositories.work, clock.clone(), FleetSettings::default())
        .await
        .unwrap()
        .with_experience(experience.clone(), Vec::new());
    let sent = report(&[(now - 20 * 60_000, 90.0), (now - 60_000, 10.0), (now, 30.0)]);
    hub.take_experience("a", sent.clone()).await.unwrap();
    let views = hub.recent_experience(&Reach::Fleet).await.unwrap();
    assert_eq!(views.len(), 1);
    let view = &views[0];
    assert_eq!(view.day_average(CPU), Some(130.0 / 3.0));
    assert_eq!(view.day_hours(CPU).collect::<Vec<_>>(), [(HOUR_START, 130.0 / 3.0)]);
    assert_eq!(view.raw_since(CPU, now - VIEW_RAW_MS), [(now - 60_000, 10.0), (now, 30.0)], "15 minutes, not 20");
    assert_eq!(view.day_average("mem_used_pct"), None);
    let cpu_at = METRICS.iter().position(|m| m.name == CPU).unwrap();
    let averages: Vec<Option<f64>> = view.day_averages().collect();
    assert_eq!((averages.len(), averages[cpu_at]), (METRICS.len(), Some(130.0 / 3.0)));
    assert_eq!(averages.iter().flatten().count(), 1);
    // Sent again (its answer lost): nothing new, the same view.
    hub.take_experience("a", sent).await.unwrap();
    assert!(Arc::ptr_eq(&hub.recent_experience(&Reach::Fleet).await.unwrap()[0], view));

    // Another replica took a report: the revision moved, the view is made again.
    experience.save_experience("a", &report(&[(now + 1_000, 50.0)]), now).await.unwrap();
    let remade = hub.recent_experience(&Reach::Fleet).await.unwrap();
    assert_eq!(remade[0].day_average(CPU), Some(45.0));
    assert_eq!(remade[0].experience.revision, 2);

    // The next hour: the day window still holds this one; a day later it has moved past.
    clock.advance_ms(HOUR_MS);
    let next_hour = hub.recent_experience(&Reach::Fleet).await.unwrap();
    assert!(!Arc::ptr_eq(&next_hour[0], &remade[0]), "made in another hour");
    assert_eq!(next_hour[0].day_average(CPU), Some(45.0));
    assert!(next_hour[0].raw_since(CPU, now + HOUR_MS - VIEW_RAW_MS).is_empty());
    clock.advance_ms(VIEW_HOURS * HOUR_MS);
    assert_eq!(hub.refresh_experience_views().await.unwrap(), 1);
    let a_day_on = hub.recent_experience(&Reach::Fleet).await.unwrap();
    assert_eq!((a_day_on[0].day_average(CPU), a_day_on[0].day_hours(CPU).count()), (None, 0));
}

#[tokio::test]
async fn a_view_carried_forward_by_a_report_is_the_view_the_store_would_make() {
    let now = HOUR_START + 40 * 60_000;
    let store = SqliteStore::open_in_memory().unwrap().repositories().experience;
    let made_now = |at_ms| {
        let store = store.clone();
        async move { make_views(store.as_ref(), &Reach::Fleet, &["a".to_string()], at_ms).await.unwrap().remove(0) }
    };
    let first = report(&[(HOUR_START - 2 * HOUR_MS, 70.0), (now - 20 * 60_000, 90.0), (now - 60_000, 10.0)]);
    store.save_experience("a", &first, now).await.unwrap();
    let before = made_now(now).await;
    // Two values in the hour, one in an hour the view had, one in an hour it had not, one
    // before the raw window, one past the day window, and a metric that is not ranked.
    let mut next = report(&[
        (now + 30_000, 20.0),
        (now + 50_000, 40.0),
        (HOUR_START - 2 * HOUR_MS + 1, 80.0),
        (HOUR_START - 3 * HOUR_MS, 60.0),
        (now - 16 * 60_000, 50.0),
        (HOUR_START - VIEW_HOURS * HOUR_MS, 99.0),
    ]);
    next.samples[0].values.insert("mem_used_pct".into(), 55.0);
    let later = now + 60_000;
    let saved = store.keep_experience("a", &next, later).await.unwrap();
    let device = saved.device.clone().unwrap();
    let carried = before.carried(device.clone(), &next.samples, later).expect("the next revision, the same hour");
    let made = made_now(later).await;
    assert_eq!((&carried.experience, carried.hour_ms), (&made.experience, made.hour_ms));
    assert_eq!((&carried.hours, &carried.raw), (&made.hours, &made.raw));
    for ((count, sum), (made_count, made_sum)) in carried.totals.iter().zip(&made.totals) {
        assert_eq!(count, made_count);
        assert!((sum - made_sum).abs() < 1e-9, "{sum} against {made_sum}");
    }
    assert_eq!(carried.day_average("mem_used_pct"), Some(55.0));

    // Not carried: a revision in between, or the next hour.
    assert!(before.carried(DeviceExperience { revision: 3, ..device.clone() }, &next.samples, later).is_none());
    assert!(before.carried(device, &next.samples, HOUR_START + HOUR_MS).is_none());
}

#[test]
fn the_day_window_is_the_current_hour_and_the_23_before() {
    assert_eq!(day_since(HOUR_START + 59 * 60_000), HOUR_START - 23 * HOUR_MS);
    assert_eq!(day_since(HOUR_START), HOUR_START - 23 * HOUR_MS);
}

#[test]
fn the_kept_views_are_found_walked_or_looked_up_and_only_when_current() {
    let now = HOUR_START + 5 * 60_000;
    let view = |agent: &str, revision: i64, hour_ms: i64| {
        let experience = DeviceExperience {
            agent_id: agent.to_string(),
            measured: "host".into(),
            absent: BTreeMap::new(),
            fullest_filesystem: None,
            last_sample_ms: now,
            revision,
        };
        let (totals, hours, raw) = (vec![(0, 0.0); METRICS.len()], vec![Vec::new(); RANKED.len()], vec![]);
        Arc::new(DeviceView { experience: Arc::new(experience), hour_ms, totals, hours, raw })
    };
    let views = ExperienceViews::default();
    // Bytewise, `B` sorts before `a`: a collation that put `a` first would be sorted again.
    for (agent, revision, hour_ms) in [("B", 1, HOUR_START), ("a", 2, HOUR_START), ("c", 1, HOUR_START - HOUR_MS)] {
        views.keep(view(agent, revision, hour_ms));
    }
    for n in 0..40 {
        views.keep(view(&format!("z{n:02}"), 1, HOUR_START));
    }
    let revisions: Vec<(String, i64)> =
        [("B", 1), ("a", 3), ("b", 1), ("c", 1), ("z07", 1)].iter().map(|(a, r)| (a.to_string(), *r)).collect();
    let found = |revisions: &[(String, i64)]| -> Vec<Option<String>> {
        views.current_of(revisions, now).iter().map(|v| v.as_ref().map(|v| v.experience.agent_id.clone())).collect()
    };
    // Five of 43: looked up one by one. `a` is behind, `b` has none, `c` was made an hour ago.
    let expected = [Some("B".to_string()), None, None, None, Some("z07".to_string())];
    assert_eq!(found(&revisions), expected);
    // All 43 (and one more): walked beside the list.
    let mut all: Vec<(String, i64)> = (0..40).map(|n| (format!("z{n:02}"), 1)).collect();
    all.extend(revisions.iter().cloned());
    all.sort();
    all.dedup();
    let walked = found(&all);
    assert_eq!(walked.len(), all.len());
    assert_eq!(walked.iter().flatten().count(), 41, "B and the 40 z's: {walked:?}");
    for ((agent, _), kept) in all.iter().zip(&walked) {
        assert!(kept.as_ref().is_none_or(|k| k == agent));
    }
}
