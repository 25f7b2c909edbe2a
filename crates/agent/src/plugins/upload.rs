//! `files.collect`: sends one file, or a directory bundled as a tar, under an upload grant
//! (docs/uploads.md). The server says what the grant allows (the path, the most bytes); the
//! agent reads only what `tail` may (under the log root, never its own state), streams it in
//! frames while hashing, and ends with the size and digest it sent, which the server checks
//! against what it received. A bundle leaves out links, special files and any entry that is
//! the agent's own state.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate_domain::fleet::wire::{UPLOAD_FRAME_BYTES, UploadEnd};
use toolgate_domain::uploads::MAX_LISTED_ENTRIES;

use super::guard::{is_agent_state, open_readable, readable_directory};
use super::{PluginContext, absolute, required_text, text};
use crate::collect::{Row, row};

/// Where an upload goes: the server, over a connection of its own.
pub trait UploadChannel: Send + Sync {
    /// Takes the grant: the server's answer says what to send.
    fn begin(&self, grant_id: &str, path: Option<&str>) -> Result<Box<dyn UploadSink>, String>;
}

/// One upload under way.
pub trait UploadSink {
    /// The path the grant (or the run) names, as the server settled it.
    fn path(&self) -> &str;
    /// Sends one frame of at most [`UPLOAD_FRAME_BYTES`].
    fn send(&mut self, bytes: &[u8]) -> Result<(), String>;
    /// Ends the upload; the digest and size the server stored.
    fn end(self: Box<Self>, end: UploadEnd) -> Result<(String, u64), String>;
    /// Gives up, telling the server why (the grant is then spent).
    fn abort(self: Box<Self>, reason: &str);
}

/// The channel a step may upload through (absent in tests of the other actions).
#[derive(Clone)]
pub struct Uploads(pub std::sync::Arc<dyn UploadChannel>);

impl std::fmt::Debug for Uploads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Uploads")
    }
}

/// A writer that hashes, counts and sends in frames.
struct Sending<'a> {
    sink: &'a mut dyn UploadSink,
    frame: Vec<u8>,
    hasher: Sha256,
    size: u64,
}

impl Sending<'_> {
    fn send_frame(&mut self) -> std::io::Result<()> {
        let take = self.frame.len().min(UPLOAD_FRAME_BYTES);
        let rest = self.frame.split_off(take);
        self.sink.send(&self.frame).map_err(std::io::Error::other)?;
        self.frame = rest;
        Ok(())
    }
}

impl Write for Sending<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(buf);
        self.size += buf.len() as u64;
        self.frame.extend_from_slice(buf);
        while self.frame.len() >= UPLOAD_FRAME_BYTES {
            self.send_frame()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        while !self.frame.is_empty() {
            self.send_frame()?;
        }
        Ok(())
    }
}

/// Exactly `remaining` bytes of a file whose size was read when it was opened: a log that
/// grows meanwhile is cut there, one that shrinks is padded with zeros, so the tar stays whole.
struct ExactSize<R> {
    inner: R,
    remaining: u64,
}

impl<R: Read> Read for ExactSize<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.remaining == 0 {
            return Ok(0);
        }
        let want = buf.len().min(self.remaining as usize);
        let n = match self.inner.read(&mut buf[..want])? {
            0 => {
                buf[..want].fill(0);
                want
            }
            n => n,
        };
        self.remaining -= n as u64;
        Ok(n)
    }
}

pub fn collect(ctx: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let grant_id = required_text(params, "grant_id")?;
    let Some(Uploads(channel)) = &ctx.uploads else {
        return Err("this agent has no connection to upload through".into());
    };
    let mut sink = channel.begin(grant_id, text(params, "path"))?;
    let path = PathBuf::from(sink.path());
    let end = match send_path(ctx, &path, &mut *sink) {
        Ok(end) => end,
        Err(e) => {
            sink.abort(&e);
            return Err(e);
        }
    };
    let kind = end.kind.clone();
    let (stored_sha256, stored_size) = sink.end(end)?;
    Ok(vec![row([
        ("grant_id", json!(grant_id)),
        ("path", json!(path.display().to_string())),
        ("kind", json!(kind)),
        ("size_bytes", json!(stored_size)),
        ("sha256", json!(stored_sha256)),
    ])])
}

/// Streams `path` into `sink`; what was sent.
fn send_path(ctx: &PluginContext, path: &Path, sink: &mut dyn UploadSink) -> Result<UploadEnd, String> {
    let asked = absolute(path.to_str().unwrap_or_default())?;
    let mut sending = Sending { sink, frame: Vec::with_capacity(UPLOAD_FRAME_BYTES), hasher: Sha256::new(), size: 0 };
    let is_dir = std::fs::metadata(asked).is_ok_and(|m| m.is_dir());
    let (kind, (entries, entry_count)) = if is_dir {
        let dir = readable_directory(ctx, asked, &ctx.log_root)?;
        ("tar", bundle(ctx, &dir, &mut sending)?)
    } else {
        let (_, mut file) = open_readable(ctx, asked, Some(&ctx.log_root))?;
        std::io::copy(&mut file, &mut sending).map_err(|e| format!("cannot send {}: {e}", asked.display()))?;
        ("file", (Vec::new(), 0))
    };
    sending.flush().map_err(|e| e.to_string())?;
    let digest: String = std::mem::take(&mut sending.hasher).finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(UploadEnd { size_bytes: sending.size, sha256: digest, kind: kind.into(), entries, entry_count })
}

/// Writes a tar of `dir`'s regular files (names relative to it, each directory's in sorted
/// order, breadth first): the first names, and how many there are.
fn bundle(ctx: &PluginContext, dir: &Path, out: &mut Sending<'_>) -> Result<(Vec<String>, u64), String> {
    let mut builder = tar::Builder::new(out);
    let mut names = Vec::new();
    let mut count = 0u64;
    let mut pending = std::collections::VecDeque::from([dir.to_path_buf()]);
    while let Some(next) = pending.pop_front() {
        let read = std::fs::read_dir(&next).map_err(|e| format!("cannot read {}: {e}", next.display()))?;
        let mut entries: Vec<PathBuf> = read.flatten().map(|e| e.path()).collect();
        entries.sort();
        for entry in entries {
            let Ok(meta) = entry.symlink_metadata() else { continue };
            if is_agent_state(ctx, &entry) || meta.file_type().is_symlink() {
                continue;
            }
            if meta.is_dir() {
                pending.push_back(entry);
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            let (_, file) = open_readable(ctx, &entry, Some(&ctx.log_root))?;
            let meta = file.metadata().map_err(|e| format!("cannot read {}: {e}", entry.display()))?;
            let name = entry.strip_prefix(dir).unwrap_or(&entry).to_path_buf();
            let mut header = tar::Header::new_gnu();
            header.set_size(meta.len());
            header.set_mode(0o644);
            header.set_mtime(std::os::unix::fs::MetadataExt::mtime(&meta).max(0) as u64);
            header.set_entry_type(tar::EntryType::Regular);
            let data = ExactSize { inner: file, remaining: meta.len() };
            builder
                .append_data(&mut header, &name, data)
                .map_err(|e| format!("cannot bundle {}: {e}", entry.display()))?;
            count += 1;
            if names.len() < MAX_LISTED_ENTRIES {
                names.push(name.display().to_string());
            }
        }
    }
    builder.into_inner().map_err(|e| format!("cannot finish the bundle: {e}"))?;
    Ok((names, count))
}

#[cfg(test)]
#[path = "upload_tests.rs"]
mod tests;
