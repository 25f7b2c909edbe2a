//! OOM kills named by the kernel log (/dev/kmsg): "Out of memory: Killed process PID (NAME)"
//! and its memory-cgroup form. Reading it needs CAP_SYSLOG where `kernel.dmesg_restrict` is set
//! (Debian's default), and containers usually have no /dev/kmsg at all.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

pub struct KernelLog {
    file: File,
    record: Vec<u8>,
}

impl KernelLog {
    pub fn open() -> Result<KernelLog, String> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open("/dev/kmsg")
            .map_err(|e| format!("the kernel log (/dev/kmsg) is not readable here: {e}"))?;
        // Only what is logged from now on.
        file.seek(SeekFrom::End(0)).map_err(|e| format!("cannot seek the kernel log: {e}"))?;
        Ok(KernelLog { file, record: vec![0; 8192] })
    }

    /// The processes OOM kills ended since the last call: (pid, name).
    pub fn oom_kills(&mut self) -> Vec<(u32, String)> {
        let mut killed = Vec::new();
        loop {
            // One read is one record; none left gives WouldBlock.
            match self.file.read(&mut self.record) {
                Ok(0) => break,
                Ok(n) => killed.extend(oom_kill(&String::from_utf8_lossy(&self.record[..n]))),
                // Records overwritten before they were read: go on with the next.
                Err(e) if e.kind() == ErrorKind::BrokenPipe || e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        killed
    }
}

/// The process an OOM kill record names.
pub(super) fn oom_kill(record: &str) -> Option<(u32, String)> {
    let message = record.split_once(';').map_or(record, |(_, m)| m);
    // "Out of memory: …" and "Memory cgroup out of memory: …".
    let (_, after) = message.split_once("ut of memory: Killed process ")?;
    let (pid, rest) = after.split_once(" (")?;
    let (name, _) = rest.split_once(')')?;
    Some((pid.parse().ok()?, name.to_string()))
}
