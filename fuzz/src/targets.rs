//! The fuzz targets: untrusted input, the server's own code. A target panics only on a bug.

use std::sync::OnceLock;

use arbitrary::Unstructured;
use serde_json::{Map, Value};
use toolgate::registry::{CATALOGUE, POLICY_YAML, TOOLS_YAML};
use toolgate_codegen::{Inputs, SourceFile, SourcePaths};
use toolgate_domain::Denial;
use toolgate_domain::approvals::{ArgumentBinding, canonical_arguments};
use toolgate_domain::redact::redacted;
use toolgate_gate::Schemas;

pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    /// Tokens the mutator splices in, so mutations reach the grammar's corners.
    pub dictionary: &'static [&'static [u8]],
}

pub static TARGETS: [Target; 6] = [
    Target {
        name: "yaml",
        run: yaml,
        dictionary: &[
            b"tools:\n",
            b"- ",
            b": ",
            b"{",
            b"}",
            b"[",
            b"]",
            b"\"",
            b"'",
            b"&a ",
            b"*a",
            b"!!str ",
            b"<<: ",
            b"|\n",
            b">-\n",
            b"---\n",
            b"\t",
            b"null",
            b"true",
            b"1e999",
            b"~",
            b"$ref",
            b"#/$defs/x",
            b"writeOnly: true",
            b"handler: builtin::echo",
            b"securable: Tag",
            b"operation: Delete",
            b"type: object",
            b"\xef\xbb\xbf",
        ],
    },
    Target {
        name: "jsonrpc",
        run: jsonrpc,
        dictionary: &[
            b"{",
            b"}",
            b"[",
            b"]",
            b"\"jsonrpc\":\"2.0\"",
            b"\"id\":",
            b"\"method\":",
            b"\"params\":",
            b"null",
            b"1.5",
            b"-0",
            b"1e400",
            b"\\u0000",
            b"\\ud800",
            b"\"",
            b",",
            b":",
            b"=?base64?",
            b"?=",
        ],
    },
    Target { name: "arguments", run: arguments, dictionary: &[b"\x00", b"\xff", b"\x7f"] },
    Target { name: "catalogue", run: catalogue, dictionary: &[b"\x00", b"\xff", b"\x7f"] },
    Target {
        name: "agent_frame",
        run: crate::agent::frame,
        dictionary: &[
            b"{\"type\":\"",
            b"hello",
            b"enroll",
            b"facts",
            b"inventory",
            b"result",
            b"compliance",
            b"quarantine_state",
            b"heartbeat",
            b"\"purpose\":\"report\"",
            b"\"protocol\":2",
            b"\"steps\":[",
            b"\"rows\":[{",
            b"\"table\":\"processes\"",
            b"\"execution_id\":\"exe-00c1\"",
            b"\"status\":\"succeeded\"",
            b"\"hostname\":\"",
            b"\\u0000",
            b"\\ud800",
            b"1e400",
            b"null",
        ],
    },
    Target {
        name: "scope",
        run: scope,
        dictionary: &[
            b" and ",
            b" or ",
            b"not ",
            b"(",
            b")",
            b" = ",
            b" != ",
            b" ~ ",
            b" <= ",
            b" in (",
            b" exists",
            b"tag:",
            b"group:",
            b"hostname",
            b"os.version",
            b"\"",
            b"*",
            b"?",
            b"\\",
        ],
    },
];

/// Bytes as a scope expression: parsed; an expression that parses prints as a canonical form
/// that parses to the same canonical form (what previews and audit rows show is what runs).
fn scope(bytes: &[u8]) {
    use toolgate_domain::fleet::scope;
    let text = String::from_utf8_lossy(bytes);
    if let Ok(parsed) = scope::parse(&text) {
        let canonical = parsed.canonical();
        let again =
            scope::parse(&canonical).unwrap_or_else(|e| panic!("the canonical form {canonical:?} does not parse: {e}"));
        assert_eq!(again.canonical(), canonical, "the canonical form is not stable");
        let _ = parsed.tag_keys();
    }
}

/// Generated, well-formed catalogues against the fixture policy: past the loader to every
/// rule, and through the emitters when they check clean.
fn catalogue(bytes: &[u8]) {
    const POLICY: &str = include_str!("../../codegen/tests/fixtures/policy.yaml");
    let Some(text) = crate::catalogue::generate(bytes) else { return };
    check_and_emit(SourceFile::new("tools.yaml", text), SourceFile::new("policy.yaml", POLICY));
}

/// Bytes as catalogue or policy text: the first byte picks which file is fuzzed.
fn yaml(bytes: &[u8]) {
    let Some((&which, rest)) = bytes.split_first() else { return };
    let text = String::from_utf8_lossy(rest).into_owned();
    let (tools, policy) = if which % 2 == 0 {
        (SourceFile::new("tools.yaml", text), SourceFile::new("policy.yaml", POLICY_YAML))
    } else {
        (SourceFile::new("tools.yaml", TOOLS_YAML), SourceFile::new("policy.yaml", text))
    };
    check_and_emit(tools, policy);
}

fn check_and_emit(tools: SourceFile, policy: SourceFile) {
    let inputs = Inputs { tools, policy, handlers_dir: None };
    match toolgate_codegen::check(&inputs) {
        Ok(checked) => {
            let paths = SourcePaths { tools: "t".into(), policy: "p".into(), handlers_dir: "h".into() };
            let _ = toolgate_codegen::emit::all(&checked, &paths);
        }
        Err(diagnostics) => {
            for d in diagnostics {
                let _ = d.render(Some(&inputs.tools.text));
                let _ = d.one_line();
            }
        }
    }
}

/// Bytes as a POST body, and as header values.
fn jsonrpc(bytes: &[u8]) {
    let _ = toolgate::mcp::jsonrpc::parse(bytes);
    let _ = toolgate::mcp::header_value(&String::from_utf8_lossy(bytes));
}

fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| Schemas::compile(&CATALOGUE).expect("the shipped schemas compile"))
}

/// Property names the catalogue uses, so generated arguments often hit real properties.
fn known_keys() -> &'static [String] {
    static KEYS: OnceLock<Vec<String>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys: Vec<String> = CATALOGUE
            .tools
            .iter()
            .filter_map(|t| serde_json::from_str::<Value>(t.input_schema).ok())
            .flat_map(|s| {
                s["properties"].as_object().map(|p| p.keys().cloned().collect::<Vec<_>>()).unwrap_or_default()
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    })
}

fn json(u: &mut Unstructured, depth: u32) -> arbitrary::Result<Value> {
    Ok(match u.int_in_range(0..=if depth == 0 { 5 } else { 7 })? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        4 => Value::from(u.arbitrary::<u64>()?),
        5 => Value::String(u.arbitrary()?),
        6 => Value::Array((0..u.int_in_range(0..=4)?).map(|_| json(u, depth - 1)).collect::<Result<_, _>>()?),
        _ => Value::Object(object(u, depth - 1)?),
    })
}

fn object(u: &mut Unstructured, depth: u32) -> arbitrary::Result<Map<String, Value>> {
    let mut map = Map::new();
    for _ in 0..u.int_in_range(0..=6)? {
        let key = if u.arbitrary()? { u.choose(known_keys())?.clone() } else { u.arbitrary()? };
        map.insert(key, json(u, depth)?);
    }
    Ok(map)
}

/// Arguments for a tool: the schema check, then everything built from its answer.
fn arguments(bytes: &[u8]) {
    let mut u = Unstructured::new(bytes);
    let (Ok(tool), Ok(args)) = (u.choose(CATALOGUE.tools), object(&mut u, 3)) else { return };
    let args = Value::Object(args);
    match schemas().check(tool, &args) {
        Ok(()) => {
            let _ = ArgumentBinding::of(&args, tool.sensitive_arguments);
        }
        Err(Denial::InvalidArguments(invalid)) => {
            let _ = invalid.details("req-fuzz");
            let _ = invalid.message();
        }
        Err(other) => panic!("argument validation answered {other:?}"),
    }
    let _ = canonical_arguments(&redacted(&args, tool.sensitive_arguments));
}
