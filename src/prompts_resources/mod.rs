//! Prompts and resources, read back from the generated catalogue once at start: the specs,
//! what each tier is shown, and which entry a URI names. No protocol here (see `mcp`).

pub mod builtin;
pub mod render;
pub mod uri;
pub mod values;

use serde_json::{Value, json};
use toolgate_domain::catalogue::{Catalogue, PromptResourceMeta};
use toolgate_domain::prompts_resources::{PromptSpec, ResourceSpec, TemplateSpec};
use toolgate_policy::{Decision, TierRules};

/// A catalogue entry with its parsed spec.
pub struct Item<S> {
    pub meta: &'static PromptResourceMeta,
    pub spec: S,
}

impl<S> Item<S> {
    /// Whether a caller of `tier` is shown (and may use) it, RBAC aside.
    pub fn visible_to(&self, tier: Option<&TierRules>) -> bool {
        tier.is_some_and(|t| self.meta.decisions[t.index] != Decision::Deny)
    }
}

/// What a URI names.
pub enum Located<'a> {
    Fixed(&'a Item<ResourceSpec>),
    /// A template's instance, with the values of its variables.
    Instance(&'a Item<TemplateSpec>, Vec<(String, String)>),
}

pub struct PromptsResources {
    pub prompts: Vec<Item<PromptSpec>>,
    pub resources: Vec<Item<ResourceSpec>>,
    pub templates: Vec<Item<TemplateSpec>>,
}

fn parse<S: serde::de::DeserializeOwned>(items: &'static [PromptResourceMeta]) -> Vec<Item<S>> {
    items
        .iter()
        .map(|meta| Item { meta, spec: serde_json::from_str(meta.spec).expect("the build wrote the entry it checked") })
        .collect()
}

impl PromptsResources {
    pub fn load(catalogue: &'static Catalogue) -> Self {
        Self {
            prompts: parse(catalogue.prompts),
            resources: parse(catalogue.resources),
            templates: parse(catalogue.templates),
        }
    }

    pub fn prompt(&self, name: &str) -> Option<&Item<PromptSpec>> {
        self.prompts.iter().find(|p| p.spec.name == name)
    }

    pub fn template(&self, name: &str) -> Option<&Item<TemplateSpec>> {
        self.templates.iter().find(|t| t.spec.name == name)
    }

    /// The fixed resource with this URI, else the first template it is an instance of.
    pub fn locate(&self, target: &str) -> Option<Located<'_>> {
        if let Some(fixed) = self.resources.iter().find(|r| r.spec.uri == target) {
            return Some(Located::Fixed(fixed));
        }
        self.templates
            .iter()
            .find_map(|t| uri::matches(&t.spec.uri_template, target).map(|values| Located::Instance(t, values)))
    }

    /// `prompts/list`'s array for a tier.
    pub fn prompts_json(&self, tier: Option<&TierRules>) -> Vec<Value> {
        self.prompts
            .iter()
            .filter(|p| p.visible_to(tier))
            .map(|p| {
                let arguments: Vec<Value> = p
                    .spec
                    .arguments
                    .iter()
                    .map(|a| json!({"name": a.name, "description": a.description, "required": a.required}))
                    .collect();
                json!({"name": p.spec.name, "title": p.spec.title, "description": p.spec.description, "arguments": arguments})
            })
            .collect()
    }

    /// The fixed resources of `resources/list` for a tier (instances are added per caller).
    pub fn resources_json(&self, tier: Option<&TierRules>) -> Vec<Value> {
        self.resources
            .iter()
            .filter(|r| r.visible_to(tier))
            .map(|r| {
                let s = &r.spec;
                json!({"uri": s.uri, "name": s.name, "title": s.title, "description": s.description, "mimeType": s.mime_type})
            })
            .collect()
    }

    /// `resources/templates/list`'s array for a tier.
    pub fn templates_json(&self, tier: Option<&TierRules>) -> Vec<Value> {
        self.templates
            .iter()
            .filter(|t| t.visible_to(tier))
            .map(|t| {
                let s = &t.spec;
                json!({"uriTemplate": s.uri_template, "name": s.name, "title": s.title,
                       "description": s.description, "mimeType": s.mime_type})
            })
            .collect()
    }
}
