use serde_json::json;

use super::*;
use crate::collect::row;

fn params(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

/// A state dir holding a credential, and a log root beside it (one filesystem: hard links work).
fn context() -> (tempfile::TempDir, PluginContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = PluginContext { log_root: dir.path().join("log"), ..PluginContext::new(dir.path().join("state")) };
    std::fs::create_dir_all(&ctx.state_dir).unwrap();
    std::fs::create_dir_all(&ctx.log_root).unwrap();
    std::fs::write(ctx.state_dir.join("agent.json"), r#"{"credential": "tga_secret"}"#).unwrap();
    (dir, ctx)
}

#[test]
fn host_actions_read_this_machine() {
    let (_dir, ctx) = context();
    let facts = run(&ctx, "host", "facts", &Map::new()).unwrap();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(facts[0]["hostname"], json!(hostname.trim()));
    let own = run(&ctx, "host", "processes", &params(json!({"name": "*"}))).unwrap();
    assert!(own.iter().any(|r| r["pid"] == json!(std::process::id())), "this test's own process is listed");
    assert!(
        run(&ctx, "host", "disk_usage", &params(json!({"mount": "/no/such/mount"})))
            .unwrap_err()
            .contains("no local filesystem")
    );
}

#[test]
fn files_hash_and_tail_within_their_roots() {
    let (_dir, ctx) = context();
    let log = ctx.log_root.join("app.log");
    std::fs::write(&log, "one\ntwo\nthree\n").unwrap();
    let path = log.display().to_string();
    let hash = run(&ctx, "files", "sha256", &params(json!({"path": path}))).unwrap();
    // printf 'one\ntwo\nthree\n' | sha256sum
    assert_eq!(hash[0]["sha256"], json!("b6285c57e8797db5d4c51c80d6f11938afda9b11c6a003549709189e9b4b92a2"));
    assert_eq!(hash[0]["size_bytes"], json!(14));
    let tail = run(&ctx, "files", "tail", &params(json!({"path": path, "lines": 2}))).unwrap();
    assert_eq!(
        tail,
        vec![
            row([("line_number", json!(2)), ("line", json!("two"))]),
            row([("line_number", json!(3)), ("line", json!("three"))])
        ]
    );
    let refused = run(&ctx, "files", "tail", &params(json!({"path": "/etc/passwd"}))).unwrap_err();
    assert!(refused.contains("outside") && refused.contains("/log"), "{refused}");
    assert!(
        run(&ctx, "files", "sha256", &params(json!({"path": "relative"})))
            .unwrap_err()
            .contains("not an absolute path")
    );
}

/// Every spelling of the agent's own credential is refused by `tail` (whose root holds the
/// spelling) and by `sha256` (which reads anywhere else); a bind mount is tested end to end
/// (tests/suite/fleet.rs), where the agent has a mount namespace of its own.
#[test]
fn no_spelling_of_the_state_dir_is_read() {
    let (dir, ctx) = context();
    let log = &ctx.log_root;
    let state = &ctx.state_dir;
    std::os::unix::fs::symlink(state.join("agent.json"), log.join("link.log")).unwrap();
    std::os::unix::fs::symlink(state, log.join("linked-dir")).unwrap();
    std::fs::hard_link(state.join("agent.json"), log.join("hard.log")).unwrap();
    std::fs::create_dir_all(state.join("runs")).unwrap();
    std::fs::write(state.join("runs/exe-00aa.json"), "{}").unwrap();
    let held = std::fs::File::open(state.join("agent.json")).unwrap();
    let fd = format!("/proc/self/fd/{}", std::os::unix::io::AsRawFd::as_raw_fd(&held));
    let spellings = [
        log.join("link.log").display().to_string(),
        log.join("linked-dir/agent.json").display().to_string(),
        log.join("hard.log").display().to_string(),
        format!("{}/../state/agent.json", log.display()),
        format!("{}/./../log/../state/runs/exe-00aa.json", log.display()),
        format!("/proc/self/root{}", state.join("agent.json").display()),
        format!("/proc/{}/root{}", std::process::id(), state.join("agent.json").display()),
        fd,
        state.join("agent.json").display().to_string(),
        state.display().to_string(),
    ];
    for path in &spellings {
        for action in ["tail", "sha256"] {
            let refused = run(&ctx, "files", action, &params(json!({"path": path}))).unwrap_err();
            assert!(
                refused.contains("the agent's own state") || (action == "tail" && refused.contains("outside")),
                "{action} {path}: {refused}"
            );
            assert!(!refused.contains("tga_secret"), "{refused}");
        }
    }
    // The hard link is under the log root by every name: only its inode gives it away.
    let hard = run(&ctx, "files", "tail", &params(json!({"path": log.join("hard.log")}))).unwrap_err();
    assert!(hard.contains("the agent's own state"), "{hard}");
    // A real log beside them still reads.
    std::fs::write(log.join("ok.log"), "fine\n").unwrap();
    let ok = run(&ctx, "files", "tail", &params(json!({"path": log.join("ok.log")}))).unwrap();
    assert_eq!(ok[0]["line"], json!("fine"));
    drop(dir);
}

#[test]
fn workspace_changes_stay_in_the_work_dir() {
    let (_dir, ctx) = context();
    let append =
        |line: &str| run(&ctx, "workspace", "append_line", &params(json!({"file": "notes.txt", "line": line})));
    append("first").unwrap();
    let second = append("second").unwrap();
    assert_eq!(second[0]["line_count"], json!(2));
    assert_eq!(std::fs::read_to_string(ctx.work_dir().join("notes.txt")).unwrap(), "first\nsecond\n");
    let escape = run(&ctx, "workspace", "append_line", &params(json!({"file": "../agent.json", "line": "x"})));
    assert!(escape.unwrap_err().contains("not a plain file name"));
    run(&ctx, "workspace", "write_marker", &params(json!({"name": "m", "text": "hi"}))).unwrap();
    assert_eq!(std::fs::read_to_string(ctx.work_dir().join("m")).unwrap(), "hi");
    std::fs::create_dir_all(ctx.work_dir().join("cache")).unwrap();
    std::fs::write(ctx.work_dir().join("cache/a"), "a").unwrap();
    std::fs::write(ctx.work_dir().join("cache/b"), "b").unwrap();
    assert_eq!(run(&ctx, "workspace", "clear_cache", &Map::new()).unwrap()[0]["removed_files"], json!(2));
    assert!(run(&ctx, "nope", "x", &Map::new()).unwrap_err().contains("no action `nope.x`"));
}

/// Issue 43, 15: a value set with set_plugin_config reaches the action that declares it and
/// is obeyed: `workspace.max_file_bytes` caps what append_line may grow a file to.
#[test]
fn append_line_obeys_the_plugins_configured_size_cap() {
    let (_dir, mut ctx) = context();
    let append = |ctx: &PluginContext, line: &str| {
        run(ctx, "workspace", "append_line", &params(json!({"file": "f", "line": line})))
    };
    append(&ctx, "0123456789").unwrap();
    ctx.config.insert("max_file_bytes".into(), "15".into());
    let refused = append(&ctx, "abcdef").unwrap_err();
    assert!(refused.contains("would grow to 18 bytes, past the 15") && refused.contains("max_file_bytes"), "{refused}");
    assert_eq!(std::fs::read_to_string(ctx.work_dir().join("f")).unwrap(), "0123456789\n", "nothing was written");
    append(&ctx, "abc").unwrap();
    ctx.config.insert("max_file_bytes".into(), "lots".into());
    assert!(append(&ctx, "x").unwrap_err().contains("not a number of bytes"));
}
