//! policy.yaml tier `scope`s (docs/sign-in.md): the OAuth scope that gives an access token its
//! tier. Each is a valid scope token (RFC 6749 §3.3), names one tier only, and is none of the
//! OpenID Connect scopes, which say who a person is rather than what a token may do.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use super::Inputs;
use crate::diag::Diagnostic;

/// Scopes OpenID Connect defines; none may select a tier.
const OIDC_SCOPES: [&str; 6] = ["openid", "profile", "email", "address", "phone", "offline_access"];

/// RFC 6749 §3.3: `scope-token = 1*( %x21 / %x23-5B / %x5D-7E )`.
fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty() && scope.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

pub fn check(inputs: &Inputs) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut first_with: BTreeMap<&str, &str> = BTreeMap::new();
    for (i, tier) in inputs.policy.model.tiers.iter().enumerate() {
        let Some(scope) = tier.scope.as_deref() else { continue };
        let pointer = format!("/tiers/{i}/scope");
        if !is_scope_token(scope) {
            out.push(
                inputs
                    .policy_error(&pointer, format!("tier `{}` scope `{scope}` is not an OAuth scope token", tier.name))
                    .help("a scope is printable ASCII without spaces, `\"` or `\\`, e.g. `toolgate:readonly`"),
            );
        } else if OIDC_SCOPES.contains(&scope) {
            out.push(
                inputs
                    .policy_error(&pointer, format!("tier `{}` scope `{scope}` is an OpenID Connect scope", tier.name))
                    .help(format!(
                        "every client asks for `{scope}` to sign a person in; name the tier's own, e.g. `toolgate:{}`",
                        tier.name
                    )),
            );
        }
        match first_with.entry(scope) {
            Entry::Vacant(first) => {
                first.insert(&tier.name);
            }
            Entry::Occupied(other) => out.push(
                inputs
                    .policy_error(
                        &pointer,
                        format!("tiers `{}` and `{}` both have the scope `{scope}`", other.get(), tier.name),
                    )
                    .help("a scope selects one tier: give each its own"),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::is_scope_token;

    #[test]
    fn scope_tokens_follow_rfc_6749() {
        assert!(is_scope_token("toolgate:readonly"));
        assert!(is_scope_token("https://api.example.com/fleet.read"));
        for bad in ["", "two words", "quo\"te", "back\\slash", "tab\there", "ünïcode"] {
            assert!(!is_scope_token(bad), "{bad:?}");
        }
    }
}
