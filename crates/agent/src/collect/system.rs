//! users (/etc/passwd).

use std::fs;

use serde_json::json;

use super::{Row, Unavailable, row};

pub fn users() -> Result<Vec<Row>, Unavailable> {
    let text = fs::read_to_string("/etc/passwd")?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let [name, _, uid, gid, description, home, shell] = f[..] else { return None };
            Some(row([
                ("name", json!(name)),
                ("uid", json!(uid.parse::<i64>().ok()?)),
                ("gid", json!(gid.parse::<i64>().ok()?)),
                ("description", json!(description)),
                ("home", json!(home)),
                ("shell", json!(shell)),
            ]))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_a_user() {
        assert!(users().unwrap().iter().any(|r| r["name"] == "root" && r["uid"] == 0));
    }
}
