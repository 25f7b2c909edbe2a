//! The generated dispatch: a tool's id to its handler (codegen/'s dispatch.rs). It sits
//! above the handlers and the catalogue, which never look back at it.

// A catalogue of builtins only (the benchmarks') names no argument struct.
#[allow(unused_imports)]
use crate::args;
use crate::registry::ToolId;

include!(concat!(env!("OUT_DIR"), "/dispatch.rs"));
