//! Who is calling, once authentication has run.

use toolgate_policy::TierRules;

/// A principal: the owner of tokens, holding roles from policy.yaml.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    /// Fleet-wide roles.
    pub roles: Vec<String>,
    /// Roles on management groups (policy.yaml roles, over those groups' agents only).
    pub group_roles: Vec<crate::groups::GroupRole>,
    /// A person, or automation (an engine principal: it never approves).
    pub kind: crate::engines::PrincipalKind,
}

/// An authenticated MCP caller.
#[derive(Clone, Debug)]
pub struct Caller {
    pub principal: Principal,
    /// The token the call came with (self-service token tools act on it).
    pub token_id: String,
    /// `None` when the token's tier is not one policy.yaml declares: it may then do nothing.
    pub tier: Option<&'static TierRules>,
    /// The tier the token names, declared or not (for messages).
    pub tier_name: String,
    pub credential: CredentialKind,
    /// The toolsets its credential shows when a request chooses none (tools.yaml `toolsets`;
    /// None: its tier's).
    pub toolsets: Option<crate::toolsets::Toolsets>,
}

/// How a caller proved who it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CredentialKind {
    /// A `tg_` token this server minted.
    #[default]
    Token,
    /// An access token from the organisation's identity provider (docs/sign-in.md): a tier it
    /// lacks is answered with HTTP 403 `insufficient_scope`, so the client can ask for more.
    AccessToken,
}

impl Caller {
    pub fn tier_label(&self) -> &str {
        self.tier.map_or("(none)", |t| t.name)
    }
}
