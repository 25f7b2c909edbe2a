//! `files.collect` against a channel that records what it was sent (the real server's side is
//! tested end to end in tests/suite/uploads.rs): the digest and size match the bytes, a directory
//! arrives as a tar of its regular files, and nothing of the agent's state is ever sent.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::*;
use crate::plugins::{PluginContext, run};

#[derive(Default)]
struct Recorded {
    bytes: Vec<u8>,
    largest_frame: usize,
    end: Option<UploadEnd>,
    aborted: Option<String>,
}

struct Recorder {
    path: String,
    recorded: Arc<Mutex<Recorded>>,
}

impl UploadChannel for Recorder {
    fn begin(&self, _grant_id: &str, path: Option<&str>) -> Result<Box<dyn UploadSink>, String> {
        let path = path.map_or_else(|| self.path.clone(), str::to_string);
        Ok(Box::new(Recorder { path, recorded: self.recorded.clone() }))
    }
}

impl UploadSink for Recorder {
    fn path(&self) -> &str {
        &self.path
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut recorded = self.recorded.lock().unwrap();
        recorded.largest_frame = recorded.largest_frame.max(bytes.len());
        recorded.bytes.extend_from_slice(bytes);
        Ok(())
    }

    fn end(self: Box<Self>, end: UploadEnd) -> Result<(String, u64), String> {
        let answer = (end.sha256.clone(), end.size_bytes);
        self.recorded.lock().unwrap().end = Some(end);
        Ok(answer)
    }

    fn abort(self: Box<Self>, reason: &str) {
        self.recorded.lock().unwrap().aborted = Some(reason.to_string());
    }
}

fn context(granted: &str) -> (tempfile::TempDir, PluginContext, Arc<Mutex<Recorded>>) {
    let dir = tempfile::tempdir().unwrap();
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let mut ctx = PluginContext::new(dir.path().join("log/agent-state"));
    ctx.log_root = dir.path().join("log");
    std::fs::create_dir_all(&ctx.state_dir).unwrap();
    std::fs::write(ctx.state_dir.join("agent.json"), r#"{"credential": "tga_secret"}"#).unwrap();
    let path = ctx.log_root.join(granted).display().to_string();
    ctx.uploads = Some(Uploads(Arc::new(Recorder { path, recorded: recorded.clone() })));
    (dir, ctx, recorded)
}

fn collect(ctx: &PluginContext) -> Result<Vec<crate::collect::Row>, String> {
    let params: Map<String, Value> = json!({"grant_id": "ab"}).as_object().cloned().unwrap();
    run(ctx, "files", "collect", &params)
}

#[test]
fn a_file_is_sent_in_frames_with_its_digest() {
    let (_dir, ctx, recorded) = context("big.log");
    let content: Vec<u8> = (0..200_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
    std::fs::write(ctx.log_root.join("big.log"), &content).unwrap();
    let rows = collect(&ctx).unwrap();
    let digest: String = Sha256::digest(&content).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!((rows[0]["sha256"].clone(), rows[0]["size_bytes"].clone()), (json!(digest), json!(content.len())));
    assert_eq!(rows[0]["kind"], json!("file"));
    let recorded = recorded.lock().unwrap();
    assert_eq!(recorded.bytes, content);
    assert_eq!(recorded.largest_frame, UPLOAD_FRAME_BYTES, "frames are as large as allowed, never larger");
}

#[test]
fn a_directory_is_a_tar_of_its_files_without_links_or_the_agents_state() {
    let (dir, ctx, recorded) = context("");
    let log = &ctx.log_root;
    std::fs::create_dir_all(log.join("app/old")).unwrap();
    std::fs::write(log.join("app/current.log"), "now\n").unwrap();
    std::fs::write(log.join("app/old/1.log"), "then\n").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", log.join("app/passwd")).unwrap();
    std::fs::hard_link(ctx.state_dir.join("agent.json"), log.join("app/hard.log")).unwrap();
    let rows = collect(&ctx).unwrap();
    assert_eq!(rows[0]["kind"], json!("tar"));
    let recorded = recorded.lock().unwrap();
    let mut archive = tar::Archive::new(recorded.bytes.as_slice());
    let mut members = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
        members.push((entry.path().unwrap().display().to_string(), text));
    }
    let expected = [("app/current.log", "now\n"), ("app/old/1.log", "then\n")];
    assert_eq!(members, expected.map(|(n, t)| (n.to_string(), t.to_string())));
    let end = recorded.end.as_ref().unwrap();
    assert_eq!((end.entries.clone(), end.entry_count), (vec!["app/current.log".into(), "app/old/1.log".into()], 2));
    assert!(!String::from_utf8_lossy(&recorded.bytes).contains("tga_secret"));
    drop(dir);
}

#[test]
fn the_agents_state_and_places_outside_the_log_root_are_refused_and_the_server_told() {
    let (_dir, ctx, recorded) = context("agent-state/agent.json");
    let refused = collect(&ctx).unwrap_err();
    assert!(refused.contains("the agent's own state"), "{refused}");
    assert!(recorded.lock().unwrap().aborted.as_deref().is_some_and(|r| r.contains("own state")));
    let (_dir, ctx, _) = context("agent-state");
    assert!(collect(&ctx).unwrap_err().contains("the agent's own state"));
    let (_dir, ctx, _) = context("../../../etc");
    assert!(collect(&ctx).unwrap_err().contains("outside"));
    let mut bare = ctx.clone();
    bare.uploads = None;
    assert!(collect(&bare).unwrap_err().contains("no connection to upload through"));
}
