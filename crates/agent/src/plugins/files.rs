//! `files`: hashes and log tails, read with the agent's own permissions, never of the
//! agent's own state (see [`super::guard`]).

use std::io::{Read, Seek, SeekFrom};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::guard::open_readable;
use super::{PluginContext, absolute, required_text};
use crate::collect::{Row, row};

/// The most a tail reads from the end of a file: enough for 1,000 long lines.
const TAIL_WINDOW_BYTES: u64 = 4 * 1024 * 1024;
pub fn sha256(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let path = absolute(required_text(params, "path")?)?;
    let (_, mut file) = open_readable(ctx, path, None)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buffer).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buffer[..n]);
    }
    let digest: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(vec![row([("path", json!(path.display().to_string())), ("size_bytes", json!(size)), ("sha256", json!(digest))])])
}

pub fn tail(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let asked = absolute(required_text(params, "path")?)?;
    let lines = params.get("lines").and_then(Value::as_i64).unwrap_or(20);
    if !(1..=1000).contains(&lines) {
        return Err(format!("lines must be 1-1000, not {lines}"));
    }
    let (path, mut file) = open_readable(ctx, asked, Some(&ctx.log_root))?;
    let failed = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let size = file.metadata().map_err(failed)?.len();
    let start = size.saturating_sub(TAIL_WINDOW_BYTES);
    // Lines before the window are counted, not kept, so every row has its true line number.
    let mut lines_before = 0usize;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut remaining = start;
    while remaining > 0 {
        let want = remaining.min(buffer.len() as u64) as usize;
        let n = file.read(&mut buffer[..want]).map_err(failed)?;
        if n == 0 {
            break;
        }
        lines_before += buffer[..n].iter().filter(|b| **b == b'\n').count();
        remaining -= n as u64;
    }
    file.seek(SeekFrom::Start(start)).map_err(failed)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(failed)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut all: Vec<&str> = text.split_inclusive('\n').collect();
    let mut first_number = lines_before + 1;
    if start > 0 && !all.is_empty() {
        // The window may start inside a line: that (partial) line is dropped.
        all.remove(0);
        first_number += 1;
    }
    let skip = all.len().saturating_sub(lines as usize);
    Ok(all
        .iter()
        .enumerate()
        .skip(skip)
        .map(|(i, line)| {
            let line = line.trim_end_matches('\n').trim_end_matches('\r');
            row([("line_number", json!(first_number + i)), ("line", json!(line))])
        })
        .collect())
}
