//! Network isolation while quarantined (`--allow-network-isolation`, as root): one nftables
//! table of the agent's own that drops every packet in and out except loopback and the
//! agent's connection to its server. Releasing deletes the table; nothing else on the host's
//! rule set is touched.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::{Command, Stdio};

/// The agent's own table; its name says whose it is to anyone listing the rule set.
pub const TABLE: &str = "toolgate_quarantine";

/// The server's addresses, from the agent's `--server` URL (host names resolved now).
pub fn server_addresses(server_url: &str) -> Result<Vec<SocketAddr>, String> {
    let (scheme, rest) = server_url.split_once("://").unwrap_or(("http", server_url));
    let rest = rest.trim_end_matches('/');
    let with_port = if rest.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        rest.to_string()
    } else {
        let port = if matches!(scheme, "https" | "wss") { 443 } else { 80 };
        format!("{rest}:{port}")
    };
    let found: Vec<SocketAddr> =
        with_port.to_socket_addrs().map_err(|e| format!("cannot resolve {with_port}: {e}"))?.collect();
    if found.is_empty() {
        return Err(format!("{with_port} resolves to no address"));
    }
    Ok(found)
}

/// The nftables script: replaces the agent's table (atomically) with one that lets through
/// only loopback and TCP to and from the server's addresses.
pub fn ruleset(server: &[SocketAddr]) -> String {
    let mut inbound = String::new();
    let mut outbound = String::new();
    for address in server {
        let family = if address.is_ipv4() { "ip" } else { "ip6" };
        let (ip, port) = (address.ip(), address.port());
        inbound.push_str(&format!("    {family} saddr {ip} tcp sport {port} accept\n"));
        outbound.push_str(&format!("    {family} daddr {ip} tcp dport {port} accept\n"));
    }
    format!(
        "table inet {TABLE} {{}}\ndelete table inet {TABLE}\ntable inet {TABLE} {{\n  chain input {{\n    type filter hook input priority -10; policy drop;\n    iif lo accept\n{inbound}  }}\n  chain output {{\n    type filter hook output priority -10; policy drop;\n    oif lo accept\n{outbound}  }}\n}}\n"
    )
}

fn nft(script: &str) -> Result<(), String> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run nft (install nftables): {e}"))?;
    child.stdin.take().map(|mut stdin| stdin.write_all(script.as_bytes())).transpose().map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("nft refused the rules: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Isolates the host but for the servers (every replica the agent may connect to).
pub fn isolate(server_urls: &[String]) -> Result<(), String> {
    let mut addresses = Vec::new();
    for url in server_urls {
        addresses.extend(server_addresses(url)?);
    }
    nft(&ruleset(&addresses))
}

/// Lifts the isolation (a host that was not isolated is left as it is).
pub fn lift() -> Result<(), String> {
    nft(&format!("table inet {TABLE} {{}}\ndelete table inet {TABLE}\n"))
}

/// Whether this process may change the rule set (it runs as root).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Why this host cannot isolate its network, if it cannot: `nft` (nftables) must run.
pub fn unavailable() -> Option<String> {
    match Command::new("nft").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(status) if status.success() => None,
        Ok(status) => Some(format!("`nft --version` failed ({status})")),
        Err(e) => Some(format!("nft (nftables) cannot run here: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_let_through_only_loopback_and_the_server() {
        let rules = ruleset(&["10.1.2.3:8443".parse().unwrap(), "[fd00::1]:8443".parse().unwrap()]);
        assert!(rules.starts_with("table inet toolgate_quarantine {}\ndelete table inet toolgate_quarantine\n"));
        assert!(rules.contains("policy drop;"));
        assert!(rules.contains("ip saddr 10.1.2.3 tcp sport 8443 accept"));
        assert!(rules.contains("ip6 daddr fd00::1 tcp dport 8443 accept"));
        assert_eq!(server_addresses("http://127.0.0.1:9/").unwrap(), ["127.0.0.1:9".parse().unwrap()]);
        assert!(server_addresses("http://no-such-host.invalid:1").is_err());
    }
}
