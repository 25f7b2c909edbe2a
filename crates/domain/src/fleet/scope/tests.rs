use std::collections::HashMap;

use super::*;

struct Host {
    attributes: HashMap<&'static str, Vec<String>>,
    tags: HashMap<&'static str, &'static str>,
}

fn host(name: &str, os: &str, version: &str, kernel: &str, cpus: u32, tags: &[(&'static str, &'static str)]) -> Host {
    let mut attributes = HashMap::new();
    attributes.insert("hostname", vec![name.to_string()]);
    attributes.insert("os.name", vec![os.to_string()]);
    attributes.insert("os.version", vec![version.to_string()]);
    attributes.insert("kernel", vec![kernel.to_string()]);
    attributes.insert("cpu.count", vec![cpus.to_string()]);
    attributes.insert("status", vec!["online".to_string()]);
    attributes.insert("ip", vec!["10.0.0.1".to_string(), format!("192.168.1.{cpus}")]);
    Host { attributes, tags: tags.iter().copied().collect() }
}

impl Subject for Host {
    fn attribute(&self, name: &str) -> Vec<String> {
        self.attributes.get(name).cloned().unwrap_or_default()
    }
    fn tag(&self, key: &str) -> Option<&str> {
        self.tags.get(key).copied()
    }
}

fn fleet() -> Vec<Host> {
    vec![
        host("web-1", "Debian GNU/Linux", "12", "6.1.0-18-amd64", 4, &[("env", "prod"), ("role", "web")]),
        host("web-2", "Debian GNU/Linux", "11", "5.10.0-28-amd64", 2, &[("env", "staging"), ("role", "web")]),
        host("db-1", "Ubuntu", "22.04", "5.15.0-91-generic", 16, &[("env", "prod")]),
        host("laptop", "Fedora Linux", "39", "6.6.9-200.fc39.x86_64", 8, &[]),
    ]
}

fn targets(expression: &str) -> Vec<String> {
    let scope = parse(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
    fleet().iter().filter(|h| scope.matches(*h)).map(|h| h.attribute("hostname").remove(0)).collect()
}

#[test]
fn expressions_choose_the_expected_agents() {
    let cases: &[(&str, &[&str])] = &[
        (r#"os.name = "Debian GNU/Linux""#, &["web-1", "web-2"]),
        (r#"os.name = "Debian GNU/Linux" and tag:env in ("prod", "staging")"#, &["web-1", "web-2"]),
        (r#"tag:env = prod"#, &["web-1", "db-1"]),
        (r#"tag:env = prod or hostname ~ "lap*""#, &["web-1", "db-1", "laptop"]),
        (r#"not tag:env exists"#, &["laptop"]),
        (r#"tag:role exists and not (tag:env = "staging")"#, &["web-1"]),
        (r#"cpu.count >= 8"#, &["db-1", "laptop"]),
        (r#"cpu.count < 4"#, &["web-2"]),
        (r#"kernel < "6.0""#, &["web-2", "db-1"]),
        (r#"os.version >= 12 and os.name ~ "Debian*""#, &["web-1"]),
        (r#"ip = "192.168.1.16""#, &["db-1"]),
        (r#"hostname ~ "web-?""#, &["web-1", "web-2"]),
        (r#"HOSTNAME = "db-1" OR Hostname = laptop"#, &["db-1", "laptop"]),
        (r#"hostname != "web-1" and tag:env != "prod""#, &["web-2"]),
        (r#"status = online and ((tag:role = web))"#, &["web-1", "web-2"]),
        (r#"tag:env = 'prod' and hostname = 'db-1'"#, &["db-1"]),
    ];
    for (expression, expected) in cases {
        assert_eq!(targets(expression), *expected, "{expression}");
    }
}

#[test]
fn mistakes_point_at_their_column() {
    let cases: &[(&str, usize, &str)] = &[
        ("os.nmae = \"Debian\"", 1, "unknown attribute `os.nmae`: did you mean one of `os.name`"),
        ("hostname = \"a\" and hostnam = b", 20, "did you mean one of `hostname`"),
        ("hostname", 9, "`hostname` needs a comparison"),
        ("hostname = ", 12, "ends where a value was expected"),
        ("hostname = \"a", 12, "no closing \""),
        ("(hostname = a", 14, "expected `)` to close the `(` at column 1"),
        ("hostname = a)", 13, "closes nothing"),
        ("hostname < a", 10, "`hostname` is text and cannot be ordered"),
        ("cpu.count > many", 13, "`cpu.count` is a number; `many` is not"),
        ("tag:env in prod", 12, "expected `(` after `in`"),
        ("tag:env in (a b)", 15, "expected `,` or `)`"),
        ("hostname = a b", 14, "expected `and`, `or` or the end"),
        ("", 1, "the expression is empty"),
        ("hostname = a & b", 14, "unexpected `&`"),
        ("tag: = a", 1, "`tag:` needs a key"),
        ("hostname = and", 12, "expected a value here"),
    ];
    for (expression, column, message) in cases {
        let e = parse(expression).expect_err(expression);
        assert_eq!(e.column, *column, "{expression}: {e}");
        assert!(e.message.contains(message), "{expression}: {e}");
    }
}

#[test]
fn nesting_and_length_are_bounded_not_a_stack_overflow() {
    let deep = format!("{}hostname = a{}", "(".repeat(10_000), ")".repeat(10_000));
    let e = parse(&deep).unwrap_err();
    assert!(e.message.contains("nested deeper") || e.message.contains("at most"), "{e}");
    let nots = format!("{}hostname = a", "not ".repeat(40));
    assert!(parse(&nots).unwrap_err().message.contains("nested deeper"));
}

#[test]
fn unknown_tag_keys_name_the_closest_key_in_use() {
    let scope = parse("hostname = a and tag:enviroment = prod").unwrap();
    let e = scope.check_tag_keys(["env", "role"]).unwrap_err();
    assert_eq!(e.column, 18);
    assert!(e.message.contains("no agent has a tag `enviroment`"), "{e}");
    assert!(parse("tag:env = prod").unwrap().check_tag_keys(["env"]).is_ok());
}

#[test]
fn the_canonical_form_reads_back_the_same() {
    let scope = parse(r#"NOT os.name = Debian AND tag:env IN (prod, 'stag"ing') or cpu.count>2"#).unwrap();
    let canonical = scope.canonical();
    assert_eq!(canonical, r#"((not os.name = "Debian" and tag:env in ("prod", "stag\"ing")) or cpu.count > "2")"#);
    assert_eq!(parse(&canonical).unwrap().canonical(), canonical);
}

#[test]
fn globs() {
    assert!(glob_matches(b"*", b""));
    assert!(glob_matches(b"a*c", b"abbbc"));
    assert!(!glob_matches(b"a*c", b"abbb"));
    assert!(glob_matches(b"*.example.*", b"www.example.com"));
    assert!(glob_matches(&[b'*'; 64], b"x"), "any run of stars matches anything");
    assert!(glob_matches(b"a?c", b"abc") && !glob_matches(b"a?c", b"ac"));
}

/// Issue 27, MEDIUM 7: a glob's work is bounded by its length and its stars, checked where a
/// scope is parsed (and where an inventory filter is: crates/fleet/src/query.rs).
#[test]
fn globs_are_bounded_in_length_and_stars() {
    use crate::fleet::compare::{MAX_GLOB_BYTES, MAX_GLOB_STARS, check_glob};
    assert!(check_glob(&"*a".repeat(MAX_GLOB_STARS)).is_ok());
    let stars = check_glob(&"*a".repeat(MAX_GLOB_STARS + 1)).unwrap_err();
    assert!(stars.contains("at most 8 `*`"), "{stars}");
    assert!(check_glob(&"a".repeat(MAX_GLOB_BYTES + 1)).unwrap_err().contains("at most 256 bytes"));
    let e = parse(&format!("hostname ~ \"{}\"", "*x".repeat(20))).unwrap_err();
    assert!(e.to_string().contains("at most 8 `*`"), "{e}");
    assert!(parse("hostname ~ \"web-*\"").is_ok());
}

/// Found by the scope fuzz target: a value holding a control character printed as a JSON
/// escape (`\u001a`), which the parser reads back as a backslash and letters, so the
/// canonical form shown in previews and audit rows did not parse to itself.
#[test]
fn canonical_forms_of_any_value_parse_to_themselves() {
    for value in ["web-\r01", "a\u{1a}b", "tab\there", "back\\slash", "q\"uote", "new\nline", "é✓"] {
        let scope = Scope::Compare { field: Field::Attribute("hostname"), op: Op::Eq, value: value.into(), column: 1 };
        let canonical = scope.canonical();
        let again = parse(&canonical).unwrap_or_else(|e| panic!("{canonical:?}: {e}"));
        assert_eq!(again.canonical(), canonical, "{value:?}");
    }
}
