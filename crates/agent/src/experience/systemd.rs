//! What systemd says of the device's experience: how many units failed, and how long the boot
//! took (its own timing, as `systemd-analyze` prints it). Absent, with the reason, where PID 1
//! is not systemd. In a container these are the container's own systemd's.

use std::sync::Mutex;

use crate::collect::{output, systemd::systemd_runs};

const NOT_SYSTEMD: &str = "PID 1 is not systemd: no units, no boot timing";

/// Units in the `failed` state now.
pub fn failed_units() -> Result<f64, String> {
    if !systemd_runs() {
        return Err(NOT_SYSTEMD.into());
    }
    let listing =
        output("systemctl", &["list-units", "--all", "--state=failed", "--no-legend", "--plain", "--no-pager"])?;
    Ok(listing.lines().filter(|l| !l.trim().is_empty()).count() as f64)
}

/// The boot's duration in ms, once systemd says it finished; read once per boot (the boot id
/// tells a new one).
pub fn boot_duration_ms() -> Result<f64, String> {
    static READ: Mutex<Option<(String, f64)>> = Mutex::new(None);
    if !systemd_runs() {
        return Err(NOT_SYSTEMD.into());
    }
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map_err(|e| format!("boot_id: {e}"))?;
    if let Ok(read) = READ.lock()
        && let Some((id, ms)) = read.as_ref()
        && *id == boot
    {
        return Ok(*ms);
    }
    let printed = output("systemd-analyze", &["time", "--no-pager"])
        .map_err(|e| format!("systemd-analyze: {e} (the boot may not have finished)"))?;
    let ms =
        startup_ms(&printed).ok_or_else(|| format!("systemd-analyze printed no startup time: {}", printed.trim()))?;
    if let Ok(mut read) = READ.lock() {
        *read = Some((boot, ms));
    }
    Ok(ms)
}

/// The total of `Startup finished in 1.2s (kernel) + 3.4s (userspace) = 4.6s`, or its one
/// part in a container (`Startup finished in 812ms (userspace)`).
fn startup_ms(printed: &str) -> Option<f64> {
    let line = printed.lines().find(|l| l.starts_with("Startup finished in "))?;
    let total = match line.split_once(" = ") {
        Some((_, total)) => total.trim(),
        None => line.strip_prefix("Startup finished in ")?.split(" (").next()?,
    };
    duration_ms(total)
}

/// systemd's own spelling of a span: `1min 2.345s`, `812ms`, `3.1s`, `1h 2min`.
fn duration_ms(text: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut rest = text.trim();
    while !rest.is_empty() {
        rest = rest.trim_start();
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        let unit_end = rest[digits..].find(|c: char| c.is_ascii_digit() || c == ' ').map_or(rest.len(), |i| digits + i);
        let scale = match &rest[digits..unit_end] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "min" => 60_000.0,
            "h" => 3_600_000.0,
            "us" | "μs" => 0.001,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_is_the_total_or_the_one_part_a_container_has() {
        let host =
            "Startup finished in 2.112s (kernel) + 1min 3.500s (userspace) = 1min 5.612s\ngraphical.target reached\n";
        assert_eq!(startup_ms(host), Some(65_612.0));
        assert_eq!(startup_ms("Startup finished in 812ms (userspace)\n"), Some(812.0));
        assert_eq!(startup_ms("Bootup is not yet finished.\n"), None);
        assert_eq!(duration_ms("1h 2min"), Some(3_720_000.0));
        assert_eq!(duration_ms("soon"), None);
    }
}
