//! Text from outside (an agent's hostname, a log field) made safe to show on a terminal or in
//! a line-oriented log: every control character (C0, DEL, C1) and every bidirectional control
//! becomes a visible escape, so such text cannot move the cursor, colour the screen, forge a
//! line or a table row, or reorder what is shown.

use std::borrow::Cow;

fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with its unsafe characters escaped (`\n`, `\r`, `\t`, else `\u{1b}`); borrowed when
/// there are none.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible_escapes_and_plain_text_is_untouched() {
        assert!(matches!(escape_controls("web-01.example"), Cow::Borrowed("web-01.example")));
        assert_eq!(escape_controls("évier ✓"), "évier ✓");
        assert_eq!(escape_controls("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(escape_controls("\u{1b}[2J\u{1b}[31mred"), "\\u{1b}[2J\\u{1b}[31mred");
        assert_eq!(escape_controls("x\u{7f}\u{9b}"), "x\\u{7f}\\u{9b}");
        assert_eq!(escape_controls("abc\u{202e}fed"), "abc\\u{202e}fed");
    }
}
