//! listening_ports (/proc/net/tcp*) and network_interfaces (/sys/class/net, getifaddrs).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::json;

use super::{Row, Unavailable, row};

/// The kernel prints each 32-bit word of an address as a number in host byte order, so the
/// word's native bytes are the address's bytes.
fn parse_address(hex: &str) -> Option<(String, u16)> {
    let (address, port) = hex.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    if address.len() % 8 != 0 || !address.is_ascii() {
        return None;
    }
    let bytes: Vec<u8> = (0..address.len() / 8)
        .map(|i| u32::from_str_radix(&address[i * 8..i * 8 + 8], 16).map(u32::to_ne_bytes))
        .collect::<Result<Vec<_>, _>>()
        .ok()?
        .concat();
    let ip = match bytes.len() {
        4 => Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?).to_string(),
        16 => Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?).to_string(),
        _ => return None,
    };
    Some((ip, port))
}

/// Socket inode -> (pid, process name), from every /proc/PID/fd this agent may read.
fn socket_owners() -> HashMap<u64, (i64, String)> {
    let mut owners = HashMap::new();
    let Ok(dir) = fs::read_dir("/proc") else { return owners };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else { continue };
        let name = fs::read_to_string(entry.path().join("comm")).unwrap_or_default().trim().to_string();
        for fd in fds.flatten() {
            let Ok(target) = fs::read_link(fd.path()) else { continue };
            let target = target.to_string_lossy();
            let inode = target.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']'));
            if let Some(Ok(inode)) = inode.map(str::parse) {
                owners.entry(inode).or_insert_with(|| (pid, name.clone()));
            }
        }
    }
    owners
}

/// The TCP state code of LISTEN.
const LISTEN: &str = "0A";

pub fn listening_ports() -> Result<Vec<Row>, Unavailable> {
    let owners = socket_owners();
    let mut rows = Vec::new();
    for (protocol, path) in [("tcp", "/proc/net/tcp"), ("tcp6", "/proc/net/tcp6")] {
        let Ok(text) = fs::read_to_string(path) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 || f[3] != LISTEN {
                continue;
            }
            let Some((address, port)) = parse_address(f[1]) else { continue };
            let inode: u64 = f[9].parse().unwrap_or(0);
            let (pid, process) = owners.get(&inode).cloned().unwrap_or((-1, String::new()));
            rows.push(row([
                ("protocol", json!(protocol)),
                ("address", json!(address)),
                ("port", json!(port)),
                ("uid", json!(f[7].parse::<i64>().unwrap_or(-1))),
                ("pid", json!(pid)),
                ("process", json!(process)),
            ]));
        }
    }
    Ok(rows)
}

pub fn interfaces() -> Result<Vec<Row>, Unavailable> {
    let mut addresses: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Ok(all) = nix::ifaddrs::getifaddrs() {
        for a in all {
            let Some(address) = a.address else { continue };
            let ip = if let Some(v4) = address.as_sockaddr_in() {
                v4.ip().to_string()
            } else if let Some(v6) = address.as_sockaddr_in6() {
                v6.ip().to_string()
            } else {
                continue;
            };
            addresses.entry(a.interface_name).or_default().push(ip);
        }
    }
    let mut rows = Vec::new();
    for entry in fs::read_dir("/sys/class/net")?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let read = |file: &str| fs::read_to_string(entry.path().join(file)).unwrap_or_default().trim().to_string();
        let mac = read("address");
        rows.push(row([
            ("mac", json!(if mac == "00:00:00:00:00:00" { String::new() } else { mac })),
            ("mtu", json!(read("mtu").parse::<i64>().unwrap_or(0))),
            ("state", json!(read("operstate"))),
            ("addresses", json!(addresses.get(&name).map(|a| a.join(",")).unwrap_or_default())),
            ("name", json!(name)),
        ]));
    }
    rows.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_addresses() {
        assert_eq!(parse_address("0100007F:1F90"), Some(("127.0.0.1".into(), 8080)));
        assert_eq!(parse_address("00000000:0016"), Some(("0.0.0.0".into(), 22)));
        assert_eq!(parse_address("00000000000000000000000001000000:0050"), Some(("::1".into(), 80)));
        assert_eq!(parse_address("zz:1"), None);
    }

    #[test]
    fn a_port_this_test_listens_on_is_listed() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let rows = listening_ports().unwrap();
        let mine = rows.iter().find(|r| r["port"] == port && r["address"] == "127.0.0.1").expect("listed");
        assert_eq!(mine["pid"], i64::from(std::process::id()));
    }
}
