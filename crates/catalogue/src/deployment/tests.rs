use super::*;

fn policy() -> PolicyNames<'static> {
    PolicyNames {
        tiers: vec![("readonly", Some("toolgate:readonly")), ("operator", Some("toolgate:operator")), ("local", None)],
        roles: vec!["Administrator", "Operator"],
        retention_classes: vec!["standard", "extended", "transient"],
        toolsets: vec!["discovery", "fleet", "executions"],
    }
}

fn problems(text: &str) -> Vec<String> {
    match check(&SourceFile::new("toolgate.yaml", text), &policy()) {
        Ok(_) => Vec::new(),
        Err(all) => all.iter().map(Diagnostic::one_line).collect(),
    }
}

#[test]
fn a_good_file_is_read_with_its_defaults() {
    let text = "public_url: https://toolgate.example.com\noauth:\n  issuers:\n    - issuer: https://idp.example.com\n      max_token_lifetime: 30m\n    - issuer: http://127.0.0.1:9000\n      provisioning: pre_provisioned\n  group_roles:\n    - {idp_group: fleet-admins, role: Administrator}\n    - {idp_group: team-a, role: Operator, management_group: grp-0123}\n";
    let checked = check(&SourceFile::new("toolgate.yaml", text), &policy()).unwrap();
    assert_eq!(checked.issuer_times, vec![(1800, 60), (3600, 60)]);
    let oauth = checked.settings().oauth.as_ref().unwrap();
    assert_eq!(oauth.issuers[1].provisioning, Provisioning::PreProvisioned);
    assert_eq!(oauth.group_roles[1].management_group.as_deref(), Some("grp-0123"));
    let problem = checked.problem("/oauth/group_roles/1/management_group", "no group", "make it");
    assert!(problem.contains("--> toolgate.yaml:10:61"), "{problem}");
    assert!(problems("").is_empty(), "an empty file sets nothing");
    assert!(problems("# nothing yet\n").is_empty());
}

#[test]
fn every_problem_is_reported_at_its_place() {
    let text = "public_url: http://toolgate.example.com/?x=1\noauth:\n  challenge_tier: local\n  issuers:\n    - issuer: ftp://idp\n      leeway: 10m\n      max_token_lifetime: 2x\n    - issuer: ftp://idp\n  group_roles:\n    - {idp_group: a, role: Root}\n";
    assert_eq!(
        problems(text),
        vec![
            "toolgate.yaml:1:13: error: public_url: `http://toolgate.example.com/?x=1` may not have a query or a fragment",
            "toolgate.yaml:3:19: error: challenge_tier `local` is not a tier with a scope (help: expected one of `readonly`, `operator`)",
            "toolgate.yaml:5:15: error: issuer: `ftp://idp` has the scheme `ftp`: use https",
            "toolgate.yaml:6:15: error: leeway `10m` is longer than the most allowed, 300 s",
            "toolgate.yaml:7:27: error: max_token_lifetime: unknown duration unit `x` in `2x`: use d, h, m or s",
            "toolgate.yaml:8:15: error: issuer: `ftp://idp` has the scheme `ftp`: use https",
            "toolgate.yaml:8:15: error: the issuer `ftp://idp` is listed twice",
            "toolgate.yaml:10:28: error: role `Root` is not declared (help: expected one of `Administrator`, `Operator`)",
        ]
    );
}

#[test]
fn plain_http_is_only_for_this_machine_and_oauth_needs_a_public_url() {
    let lines = problems("public_url: http://fleet.example.com\n");
    assert!(lines[0].contains("must be https"), "{lines:?}");
    assert!(problems("public_url: http://localhost:8080\n").is_empty());
    assert!(problems("public_url: http://[::1]:8080\n").is_empty());
    let lines = problems("oauth:\n  issuers: []\n");
    assert!(lines.iter().any(|l| l.contains("oauth needs public_url")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("names no issuer")), "{lines:?}");
    let lines =
        problems("public_url: https://x.example\noauth:\n  issuers: [{issuer: https://idp.example, audiences: x}]\n");
    assert!(lines[0].contains("audiences"), "unknown keys are named: {lines:?}");
}

#[test]
fn the_console_signs_in_through_one_issuer() {
    let text = "public_url: https://t.example\noauth:\n  issuers:\n    - issuer: https://a.example\n      console: {client_id: tg}\n    - issuer: https://b.example\n      console: {client_id: ' '}\n";
    let lines = problems(text);
    assert!(
        lines.iter().any(|l| l.contains("7:") && l.contains("another issuer already signs people in")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| l.contains("console.client_id is empty")), "{lines:?}");
}

#[test]
fn durations_read_like_the_cli_flags() {
    assert_eq!(parse_duration("90m"), Ok(5400));
    assert_eq!(parse_duration("45"), Ok(45));
    assert!(parse_duration("0s").is_err());
    assert!(parse_duration("99999999999999999d").is_err());
}

#[test]
fn upload_settings_are_checked_at_their_place() {
    let text = "uploads:\n  max_size_bytes: 1048576\n  retention:\n    standard: 7d\n    standrad: 1d\n";
    let lines = problems(text);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("toolgate.yaml:5:15") && lines[0].contains("not a retention class"), "{lines:?}");
    let good = check(&SourceFile::new("toolgate.yaml", "uploads:\n  retention: {standard: 7d}\n"), &policy()).unwrap();
    assert_eq!(good.uploads.retention["standard"], 7 * 86_400);
    assert_eq!(good.uploads.retention["transient"], 86_400, "the others keep their defaults");
}

#[test]
fn an_oauth_clients_toolsets_are_names_the_catalogue_declares() {
    let head = "public_url: https://toolgate.example.com\noauth:\n  issuers:\n    - issuer: https://idp.example.com\n  client_toolsets:\n";
    let good = format!(
        "{head}    - {{client_id: claude, toolsets: \"fleet, executions\"}}\n    - {{client_id: cli, toolsets: dynamic}}\n"
    );
    assert!(problems(&good).is_empty(), "{:?}", problems(&good));
    let bad = format!(
        "{head}    - {{client_id: claude, toolsets: \"fleet,executoins\"}}\n    - {{client_id: cli, toolsets: \" , \"}}\n"
    );
    assert_eq!(
        problems(&bad),
        vec![
            "toolgate.yaml:6:37: error: client `claude`: unknown toolset `executoins` (help: did you mean `executions`?)",
            "toolgate.yaml:7:34: error: toolsets is empty: name toolsets, or `all`, `default`, `dynamic`",
        ]
    );
}
