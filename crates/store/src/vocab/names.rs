//! Kubernetes' rules for names, label keys and label values (apimachinery's `validation`
//! package), with its messages.

/// A DNS-1123 label: a namespace name, a resource name in our configuration.
pub fn dns1123_label(value: &str) -> Result<(), String> {
    if value.len() > 63 {
        return Err("must be no more than 63 characters".to_string());
    }
    if !is_dns_label(value) {
        return Err(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric \
                    characters or '-', and must start and end with an alphanumeric character \
                    (e.g. 'my-name', or '123-abc')"
                .to_string(),
        );
    }
    Ok(())
}

/// A DNS-1123 subdomain: an API group, the prefix of a label key.
pub fn dns1123_subdomain(value: &str) -> Result<(), String> {
    if value.len() > 253 {
        return Err("must be no more than 253 characters".to_string());
    }
    if value.is_empty() || !value.split('.').all(is_dns_label) {
        return Err(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                    characters, '-' or '.', and must start and end with an alphanumeric \
                    character (e.g. 'example.com')"
                .to_string(),
        );
    }
    Ok(())
}

fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, the shape of label values and of the name part
/// of qualified names.
fn is_label_shaped(value: &str) -> bool {
    let bytes = value.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    !bytes.is_empty()
        && alnum(&bytes[0])
        && alnum(&bytes[bytes.len() - 1])
        && bytes
            .iter()
            .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
}

/// A qualified name (`[prefix/]name`): a label key, an annotation key.
pub fn qualified_name(value: &str) -> Result<(), String> {
    let name = match value.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() {
                return Err("prefix part must be non-empty".to_string());
            }
            if let Err(e) = dns1123_subdomain(prefix) {
                return Err(format!("prefix part {e}"));
            }
            if name.contains('/') {
                return Err(
                    "a qualified name must consist of alphanumeric characters, '-', '_' \
                            or '.', and must start and end with an alphanumeric character, with \
                            an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                        .to_string(),
                );
            }
            name
        }
        None => value,
    };
    if name.is_empty() {
        return Err("name part must be non-empty".to_string());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".to_string());
    }
    if !is_label_shaped(name) {
        return Err(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and \
                    must start and end with an alphanumeric character (e.g. 'MyName', or \
                    'my.name', or '123-abc')"
                .to_string(),
        );
    }
    Ok(())
}

/// A label value: empty, or up to 63 characters of the label shape.
pub fn label_value(value: &str) -> Result<(), String> {
    if value.len() > 63 {
        return Err("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_label_shaped(value) {
        return Err(
            "a valid label must be an empty string or consist of alphanumeric \
                    characters, '-', '_' or '.', and must start and end with an alphanumeric \
                    character (e.g. 'MyValue', or 'my_value', or '12345')"
                .to_string(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kubernetes_rules() {
        assert!(dns1123_label("kube-system").is_ok());
        assert!(dns1123_label("a").is_ok());
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(dns1123_label(bad).is_err(), "{bad}");
        }
        assert!(dns1123_subdomain("apps.example.com").is_ok());
        assert!(dns1123_subdomain("a..b").is_err());
        assert!(qualified_name("app").is_ok());
        assert!(qualified_name("app.kubernetes.io/name").is_ok());
        assert!(qualified_name("App_1.x").is_ok());
        for bad in [
            "",
            "/a",
            "a/",
            "a/b/c",
            "-a",
            "a b",
            "Example.com/a",
            &"a".repeat(64),
        ] {
            assert!(qualified_name(bad).is_err(), "{bad}");
        }
        assert!(label_value("").is_ok());
        assert!(label_value("v1.2_3-x").is_ok());
        for bad in ["-a", "a-", "a b", "a/b", &"a".repeat(64)] {
            assert!(label_value(bad).is_err(), "{bad}");
        }
    }
}
