//! Which tools a request is shown (docs/toolsets.md), and the tools/list bytes of each choice.
//!
//! A request's choice: its own (`X-MCP-Toolsets`, or the path `/mcp/x/{toolsets}`, which the
//! HTTP layer turns into that header), else its session's (made at `initialize`), else its
//! credential's default, else its tier's (policy.yaml); and, in a session, the toolsets
//! `enable_toolset` added. The gate alone decides calls: a tool outside the list answers like
//! any other when called by name.
//!
//! Lists are bytes put together once per (tier, choice) from each tool's entry and kept, up to
//! [`MAX_CACHED`] choices; past that a choice's list is put together for each request.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::{HeaderMap, HeaderName};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::value::RawValue;
use toolgate_domain::Caller;
use toolgate_domain::catalogue::Catalogue;
use toolgate_domain::toolsets::{ChoiceError, Toolsets, parse_choice};
use toolgate_policy::Decision;

use super::era::Era;

/// The header a client chooses its toolsets with (github-mcp-server's convention).
pub const TOOLSETS_HEADER: &str = "x-mcp-toolsets";
/// The same, parsed once: every request looks it up.
const TOOLSETS_HEADER_NAME: HeaderName = HeaderName::from_static(TOOLSETS_HEADER);
/// How many (tier, choice) lists are kept.
pub const MAX_CACHED: usize = 256;

/// The request's own choice, if it makes one.
pub fn requested(catalogue: &Catalogue, caller: &Caller, headers: &HeaderMap) -> Result<Option<Toolsets>, ChoiceError> {
    let Some(value) = headers.get(TOOLSETS_HEADER_NAME) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("\u{fffd}");
    parse_choice(text, catalogue.toolsets, tier_default(catalogue, caller)).map(Some)
}

/// The tier's default toolsets (none for a tier policy.yaml does not declare).
pub fn tier_default(catalogue: &Catalogue, caller: &Caller) -> Toolsets {
    caller.tier.and_then(|t| catalogue.tier_toolsets.get(t.index).copied()).unwrap_or(Toolsets::NONE)
}

/// Without a choice of the request's or its session's: the credential's, else the tier's.
pub fn standing(catalogue: &Catalogue, caller: &Caller) -> Toolsets {
    caller.toolsets.unwrap_or_else(|| tier_default(catalogue, caller)).union(Toolsets::core(catalogue.toolsets))
}

/// What a request is shown, its own choice already read.
pub fn shown(catalogue: &Catalogue, caller: &Caller, own: Option<Toolsets>, era: &Era) -> Toolsets {
    let session = era.session();
    let chosen = own.or(session.and_then(|s| s.toolsets)).unwrap_or_else(|| standing(catalogue, caller));
    chosen.union(session.map_or(Toolsets::NONE, |s| s.enabled))
}

/// Each tool's entry of the catalogue's `tools` array, and the lists made from them.
pub struct ChosenLists {
    entries: Vec<Bytes>,
    cache: Mutex<HashMap<(usize, Toolsets), Bytes>>,
    declared: Toolsets,
}

impl ChosenLists {
    /// From the generated array (in catalogue order) with read-only mode's refusals already out.
    pub fn new(catalogue: &Catalogue, all_tools: &str) -> Self {
        let raw: Vec<&RawValue> = serde_json::from_str(all_tools).expect("the generated tools/list is JSON");
        // By name, once: a catalogue of thousands of tools starts without a search per entry.
        let index: HashMap<&str, usize> = catalogue.tools.iter().map(|t| (t.name, t.index)).collect();
        let mut entries = vec![Bytes::new(); catalogue.tools.len()];
        for entry in raw {
            #[derive(serde::Deserialize)]
            struct Named<'a> {
                #[serde(borrow)]
                name: &'a str,
            }
            let named: Named = serde_json::from_str(entry.get()).expect("every entry has a name");
            if let Some(&i) = index.get(named.name) {
                entries[i] = Bytes::copy_from_slice(entry.get().as_bytes());
            }
        }
        let count = catalogue.toolsets.len();
        let declared = if count >= 64 { Toolsets::ALL } else { Toolsets((1u64 << count) - 1) };
        ChosenLists { entries, cache: Mutex::default(), declared }
    }

    /// Whether two choices show the same declared toolsets.
    pub fn same(&self, a: Toolsets, b: Toolsets) -> bool {
        a.0 & self.declared.0 == b.0 & self.declared.0
    }

    /// Whether `chosen` holds every declared toolset (the tier's whole list then serves).
    pub fn is_everything(&self, chosen: Toolsets) -> bool {
        self.declared.0 & chosen.0 == self.declared.0
    }

    /// The `tools` array of `chosen` at tier `tier` (None: an undeclared tier, nothing).
    pub fn array(&self, catalogue: &Catalogue, tier: Option<usize>, chosen: Toolsets) -> Bytes {
        let Some(tier) = tier else { return Bytes::from_static(b"[]") };
        let key = (tier, Toolsets(chosen.0 & self.declared.0));
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bytes) = cache.get(&key) {
            return bytes.clone();
        }
        let mut out = BytesMut::with_capacity(16 * 1024);
        out.put_u8(b'[');
        let shown = catalogue.tools.iter().filter(|t| {
            t.decisions[tier] != Decision::Deny && key.1.shows(t.toolset) && !self.entries[t.index].is_empty()
        });
        for (k, tool) in shown.enumerate() {
            if k > 0 {
                out.put_u8(b',');
            }
            out.put_slice(&self.entries[tool.index]);
        }
        out.put_u8(b']');
        let bytes = out.freeze();
        if cache.len() < MAX_CACHED {
            cache.insert(key, bytes.clone());
        }
        bytes
    }
}
