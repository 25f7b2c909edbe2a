//! One typed argument struct per tool, from its inputSchema (generated from tools.yaml; see
//! codegen/). Handlers take these; nothing here knows a handler, so the two never form a cycle.

#![allow(dead_code, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/args.rs"));
