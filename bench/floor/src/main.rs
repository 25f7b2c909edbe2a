//! `toolgate-floor TOOLS POLICY TIER ADDR`: what serving a catalogue costs with nothing but
//! axum, the precomputed `tools/list` bytes of TIER and compiled input validators. No
//! authentication, no gate, no audit, no store: scripts/bench.sh divides toolgate's figures by
//! these. Prints `listening on ADDR` when ready.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use toolgate_codegen::{Inputs, SourceFile};

struct Floor {
    list: String,
    validators: HashMap<String, jsonschema::Validator>,
}

fn load(tools: &str, policy: &str, tier: &str) -> Floor {
    let read = |p: &str| SourceFile::read(std::path::Path::new(p), p.to_string()).expect("the file reads");
    let inputs = Inputs { tools: read(tools), policy: read(policy), handlers_dir: None };
    let checked = toolgate_codegen::check(&inputs).unwrap_or_else(|d| panic!("the catalogue checks: {d:?}"));
    let (_, tools_json) = toolgate_codegen::emit::tools_list::per_tier(&checked)
        .into_iter()
        .find(|(t, _)| t == tier)
        .expect("the tier exists");
    let validators = checked
        .tools
        .model
        .tools
        .iter()
        .zip(&checked.plans)
        .map(|(tool, plan)| {
            let schema = Value::Object(plan.published_input_schema.clone());
            (tool.name.clone(), jsonschema::validator_for(&schema).expect("the schema compiles"))
        })
        .collect();
    Floor { list: format!(r#"{{"tools":{tools_json}}}"#), validators }
}

async fn mcp(State(floor): State<Arc<Floor>>, body: Bytes) -> impl IntoResponse {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let reply = match request["method"].as_str() {
        Some("tools/list") => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#, floor.list),
        Some("tools/call") => {
            let name = request["params"]["name"].as_str().unwrap_or_default();
            let arguments = request["params"]["arguments"].clone();
            let result = match floor.validators.get(name) {
                None => json!({"content": [{"type": "text", "text": "unknown tool"}], "isError": true}),
                Some(v) => {
                    let errors: Vec<String> = v.iter_errors(&arguments).map(|e| e.to_string()).collect();
                    if errors.is_empty() {
                        let text = arguments.to_string();
                        json!({"content": [{"type": "text", "text": text}], "structuredContent": arguments, "isError": false})
                    } else {
                        json!({"content": [{"type": "text", "text": errors.join("; ")}], "isError": true})
                    }
                }
            };
            json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
        }
        _ => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}).to_string(),
    };
    ([(header::CONTENT_TYPE, "application/json")], reply)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, tools, policy, tier, addr] = args.as_slice() else {
        eprintln!("usage: toolgate-floor TOOLS POLICY TIER ADDR");
        std::process::exit(2);
    };
    let floor = Arc::new(load(tools, policy, tier));
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr.as_str()).await.expect("the address binds");
        println!("listening on {}", listener.local_addr().expect("bound"));
        let app = Router::new().route("/mcp", post(mcp)).with_state(floor);
        axum::serve(listener, app).await.expect("serves");
    });
}
