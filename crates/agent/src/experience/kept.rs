//! The samples not yet taken by a server, kept in the state dir: one JSON line each, appended
//! as taken, rewritten without those a server took. A restart, or a server away for hours,
//! loses nothing but the oldest past [`MAX_KEPT`].

use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};

use toolgate_domain::fleet::experience::{MAX_SAMPLES_PER_REPORT, Sample};

/// A day at one sample a minute.
pub const MAX_KEPT: usize = MAX_SAMPLES_PER_REPORT;

pub struct Kept {
    path: PathBuf,
    samples: VecDeque<Sample>,
}

impl Kept {
    pub fn file(state_dir: &Path) -> PathBuf {
        state_dir.join("experience.jsonl")
    }

    /// What the file holds; a line cut short by a crash is skipped.
    pub fn load(state_dir: &Path) -> Kept {
        let path = Kept::file(state_dir);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut samples: VecDeque<Sample> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        while samples.len() > MAX_KEPT {
            samples.pop_front();
        }
        Kept { path, samples }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Keeps `sample`, dropping the oldest past [`MAX_KEPT`].
    pub fn push(&mut self, sample: Sample) -> std::io::Result<()> {
        let line = serde_json::to_string(&sample).map_err(std::io::Error::other)?;
        self.samples.push_back(sample);
        if self.samples.len() > MAX_KEPT {
            self.samples.pop_front();
            return self.rewrite();
        }
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
        writeln!(file, "{line}")
    }

    /// The oldest samples, at most `max`.
    pub fn oldest(&self, max: usize) -> Vec<Sample> {
        self.samples.iter().take(max).cloned().collect()
    }

    /// Forgets the samples a server took (those up to `at_ms`).
    pub fn taken(&mut self, up_to_at_ms: i64) -> std::io::Result<()> {
        while self.samples.front().is_some_and(|s| s.at_ms <= up_to_at_ms) {
            self.samples.pop_front();
        }
        self.rewrite()
    }

    fn rewrite(&self) -> std::io::Result<()> {
        let mut text = String::new();
        for sample in &self.samples {
            text.push_str(&serde_json::to_string(sample).map_err(std::io::Error::other)?);
            text.push('\n');
        }
        let partial = self.path.with_extension("jsonl.partial");
        std::fs::write(&partial, text)?;
        std::fs::rename(&partial, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn sample(at_ms: i64) -> Sample {
        Sample {
            at_ms,
            values: BTreeMap::from([("load_1".to_string(), 0.5)]),
            fullest_filesystem: None,
            apps: BTreeMap::new(),
            interfaces: BTreeMap::new(),
            packages: BTreeMap::new(),
        }
    }

    #[test]
    fn samples_outlive_a_restart_until_a_server_takes_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = Kept::load(dir.path());
        for at in 1..=3 {
            kept.push(sample(at)).unwrap();
        }
        // A crash mid-line leaves a torn last line: skipped.
        std::fs::OpenOptions::new()
            .append(true)
            .open(Kept::file(dir.path()))
            .unwrap()
            .write_all(b"{\"at_ms\":")
            .unwrap();
        let mut again = Kept::load(dir.path());
        assert_eq!(again.oldest(10), [sample(1), sample(2), sample(3)]);
        again.taken(2).unwrap();
        assert_eq!(Kept::load(dir.path()).oldest(10), [sample(3)]);
    }

    #[test]
    fn the_oldest_go_first_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = Kept::load(dir.path());
        for at in 0..(MAX_KEPT as i64 + 5) {
            kept.push(sample(at)).unwrap();
        }
        assert_eq!(kept.len(), MAX_KEPT);
        assert_eq!(Kept::load(dir.path()).oldest(1), [sample(5)]);
    }
}
