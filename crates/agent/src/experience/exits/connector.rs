//! The kernel's process events over the netlink proc connector (Linux's
//! Documentation/driver-api/connector.rst, include/uapi/linux/cn_proc.h): every fork, exec,
//! name change and exit on the machine, as they happen. The kernel sends them only to a listener
//! in the initial PID and user namespaces that may administer the network (CAP_NET_ADMIN), and
//! ignores any other silently: so the namespaces are checked first, to say why.

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_CONNECTOR};
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;
use std::collections::HashMap;

use super::{Ending, Exit, Source};

const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const NLMSG_DONE: u16 = 3;
const NLMSG_HEADER: usize = 16;
const CN_MSG_HEADER: usize = 20;
/// Where a `proc_event`'s `event_data` begins: after `what`, `cpu` and `timestamp_ns`.
const EVENT_DATA: usize = 16;

const PROC_EVENT_FORK: u32 = 0x1;
const PROC_EVENT_EXEC: u32 = 0x2;
const PROC_EVENT_COMM: u32 = 0x200;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// The inode numbers Linux gives its initial namespaces (PROC_PID_INIT_INO and
/// PROC_USER_INIT_INO in include/linux/proc_ns.h), the same on every machine.
const INITIAL_PID_NS: &str = "pid:[4026531836]";
const INITIAL_USER_NS: &str = "user:[4026531837]";

/// The most process names remembered; past it they are read again from /proc.
const MAX_NAMES: usize = 65_536;

pub struct Connector {
    socket: Socket,
    events: Events,
    buffer: Vec<u8>,
}

/// Reads events, remembering each live process's name (by its thread group id): an exiting
/// process may be gone from /proc before its exit is read.
#[derive(Default)]
pub(super) struct Events {
    names: HashMap<u32, String>,
}

impl Connector {
    pub fn open() -> Result<Connector, String> {
        for (link, initial) in [("/proc/self/ns/pid", INITIAL_PID_NS), ("/proc/self/ns/user", INITIAL_USER_NS)] {
            let ours = std::fs::read_link(link).map_err(|e| format!("cannot read {link}: {e}"))?;
            if ours.to_string_lossy() != initial {
                return Err(format!(
                    "the kernel sends them only to its initial namespaces, and this agent's {link} is {} (a container)",
                    ours.display()
                ));
            }
        }
        let mut socket = Socket::new(NETLINK_CONNECTOR).map_err(|e| format!("no netlink connector socket: {e}"))?;
        socket.bind(&SocketAddr::new(0, CN_IDX_PROC)).map_err(|e| match e.raw_os_error() {
            Some(nix::libc::EPERM) => format!("listening needs CAP_NET_ADMIN (an agent run as root has it): {e}"),
            _ => format!("cannot join the kernel's process events: {e}"),
        })?;
        setsockopt(&socket, sockopt::ReceiveTimeout, &TimeVal::new(super::POLL.as_secs() as _, 0))
            .map_err(|e| format!("cannot set a receive timeout: {e}"))?;
        // A burst of forks must not overflow the queue: as large as the kernel allows.
        let _ = socket.set_rx_buf_sz(4 << 20);
        let mut listen = Vec::with_capacity(NLMSG_HEADER + CN_MSG_HEADER + 4);
        listen.extend_from_slice(&((NLMSG_HEADER + CN_MSG_HEADER + 4) as u32).to_ne_bytes());
        listen.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        listen.extend_from_slice(&[0; 10]); // flags, sequence, port
        for word in [CN_IDX_PROC, CN_VAL_PROC, 0, 0] {
            listen.extend_from_slice(&word.to_ne_bytes()); // id, sequence, ack
        }
        listen.extend_from_slice(&4u16.to_ne_bytes());
        listen.extend_from_slice(&0u16.to_ne_bytes());
        listen.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
        socket
            .send_to(&listen, &SocketAddr::new(0, 0), 0)
            .map_err(|e| format!("the kernel refused to send its process events: {e}"))?;
        Ok(Connector { socket, events: Events { names: live_names() }, buffer: Vec::with_capacity(64 * 1024) })
    }
}

impl Events {
    /// The exits in one datagram, remembering the names forks, execs and renames give.
    pub(super) fn read(&mut self, datagram: &[u8]) -> Vec<Exit> {
        let mut exits = Vec::new();
        let mut at = 0;
        while at + NLMSG_HEADER + CN_MSG_HEADER <= datagram.len() {
            let length = u32_at(datagram, at) as usize;
            if length < NLMSG_HEADER || at + length > datagram.len() {
                break;
            }
            let message = &datagram[at + NLMSG_HEADER..at + length];
            if message.len() >= CN_MSG_HEADER
                && u32_at(message, 0) == CN_IDX_PROC
                && u32_at(message, 4) == CN_VAL_PROC
                && let Some(exit) = self.event(&message[CN_MSG_HEADER..])
            {
                exits.push(exit);
            }
            at += length.next_multiple_of(4);
        }
        exits
    }

    fn event(&mut self, event: &[u8]) -> Option<Exit> {
        let data = event.get(EVENT_DATA..)?;
        let word = |n: usize| data.get(4 * n..4 * n + 4).map(|w| u32::from_ne_bytes(w.try_into().expect("4 bytes")));
        match u32_at(event, 0) {
            PROC_EVENT_FORK => {
                // parent pid, parent tgid, child pid, child tgid: a new process (not a thread)
                // is named after its parent until it execs.
                let (parent, child, child_tgid) = (word(1)?, word(2)?, word(3)?);
                if child == child_tgid {
                    let name = self.names.get(&parent).cloned().or_else(|| comm(child))?;
                    self.remember(child, name);
                }
                None
            }
            PROC_EVENT_EXEC => {
                let tgid = word(1)?;
                if let Some(name) = comm(tgid) {
                    self.remember(tgid, name);
                }
                None
            }
            PROC_EVENT_COMM => {
                let (pid, tgid) = (word(0)?, word(1)?);
                let name = data.get(8..24)?;
                if pid == tgid {
                    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
                    self.remember(tgid, String::from_utf8_lossy(&name[..end]).into_owned());
                }
                None
            }
            PROC_EVENT_EXIT => {
                // pid, tgid, exit code, exit signal: the leader's exit is the process's.
                let (pid, tgid, status) = (word(0)?, word(1)?, word(2)?);
                if pid != tgid {
                    return None;
                }
                let name = self.names.remove(&tgid).or_else(|| comm(tgid)).unwrap_or_else(|| "(unknown)".into());
                Some(Exit { pid, name, ending: Ending::from_status(status) })
            }
            _ => None,
        }
    }

    fn remember(&mut self, tgid: u32, name: String) {
        if self.names.len() >= MAX_NAMES {
            // Exits missed (a full queue) leave names behind: start again from what lives.
            self.names = live_names();
        }
        self.names.insert(tgid, name);
    }
}

impl Source for Connector {
    fn next(&mut self) -> std::io::Result<Vec<Exit>> {
        self.buffer.clear();
        self.buffer.reserve(64 * 1024);
        // Waits at most POLL, the socket's receive timeout.
        match self.socket.recv(&mut self.buffer, 0) {
            Ok(_) => Ok(self.events.read(&self.buffer)),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => {
                Ok(Vec::new())
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOBUFS) => {
                tracing::warn!("experience: process events came faster than they were read; some exits were missed");
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }

    fn describe(&self) -> String {
        "the kernel's process events (netlink proc connector)".into()
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    bytes.get(at..at + 4).map_or(0, |w| u32::from_ne_bytes(w.try_into().expect("4 bytes")))
}

/// A live process's name (its `comm`).
fn comm(tgid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{tgid}/comm")).ok().map(|n| n.trim_end_matches('\n').to_string())
}

/// The name of every process alive now.
fn live_names() -> HashMap<u32, String> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return HashMap::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, comm(pid)?)))
        .collect()
}
