//! BSD process accounting (acct(2), acct(5)): the kernel appends a 64-byte record for each
//! process that ends to the file accounting was turned on with, for the processes of the
//! caller's PID namespace, so it works in a container that has CAP_SYS_PACCT. When the host
//! keeps accounting already (Debian's `acct`, Red Hat's `psacct`), its file is read and left
//! alone; else the agent turns accounting on to a file of its own in its state dir, starts a
//! fresh one when it grows past [`ROTATE_AT`], and turns accounting off when it stops.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::unistd::acct;

use super::{Ending, Exit, POLL, Source};

/// Where hosts keep accounting of their own.
const HOST_FILES: [&str; 2] = ["/var/log/account/pacct", "/var/account/pacct"];
const RECORD: usize = 64;
const ROTATE_AT: u64 = 4 << 20;

pub struct Accounting {
    path: PathBuf,
    file: File,
    inode: u64,
    /// Whether the agent turned accounting on (and so rotates the file and turns it off).
    owned: bool,
    /// Bytes read past the last whole record.
    partial: Vec<u8>,
}

impl Accounting {
    pub fn open(state_dir: &Path) -> Result<Accounting, String> {
        for host_file in HOST_FILES.map(PathBuf::from) {
            if host_file.exists() {
                let mut read = Accounting::reader(&host_file, false)?;
                // What ended before the agent looked is not this sample's.
                read.file.seek(SeekFrom::End(0)).map_err(|e| format!("cannot read {}: {e}", host_file.display()))?;
                return Ok(read);
            }
        }
        let path = state_dir.join("pacct");
        turn_on(&path)?;
        Accounting::reader(&path, true)
    }

    /// Whether the agent turned accounting on for it.
    pub fn owned(&self) -> bool {
        self.owned
    }

    fn reader(path: &Path, owned: bool) -> Result<Accounting, String> {
        let file = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let inode = file.metadata().map_err(|e| format!("cannot read {}: {e}", path.display()))?.ino();
        Ok(Accounting { path: path.to_path_buf(), file, inode, owned, partial: Vec::new() })
    }

    /// The whole records appended since the last read.
    fn drain(&mut self) -> std::io::Result<Vec<Exit>> {
        self.file.read_to_end(&mut self.partial)?;
        let whole = self.partial.len() / RECORD * RECORD;
        let exits = self.partial[..whole].chunks_exact(RECORD).filter_map(record).collect();
        self.partial.drain(..whole);
        Ok(exits)
    }

    /// After the file it reads has been replaced (rotated by the agent or the host's cron),
    /// reads the new one from its start.
    fn follow(&mut self) -> std::io::Result<()> {
        self.file = File::open(&self.path)?;
        self.inode = self.file.metadata()?.ino();
        self.partial.clear();
        Ok(())
    }
}

impl Source for Accounting {
    fn next(&mut self) -> std::io::Result<Vec<Exit>> {
        std::thread::sleep(POLL);
        let mut exits = self.drain()?;
        if self.owned && self.file.stream_position()? >= ROTATE_AT {
            let fresh = self.path.with_extension("fresh");
            turn_on(&fresh).map_err(std::io::Error::other)?;
            exits.extend(self.drain()?);
            std::fs::rename(&fresh, &self.path)?;
            self.follow()?;
        } else if !self.owned {
            match std::fs::metadata(&self.path) {
                Ok(now) if now.ino() != self.inode => {
                    exits.extend(self.drain()?);
                    self.follow()?;
                }
                Ok(now) if now.len() < self.file.stream_position()? => {
                    self.file.seek(SeekFrom::Start(0))?;
                    self.partial.clear();
                }
                _ => {}
            }
        }
        Ok(exits)
    }

    fn describe(&self) -> String {
        let whose = if self.owned { "turned on by the agent" } else { "the host's own" };
        format!("process accounting ({}, {whose})", self.path.display())
    }
}

impl Drop for Accounting {
    fn drop(&mut self) {
        if self.owned {
            turn_off();
        }
    }
}

/// Turns accounting off (the agent's: it turns it on only when the host keeps none).
pub fn turn_off() {
    if let Err(e) = acct::disable() {
        tracing::warn!("experience: cannot turn process accounting off: {e}");
    }
}

/// Turns accounting on to `path`, a new empty file.
fn turn_on(path: &Path) -> Result<(), String> {
    File::create(path).map_err(|e| format!("cannot make {}: {e}", path.display()))?;
    acct::enable(path).map_err(|e| match e {
        nix::errno::Errno::EPERM => format!(
            "turning it on needs CAP_SYS_PACCT, which containers lack unless given it (systemd-nspawn --capability=CAP_SYS_PACCT, docker run --cap-add SYS_PACCT): {e}"
        ),
        nix::errno::Errno::ENOSYS => format!("this kernel has no process accounting (CONFIG_BSD_PROCESS_ACCT): {e}"),
        _ => format!("cannot turn it on to {}: {e}", path.display()),
    })
}

/// One record (acct(5)): version 3 (`struct acct_v3`, with the pid) or 2 (`struct acct`).
pub(super) fn record(bytes: &[u8]) -> Option<Exit> {
    let u32_at = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let name = |range: std::ops::Range<usize>| {
        let field = &bytes[range];
        let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
        String::from_utf8_lossy(&field[..end]).into_owned()
    };
    match bytes[1] & 0x7f {
        3 => Some(Exit { pid: u32_at(16), name: name(48..64), ending: Ending::from_status(u32_at(4)) }),
        2 => Some(Exit { pid: 0, name: name(36..53), ending: Ending::from_status(u32_at(32)) }),
        _ => None,
    }
}
