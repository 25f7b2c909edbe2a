//! JSON-RPC error codes: the standard ones, MCP's, and toolgate's own; and which code each
//! kind of denial is answered with.

use toolgate_domain::Denial;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Handshake-era code for an unknown session (implementation-defined range).
/// The seeds' transport codes (404, 403), each with the refusal envelope.
pub const SESSION_NOT_FOUND: i64 = -32007;
pub const FORBIDDEN_ORIGIN: i64 = -32008;
pub const PERMISSION_DENIED: i64 = -32003;
pub const TIER_DENIED: i64 = -32004;
pub const DISABLED: i64 = -32005;
pub const APPROVAL_REQUIRED: i64 = -32006;
/// A session cap is full (HTTP 429).
pub const SESSION_LIMIT: i64 = -32010;
/// GET without `text/event-stream` in Accept (406).
pub const NOT_ACCEPTABLE: i64 = -32011;
/// The server is stopping: no new session (503).
pub const SHUTTING_DOWN: i64 = -32015;
/// A stream was asked for past the streams cap (429).
pub const STREAM_LIMIT: i64 = -32012;
pub const HEADER_MISMATCH: i64 = -32020;
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The code a denial is answered with.
pub fn denial_code(denial: &Denial) -> i64 {
    match denial {
        Denial::ReadOnlyMode { .. } | Denial::Tier { .. } => TIER_DENIED,
        Denial::NotGranted { .. }
        | Denial::RoleRequired { .. }
        | Denial::ApprovalCap(_)
        | Denial::NotRedeemable { .. }
        | Denial::Precondition { .. } => PERMISSION_DENIED,
        Denial::InvalidArguments(_) => INVALID_PARAMS,
        Denial::ApprovalPending { .. } => APPROVAL_REQUIRED,
        Denial::StoreFault { .. } | Denial::SchemaFault { .. } => INTERNAL_ERROR,
    }
}

/// Every code a denial is answered with ([`denial_code`]'s), with its metrics label: the code
/// itself. One list: the counter's slot is the position here.
pub const DENIAL_LABELS: [(i64, &str); 5] = [
    (PERMISSION_DENIED, "-32003"),
    (TIER_DENIED, "-32004"),
    (APPROVAL_REQUIRED, "-32006"),
    (INVALID_PARAMS, "-32602"),
    (INTERNAL_ERROR, "-32603"),
];
const _: () = assert!(DENIAL_LABELS.len() <= crate::metrics::MAX_DENIAL_LABELS, "a counter slot per label");

/// The metrics slot and label of a code [`denial_code`] answered with.
pub fn denial_label(code: i64) -> (usize, &'static str) {
    let slot = DENIAL_LABELS.iter().position(|(c, _)| *c == code).unwrap_or(DENIAL_LABELS.len() - 1);
    (slot, DENIAL_LABELS[slot].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_labels_are_the_codes() {
        for code in [PERMISSION_DENIED, TIER_DENIED, APPROVAL_REQUIRED, INVALID_PARAMS, INTERNAL_ERROR] {
            assert_eq!(denial_label(code).1, code.to_string());
        }
    }
}
