use std::process::Command;
use std::time::{Duration, Instant};

use super::*;

#[test]
fn a_wait_status_says_how_a_process_ended() {
    assert_eq!(Ending::from_status(0), Ending::Exited(0));
    assert_eq!(Ending::from_status(3 << 8), Ending::Exited(3));
    assert_eq!(Ending::from_status(11 | 0x80), Ending::Signalled { signal: 11, core: true });
    assert_eq!(Ending::from_status(9), Ending::Signalled { signal: 9, core: false });
    assert!(!Ending::Exited(1).is_crash(), "a failure is not a crash");
    assert!(
        Ending::from_status(11).is_crash() && Ending::from_status(9).is_crash() && Ending::from_status(6).is_crash()
    );
    for asked_to_stop in [1, 2, 13, 15] {
        assert!(!Ending::from_status(asked_to_stop).is_crash(), "signal {asked_to_stop}");
    }
    assert!(Ending::from_status(15 | 0x80).is_crash(), "a core dump is a crash whatever the signal");
}

/// A datagram as the kernel sends it: one netlink message holding a connector message holding
/// one `proc_event` with `words` of event data (and `comm` after them, for a rename).
fn datagram(what: u32, words: &[u32], comm: &[u8]) -> Vec<u8> {
    let mut event = Vec::new();
    event.extend_from_slice(&what.to_ne_bytes());
    event.extend_from_slice(&0u32.to_ne_bytes()); // cpu
    event.extend_from_slice(&0u64.to_ne_bytes()); // timestamp
    for word in words {
        event.extend_from_slice(&word.to_ne_bytes());
    }
    event.extend_from_slice(comm);
    let mut message = Vec::new();
    for word in [1u32, 1, 0, 0] {
        message.extend_from_slice(&word.to_ne_bytes());
    }
    message.extend_from_slice(&(event.len() as u16).to_ne_bytes());
    message.extend_from_slice(&0u16.to_ne_bytes());
    message.extend_from_slice(&event);
    let mut out = ((16 + message.len()) as u32).to_ne_bytes().to_vec();
    out.extend_from_slice(&[0; 12]);
    out.extend_from_slice(&message);
    out
}

#[test]
fn process_events_name_what_exits() {
    let mut events = connector::Events::default();
    let mut comm = *b"flaky-app\0\0\0\0\0\0\0";
    // A fork of 4242 (named by a rename, as if exec'd) into 4343, which dies of SIGSEGV.
    assert!(events.read(&datagram(0x200, &[4242, 4242], &comm)).is_empty());
    assert!(events.read(&datagram(0x1, &[4242, 4242, 4343, 4343], &[])).is_empty());
    let exits = events.read(&datagram(0x8000_0000, &[4343, 4343, 11, 17, 4242, 4242], &[]));
    assert_eq!(exits, vec![Exit { pid: 4343, name: "flaky-app".into(), ending: Ending::from_status(11) }]);
    // A thread's exit is not a process's.
    assert!(events.read(&datagram(0x8000_0000, &[4244, 4242, 0, 0, 1, 1], &[])).is_empty());
    // A truncated datagram reads nothing rather than past its end.
    let whole = datagram(0x8000_0000, &[4242, 4242, 0, 17, 1, 1], &[]);
    assert!(events.read(&whole[..whole.len() - 20]).is_empty());
    comm[0] = 0xff;
    assert!(events.read(&datagram(0x200, &[1, 1], &comm)).is_empty(), "a name need not be UTF-8");
}

#[test]
fn accounting_records_of_both_versions_are_read() {
    let mut v3 = [0u8; 64];
    v3[1] = 3;
    v3[4..8].copy_from_slice(&(6u32 | 0x80).to_ne_bytes());
    v3[16..20].copy_from_slice(&777u32.to_ne_bytes());
    v3[48..53].copy_from_slice(b"dumpy");
    assert_eq!(
        accounting::record(&v3),
        Some(Exit { pid: 777, name: "dumpy".into(), ending: Ending::Signalled { signal: 6, core: true } })
    );
    let mut v2 = [0u8; 64];
    v2[1] = 2;
    v2[32..36].copy_from_slice(&(1u32 << 8).to_ne_bytes());
    v2[36..40].copy_from_slice(b"true");
    assert_eq!(accounting::record(&v2), Some(Exit { pid: 0, name: "true".into(), ending: Ending::Exited(1) }));
    let mut unknown = v3;
    unknown[1] = 1;
    assert_eq!(accounting::record(&unknown), None);
}

#[test]
fn the_kernel_log_names_oom_kills() {
    let global = "3,1021,5577,-;Out of memory: Killed process 4321 (hog) total-vm:1024kB, anon-rss:900kB";
    assert_eq!(kmsg::oom_kill(global), Some((4321, "hog".into())));
    let cgroup = "3,1022,5578,-;Memory cgroup out of memory: Killed process 99 (python3) total-vm:5kB";
    assert_eq!(kmsg::oom_kill(cgroup), Some((99, "python3".into())));
    assert_eq!(kmsg::oom_kill("6,1,2,-;eth0: link up"), None);
}

#[test]
fn a_sample_counts_programs_and_folds_the_many() {
    let exits = ProcessExits {
        tally: Mutex::new(BTreeMap::new()),
        unseen: None,
        stop: AtomicBool::new(false),
        turned_on_accounting: false,
    };
    let ended = |name: &str, status| Exit { pid: 1, name: name.into(), ending: Ending::from_status(status) };
    exits.record(&ended("flaky", 11), false);
    exits.record(&ended("flaky", 0), false);
    exits.record(&ended("hog", 9), true);
    for n in 0..MAX_PARTS_PER_SAMPLE {
        exits.record(&ended(&format!("tool{n}"), 0), false);
    }
    let mut sample = Sample {
        at_ms: 1,
        values: BTreeMap::new(),
        fullest_filesystem: None,
        apps: BTreeMap::new(),
        interfaces: BTreeMap::new(),
        packages: BTreeMap::new(),
    };
    let mut absent = Absent::new();
    exits.add_to(&mut sample, &mut absent);
    assert_eq!(sample.values["app_crashes"], 1.0, "an OOM kill is not a crash");
    assert_eq!(sample.apps["flaky"], BTreeMap::from([("exits".into(), 2.0), ("crashes".into(), 1.0)]));
    assert_eq!(sample.apps["hog"], BTreeMap::from([("exits".into(), 1.0), ("oom_kills".into(), 1.0)]));
    assert_eq!(sample.apps.len(), MAX_PARTS_PER_SAMPLE + 1);
    assert_eq!(sample.apps[Breakdown::Apps.other()]["exits"], 2.0, "the two past the first 64 programs");
    assert!(absent.is_empty());
    let mut next = Sample { apps: BTreeMap::new(), ..sample };
    exits.add_to(&mut next, &mut absent);
    assert_eq!((next.values["app_crashes"], next.apps.len()), (0.0, 0), "taken once");
    let blind = ProcessExits { unseen: Some("process exits are unseen here (…)".into()), ..exits };
    let mut unseen = Absent::new();
    blind.add_to(&mut next, &mut unseen);
    assert!(unseen[METRIC].starts_with("process exits are unseen"), "{unseen:?}");
    assert_eq!(program_name(" \0"), "(unnamed)");
    assert_eq!(program_name(&"é".repeat(40)).len(), MAX_PART_NAME_BYTES);
}

/// Waits (generously: the machine is shared) until the watch has counted what `wanted` asks.
fn counted(exits: &ProcessExits, app: &str, wanted: impl Fn(&Counts) -> bool) -> Counts {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Counts::default();
    while Instant::now() < deadline {
        if let Some(counts) = exits.tally.lock().unwrap().get(app) {
            seen = *counts;
        }
        if wanted(&seen) {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("`{app}` was counted {seen:?}, not as asked, within 30 s");
}

/// A copy of `sleep` under a name of its own, so that its exits are told from any other.
fn program(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy("/bin/sleep", &path).unwrap();
    path
}

use std::path::PathBuf;

/// On the build machine, as root in the initial namespaces (CI's, and where agents run on real
/// hosts): the kernel's own process events count a crash and a clean exit.
#[test]
fn the_kernels_process_events_count_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let connector = connector::Connector::open().expect("the proc connector, as root on the build machine");
    let exits = Arc::new(ProcessExits {
        tally: Mutex::new(BTreeMap::new()),
        unseen: None,
        stop: AtomicBool::new(false),
        turned_on_accounting: false,
    });
    let watching = exits.clone();
    let thread = std::thread::spawn(move || watching.run(Box::new(connector), kmsg::KernelLog::open().ok()));
    let crasher = program(dir.path(), "tg-crasher");
    let mut child = Command::new(&crasher).arg("30").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGSEGV).unwrap();
    child.wait().unwrap();
    Command::new(program(dir.path(), "tg-quick")).arg("0").status().unwrap();
    let crashed = counted(&exits, "tg-crasher", |c| c.crashes == 1);
    assert_eq!(crashed.exits, 1);
    let quick = counted(&exits, "tg-quick", |c| c.exits == 1);
    assert_eq!(quick.crashes, 0);
    exits.stop();
    thread.join().unwrap();
}

/// Starts a watch on `source` as the agent does, with the kernel log where readable.
fn watching(source: Box<dyn Source>) -> (Arc<ProcessExits>, std::thread::JoinHandle<()>) {
    let exits = Arc::new(ProcessExits {
        tally: Mutex::new(BTreeMap::new()),
        unseen: None,
        stop: AtomicBool::new(false),
        turned_on_accounting: false,
    });
    let watch = exits.clone();
    let thread = std::thread::spawn(move || watch.run(source, kmsg::KernelLog::open().ok()));
    (exits, thread)
}

/// Process accounting turned on by the agent (as a container's agent does, here in the build
/// machine's namespace, as root with CAP_SYS_PACCT) counts a crash, and is off again after.
#[test]
fn process_accounting_counts_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let accounting =
        accounting::Accounting::open(dir.path()).expect("process accounting, as root on the build machine");
    assert!(accounting.describe().contains("turned on by the agent"), "{}", accounting.describe());
    let (exits, thread) = watching(Box::new(accounting));
    let mut child = Command::new(program(dir.path(), "tg-aborter")).arg("30").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGABRT).unwrap();
    child.wait().unwrap();
    let aborted = counted(&exits, "tg-aborter", |c| c.crashes == 1);
    assert_eq!(aborted.exits, 1);
    exits.stop();
    thread.join().unwrap();
    // Dropped with the thread: accounting is off, its file no longer grows.
    let size = std::fs::metadata(dir.path().join("pacct")).unwrap().len();
    Command::new("true").status().unwrap();
    assert_eq!(std::fs::metadata(dir.path().join("pacct")).unwrap().len(), size);
}

/// A real OOM kill (a memory cgroup of 32 MiB, a program that reads /dev/zero without end) is
/// counted as an OOM kill of that program, named by the kernel log, not as a crash.
#[test]
fn an_oom_kill_is_told_from_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (exits, thread) = watching(Box::new(connector::Connector::open().expect("the proc connector, as root")));
    let cgroup = MemoryCgroup::make(32 << 20);
    let hog = dir.path().join("tg-hog");
    std::fs::copy("/usr/bin/tail", &hog).unwrap();
    let procs = cgroup.procs.display().to_string();
    let status = Command::new("sh")
        .args(["-c", &format!("echo $$ > {procs} && exec {} /dev/zero", hog.display())])
        .status()
        .unwrap();
    assert_eq!(status.code(), None, "killed, not exited: {status:?}");
    let hogged = counted(&exits, "tg-hog", |c| c.oom_kills == 1);
    assert_eq!((hogged.exits, hogged.crashes), (1, 0));
    exits.stop();
    thread.join().unwrap();
}

/// A memory cgroup of its own with a limit (cgroup v1's memory hierarchy, or v2), removed
/// when dropped.
struct MemoryCgroup {
    dir: PathBuf,
    procs: PathBuf,
}

impl MemoryCgroup {
    fn make(limit: u64) -> MemoryCgroup {
        let name = format!("toolgate-oom-test-{}", std::process::id());
        let (dir, limit_file) = if Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
            (Path::new("/sys/fs/cgroup/memory").join(&name), "memory.limit_in_bytes")
        } else {
            let controllers = std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control").unwrap_or_default();
            assert!(controllers.contains("memory"), "no memory cgroup controller to limit a test program with");
            (Path::new("/sys/fs/cgroup").join(&name), "memory.max")
        };
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(limit_file), limit.to_string()).unwrap();
        // Without swap to spill into (cgroup v1 keeps swap apart where it is accounted).
        let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), limit.to_string());
        let _ = std::fs::write(dir.join("memory.swap.max"), "0");
        MemoryCgroup { procs: dir.join("cgroup.procs"), dir }
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}
