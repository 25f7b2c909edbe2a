//! Prompts and resources as tools.yaml declares them (`prompts`, `resources`,
//! `resourceTemplates`). The generator checks them and embeds each entry as JSON; the server
//! reads the same types back, so the format has one definition.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A prompt: a conversation opener that leads the model through some tools in order.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PromptSpec {
    /// 1-128 characters of `[A-Za-z0-9_.-]`, unique among prompts.
    pub name: String,
    pub title: String,
    /// What the prompt is for, as `prompts/list` shows it.
    pub description: String,
    /// The pair a tier and a role must allow to see and get it: usually the read pair of the
    /// tools it leads to. Its operation must be read-class.
    pub securable: String,
    pub operation: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgument>,
    /// The messages, in order. Text may hold `{{argument}}` (the caller's value: a string
    /// wrapped as untrusted data, an enum normalised, an integer as digits) and `{{tool:name}}`
    /// (a tool's name, checked at build time).
    pub messages: Vec<PromptMessage>,
    /// A question the client's user answers before the prompt renders (elicitation; 2026-07-28
    /// `input_required`). Its answer's fields are `{{answer:field}}`, wrapped as untrusted data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<PromptQuestion>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PromptArgument {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub required: bool,
    /// `type: string` (with `maxLength`, `pattern`, or a closed `enum` and its safe `default`)
    /// or `type: integer` (with `minimum` / `maximum` / `default`).
    pub schema: Map<String, Value>,
    /// Where `completion/complete` finds values for it (an enum completes from itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete: Option<CompletionSource>,
}

/// Values `completion/complete` offers, each filtered by what the caller may see.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CompletionSource {
    AgentIds,
    DefinitionNames,
    TagKeys,
    TagValues,
    PolicyIds,
    ToolNames,
    ExecutionIds,
    ApprovalIds,
}

impl CompletionSource {
    /// The tool whose pair the caller must hold to see these values (the tool that lists them).
    pub fn listing_tool(self) -> &'static str {
        match self {
            CompletionSource::AgentIds => "list_agents",
            CompletionSource::DefinitionNames => "list_definitions",
            CompletionSource::TagKeys | CompletionSource::TagValues => "get_tags",
            CompletionSource::PolicyIds => "list_policies",
            CompletionSource::ToolNames => "discover_permissions",
            CompletionSource::ExecutionIds => "list_executions",
            CompletionSource::ApprovalIds => "list_pending_approvals",
        }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PromptMessage {
    pub role: Role,
    pub content: PromptContent,
}

/// One message's content, written as MCP writes it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum PromptContent {
    Text {
        text: String,
    },
    Image {
        /// base64
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A resource read at `prompts/get` time, through the same gate as `resources/read`.
    /// `{{argument}}` in the URI is the caller's value, percent-encoded.
    Resource {
        uri: String,
    },
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PromptQuestion {
    /// The key the answer comes back under.
    pub key: String,
    pub message: String,
    /// The form: an object of string, number, integer, boolean or enum fields.
    pub requested_schema: Map<String, Value>,
}

/// A resource with a fixed URI, listed by `resources/list`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceSpec {
    pub uri: String,
    pub name: String,
    pub title: String,
    pub description: String,
    pub mime_type: String,
    pub securable: String,
    pub operation: String,
    /// Exactly one of `text`, `blob` (base64) and `builtin` says what a read returns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<BuiltinResource>,
}

/// Resources the server computes.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BuiltinResource {
    /// The server's health: store reachable, agents enrolled and connected, approvals waiting.
    ServerHealth,
    /// The tool × tier decision matrix the build derived from the two YAML files (markdown).
    PolicyMatrix,
    /// One tool's documentation, by the template variable `tool` (markdown).
    ToolDocumentation,
}

/// A URI pattern (RFC 6570 level 1: `{name}` stands for one path segment).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TemplateSpec {
    pub uri_template: String,
    pub name: String,
    pub title: String,
    pub description: String,
    pub mime_type: String,
    /// Read through this tool: its variables are the tool's arguments, its structured result
    /// is the content, and the tool's pair and gate apply (so no pair is written here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The pair, for a template not read through a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub securable: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Fixed text with `{variable}` replaced by the value (JSON-escaped for JSON types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin: Option<BuiltinResource>,
    /// `resources/list` also lists every instance the caller may read, from this source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<CompletionSource>,
    /// Where `completion/complete` finds each variable's values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub complete: BTreeMap<String, CompletionSource>,
}

impl TemplateSpec {
    /// The `{variable}` names of the template, in order.
    pub fn variables(&self) -> Vec<&str> {
        template_variables(&self.uri_template)
    }
}

/// The `{name}` parts of a URI template, in order.
pub fn template_variables(template: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        out.push(&rest[open + 1..open + close]);
        rest = &rest[open + close + 1..];
    }
    out
}

/// `{{...}}` placeholders of a prompt text, in order, as written between the braces.
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open + 2..].find("}}") else { break };
        out.push(rest[open + 2..open + 2 + close].trim());
        rest = &rest[open + 2 + close + 2..];
    }
    out
}

/// What a placeholder names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placeholder<'a> {
    Argument(&'a str),
    Tool(&'a str),
    Answer(&'a str),
}

impl<'a> Placeholder<'a> {
    pub fn parse(inner: &'a str) -> Self {
        match inner.split_once(':') {
            Some(("tool", name)) => Placeholder::Tool(name.trim()),
            Some(("answer", field)) => Placeholder::Answer(field.trim()),
            _ => Placeholder::Argument(inner),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_and_variables_are_found_in_order() {
        assert_eq!(
            placeholders("a {{x}} b {{ tool:get_tags }} {{answer:why}}"),
            vec!["x", "tool:get_tags", "answer:why"]
        );
        assert_eq!(Placeholder::parse("tool:get_tags"), Placeholder::Tool("get_tags"));
        assert_eq!(Placeholder::parse("agent_id"), Placeholder::Argument("agent_id"));
        assert_eq!(template_variables("test://template/{id}/data/{part}"), vec!["id", "part"]);
        assert!(placeholders("no {{ end").is_empty());
    }
}
