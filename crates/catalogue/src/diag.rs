//! Diagnostics: what is wrong, where, and what to do about it.

use std::fmt::Write as _;

use crate::source::Pos;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: String,
    pub pos: Pos,
    /// The tool the problem belongs to, when there is one.
    pub tool: Option<String>,
    pub message: String,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(file: &str, pos: Pos, message: impl Into<String>) -> Self {
        Self { severity: Severity::Error, file: file.to_string(), pos, tool: None, message: message.into(), help: None }
    }

    pub fn warning(file: &str, pos: Pos, message: impl Into<String>) -> Self {
        Self { severity: Severity::Warning, ..Self::error(file, pos, message) }
    }

    pub fn tool(mut self, name: &str) -> Self {
        self.tool = Some(name.to_string());
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    fn headline(&self) -> String {
        match &self.tool {
            Some(tool) => format!("tool `{tool}`: {}", self.message),
            None => self.message.clone(),
        }
    }

    /// One line: `tools.yaml:12:7: error: tool `x`: message (help: ...)`. Used by the build
    /// script (`cargo::error=` takes one line) and pinned by the fixture tests.
    pub fn one_line(&self) -> String {
        let mut out =
            format!("{}:{}:{}: {}: {}", self.file, self.pos.line, self.pos.col, self.severity.label(), self.headline());
        if let Some(help) = &self.help {
            let help: Vec<&str> = help.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            let _ = write!(out, " (help: {})", help.join(" "));
        }
        out
    }

    /// The rustc-like form for people at a terminal: the source line and a caret under the spot.
    pub fn render(&self, source_text: Option<&str>) -> String {
        let mut out = format!("{}: {}\n", self.severity.label(), self.headline());
        let _ = writeln!(out, "  --> {}:{}:{}", self.file, self.pos.line, self.pos.col);
        if let Some(line) = source_text.and_then(|text| text.lines().nth(self.pos.line.saturating_sub(1) as usize)) {
            let number = self.pos.line.to_string();
            let pad = " ".repeat(number.len());
            let caret_at: usize =
                line.chars().take(self.pos.col.saturating_sub(1) as usize).map(|c| if c == '\t' { 4 } else { 1 }).sum();
            let _ = writeln!(out, "{pad} |");
            let _ = writeln!(out, "{number} | {}", line.replace('\t', "    "));
            let _ = writeln!(out, "{pad} | {}^", " ".repeat(caret_at));
        }
        if let Some(help) = &self.help {
            for (i, help_line) in help.lines().enumerate() {
                if i == 0 {
                    let _ = writeln!(out, "  = help: {help_line}");
                } else {
                    let _ = writeln!(out, "          {help_line}");
                }
            }
        }
        out
    }
}

/// Orders diagnostics the way a reader wants them: by file, then position, errors first.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| (&a.file, a.pos, a.severity, &a.message).cmp(&(&b.file, b.pos, b.severity, &b.message)));
}

pub use toolgate_policy::{closest, did_you_mean};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_points_at_column() {
        let d = Diagnostic::error("tools.yaml", Pos { line: 2, col: 5 }, "bad").tool("x").help("fix it");
        let text = "tools:\n  - nmae: x\n";
        assert_eq!(
            d.render(Some(text)),
            "error: tool `x`: bad\n  --> tools.yaml:2:5\n  |\n2 |   - nmae: x\n  |     ^\n  = help: fix it\n"
        );
        assert_eq!(d.one_line(), "tools.yaml:2:5: error: tool `x`: bad (help: fix it)");
    }
}
