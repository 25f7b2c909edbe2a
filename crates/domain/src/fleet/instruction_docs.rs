//! docs/instructions.md's reference tables, generated from the checked [`InstructionSet`]
//! (a test fails when the committed file drifts): every definition, what each change touches
//! and how it is undone, then every plugin's actions with their columns and plans.

use serde_json::Value;

use super::instruction::{ActionClass, InstructionSet, ResultColumn};

impl InstructionSet {
    /// The reference tables of docs/instructions.md: every definition, then every plugin's actions.
    pub fn markdown(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::from(
            "| definition | runs | class | diagnostic | timeout | parameters |\n|---|---|---|---|---|---|\n",
        );
        for d in &self.definitions {
            let params = d.parameters.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = d
                .parameters
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let params: Vec<String> = params
                .into_iter()
                .flatten()
                .map(
                    |(name, _)| {
                        if required.contains(&name.as_str()) { format!("`{name}`*") } else { format!("`{name}`") }
                    },
                )
                .collect();
            let _ = writeln!(
                out,
                "| `{}` | `{}.{}` | {} | {} | {} s | {} |",
                d.name,
                d.plugin,
                d.action,
                d.class.as_str(),
                if d.diagnostic { "yes" } else { "no" },
                d.timeout_ms as f64 / 1000.0,
                if params.is_empty() { "none".to_string() } else { params.join(", ") },
            );
        }
        out.push_str("\n\\* required.\n\nWhat each change touches and how it is undone, as the approvals page shows it:\n\n| change | touches | undo |\n|---|---|---|\n");
        for d in self.definitions.iter().filter(|d| d.class == ActionClass::Change) {
            let said = |text: &Option<String>| text.as_deref().unwrap_or("").replace('|', "\\|");
            let _ = writeln!(out, "| `{}` | {} | {} |", d.name, said(&d.touches), said(&d.undo));
        }
        for p in &self.plugins {
            let _ = write!(
                out,
                "\n### Plugin `{}`\n\n{}\n\n| action | class | parameters | columns | plan |\n|---|---|---|---|---|\n",
                p.plugin, p.description
            );
            for a in &p.actions {
                let mut params: Vec<String> = a
                    .params
                    .iter()
                    .map(|x| {
                        format!("`{}` ({}{})", x.name, x.kind.json_type(), if x.required { ", required" } else { "" })
                    })
                    .collect();
                params.extend(a.config.iter().map(|c| format!("configuration `{}`", c.name)));
                let listed = |columns: &[ResultColumn]| -> String {
                    columns.iter().map(|c| format!("`{}` ({})", c.name, c.kind.as_str())).collect::<Vec<_>>().join(", ")
                };
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} | {} |",
                    a.name,
                    a.class.as_str(),
                    if params.is_empty() { "none".into() } else { params.join(", ") },
                    listed(&a.columns),
                    a.plan.as_deref().map_or_else(|| "-".to_string(), listed),
                );
            }
        }
        out
    }
}
