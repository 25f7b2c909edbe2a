//! The endpoint's experience (docs/experience.md): every metric of
//! `toolgate_domain::fleet::experience::METRICS`, sampled on the interval the server's welcome
//! sets (protocol 5), kept in the state dir until a server takes them, and sent in batches over
//! report connections. Sampling goes on while the server is away.

mod cgroup;
mod exits;
mod interfaces;
mod kept;
mod packages;
mod procfs;
mod programs;
mod sampler;
mod systemd;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use toolgate_domain::CancellationToken;
use toolgate_domain::fleet::experience::{
    ExperienceReport, ExperienceSettings, MAX_SAMPLES_PER_REPORT, Measured, Sample,
};
use toolgate_domain::fleet::wire::AgentMessage;

pub use cgroup::Cgroup;
pub use exits::ProcessExits;
pub use kept::Kept;
pub use sampler::{Absent, Sampler};

use crate::connection::{Reporter, now_ms};
use crate::delivery::deliver;
use crate::servers::Servers;
use crate::state::Identity;

/// What the agent measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Measure {
    /// Its container's cgroup when it runs in one, else the host.
    #[default]
    Auto,
    /// The whole host, as `/proc` shows it.
    Host,
    /// Its cgroup: in a container the container's, outside one the agent's own.
    Cgroup,
    /// Nothing, whatever a server asks (the fleet benchmark's simulated agents).
    Off,
}

/// Why this process is in a container, when it is: the marker systemd documents for
/// container managers (`/run/systemd/container`, written by systemd-nspawn, podman, LXC…),
/// PID 1's `container=` variable (readable as root), or Docker's `/.dockerenv`.
pub fn container() -> Option<String> {
    if let Ok(manager) = std::fs::read_to_string("/run/systemd/container") {
        return Some(format!("/run/systemd/container says `{}`", manager.trim()));
    }
    if let Ok(environ) = std::fs::read("/proc/1/environ")
        && let Some(var) = environ.split(|b| *b == 0).find(|v| v.starts_with(b"container="))
    {
        return Some(format!("PID 1 has `{}`", String::from_utf8_lossy(var)));
    }
    Path::new("/.dockerenv").exists().then(|| "/.dockerenv exists".to_string())
}

/// The sampler `measure` asks for: a container's cgroup (its whole tree), the agent's own
/// cgroup, or the host.
pub fn sampler(measure: Measure) -> Sampler {
    let inside = container();
    let cgroup = match (measure, &inside) {
        (Measure::Host | Measure::Off, _) | (Measure::Auto, None) => None,
        (Measure::Auto | Measure::Cgroup, Some(why)) => {
            tracing::info!("measuring this container's cgroup: {why}");
            Some(Cgroup::locate(true))
        }
        (Measure::Cgroup, None) => Some(Cgroup::locate(false)),
    };
    Sampler::new(cgroup, now_ms())
}

/// What sessions tell the experience tasks: whom to report as and how often (from the
/// welcome), and the heartbeat's round trip.
pub struct Experience {
    settings: watch::Sender<Option<(Identity, ExperienceSettings)>>,
    rtt: Mutex<Option<(i64, f64)>>,
}

impl Default for Experience {
    fn default() -> Self {
        Experience { settings: watch::Sender::new(None), rtt: Mutex::new(None) }
    }
}

impl Experience {
    /// A welcome's settings (none from a server that does not ask: sampling stops).
    pub fn welcomed(&self, identity: &Identity, settings: Option<ExperienceSettings>) {
        self.settings.send_replace(settings.map(|s| (identity.clone(), s)));
    }

    /// A pong came back for a ping sent at `sent_us` ([`now_us`]).
    pub fn pong(&self, sent_us: i64) {
        let now = now_us();
        if let Ok(mut rtt) = self.rtt.lock() {
            *rtt = Some((now / 1000, (now - sent_us).max(0) as f64 / 1000.0));
        }
    }

    /// The last round trip, when one came within `fresh_ms`.
    fn rtt(&self, fresh_ms: i64) -> Result<f64, String> {
        match *self.rtt.lock().map_err(|_| "the round trip could not be read".to_string())? {
            Some((at, ms)) if now_ms() - at <= fresh_ms => Ok(ms),
            _ => Err("no round trip to the server lately: not connected".into()),
        }
    }
}

/// Microseconds since the epoch: a ping's payload, so that a round trip on a LAN (well under a
/// millisecond) is measured, not rounded to nothing.
pub fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// Samples and reports until `stop`; idle until a server asks for experience.
pub async fn run(
    experience: Arc<Experience>,
    servers: Arc<Servers>,
    measure: Measure,
    state_dir: PathBuf,
    max_wait_ms: u64,
    stop: CancellationToken,
    reporter: Arc<dyn Reporter>,
) {
    if measure == Measure::Off {
        return;
    }
    let kept = Arc::new(Mutex::new(Kept::load(&state_dir)));
    let latest = Arc::new(Mutex::new(None));
    let sampling = sample(experience.clone(), measure, state_dir, kept.clone(), latest.clone(), reporter);
    let reporting = report(experience, servers, kept, latest, max_wait_ms);
    tokio::select! {
        () = sampling => {}
        () = reporting => {}
        () = stop.cancelled() => {}
    }
}

type Shared<T> = Arc<Mutex<T>>;
/// What the newest sample measured, and what it could not: what a report says of its batch.
type Latest = Shared<Option<(Measured, Absent)>>;

/// The sampler, and what adds to its samples: the watch on process exits, and the process
/// table.
struct Measuring {
    sampler: Sampler,
    exits: Arc<ProcessExits>,
    programs: programs::Programs,
}

impl Measuring {
    fn start(measure: Measure, state_dir: &Path) -> Measuring {
        let mut programs = programs::Programs::default();
        // Read once now, so that the first sample's programs cover an interval.
        programs.add_to(&mut Sample::default(), false);
        Measuring { sampler: self::sampler(measure), exits: ProcessExits::watch(state_dir), programs }
    }
}

impl Drop for Measuring {
    fn drop(&mut self) {
        self.exits.stop();
    }
}

async fn sample(
    experience: Arc<Experience>,
    measure: Measure,
    state_dir: PathBuf,
    kept: Shared<Kept>,
    latest: Latest,
    reporter: Arc<dyn Reporter>,
) {
    let mut asked = experience.settings.subscribe();
    let sampler = Arc::new(Mutex::new(None::<Measuring>));
    let state_dir = Arc::new(state_dir);
    // A reporter that makes its own samples (the load benchmark's) replaces the host's.
    let reported = reporter.experience_sample(now_ms()).is_some();
    loop {
        // Made (its counters read) once asked, so that the first sample covers an interval.
        if !reported && asked.borrow().is_some() && sampler.lock().is_ok_and(|s| s.is_none()) {
            let dir = state_dir.clone();
            let made = tokio::task::spawn_blocking(move || Measuring::start(measure, &dir)).await;
            match (made, sampler.lock()) {
                (Ok(made), Ok(mut slot)) => *slot = Some(made),
                _ => tracing::error!("experience: the sampler could not be made"),
            }
        }
        let interval = asked.borrow_and_update().as_ref().map(|(_, s)| s.sample_interval_ms.max(1_000));
        let Some(interval) = interval else {
            // Not asked (yet, or by this server): wait for a welcome that asks.
            if asked.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::time::sleep(Duration::from_millis(interval)).await;
        let rtt = experience.rtt(2 * interval as i64);
        let (sampler, kept, latest, dir) = (sampler.clone(), kept.clone(), latest.clone(), state_dir.clone());
        let reporter = reporter.clone();
        let taken = tokio::task::spawn_blocking(move || {
            let (one, measured, missing) = match reporter.experience_sample(now_ms()) {
                Some(one) => (one, Measured::Host, Absent::new()),
                None => {
                    let mut sampler = sampler.lock().map_err(|_| "the sampler panicked before".to_string())?;
                    let measuring = sampler.get_or_insert_with(|| Measuring::start(measure, &dir));
                    let (mut one, mut missing) = measuring.sampler.sample(now_ms(), rtt);
                    measuring.exits.add_to(&mut one, &mut missing);
                    measuring.programs.add_to(&mut one, measuring.exits.counted());
                    (one, measuring.sampler.measured(), missing)
                }
            };
            if let Ok(mut latest) = latest.lock() {
                *latest = Some((measured, missing));
            }
            let mut kept = kept.lock().map_err(|_| "the kept samples were poisoned".to_string())?;
            kept.push(one).map_err(|e| format!("cannot keep a sample in {}: {e}", kept.path().display()))
        })
        .await;
        match taken {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("experience: {e}"),
            Err(e) => tracing::error!("experience: the sampler failed: {e}"),
        }
    }
}

async fn report(
    experience: Arc<Experience>,
    servers: Arc<Servers>,
    kept: Shared<Kept>,
    latest: Latest,
    max_wait_ms: u64,
) {
    let mut asked = experience.settings.subscribe();
    loop {
        let Some((identity, settings)) = asked.borrow_and_update().clone() else {
            if asked.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::time::sleep(Duration::from_millis(settings.report_interval_ms.max(1_000))).await;
        let batch = match kept.lock() {
            Ok(kept) if !kept.is_empty() => kept.oldest(MAX_SAMPLES_PER_REPORT),
            _ => continue,
        };
        let Some(last) = batch.last().map(|s| s.at_ms) else { continue };
        // Reported once this process has sampled: the batch says what the host can give.
        let Some((measured, absent)) = latest.lock().ok().and_then(|l| l.clone()) else { continue };
        let frame = AgentMessage::Experience(ExperienceReport { measured, absent, samples: batch });
        // Retried until a server takes it; samples go on being kept meanwhile.
        deliver(&servers, &identity, &[frame], max_wait_ms).await;
        if let Ok(mut kept) = kept.lock()
            && let Err(e) = kept.taken(last)
        {
            tracing::warn!("experience: cannot forget the samples a server took: {e}");
        }
    }
}
