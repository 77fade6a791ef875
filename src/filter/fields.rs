//! Kubernetes field selectors (`?fieldSelector=`): `a.b=c`, `a.b==c`, `a.b!=c`, joined by
//! commas (AND), parsed as apimachinery's `fields.ParseSelector` does and matched locally on the
//! JSON of an object.
//!
//! Values may escape `\`, `,` and `=` with a backslash. Which fields can be selected is the
//! apiserver's business (`metadata.name`, `metadata.namespace` and a few per kind, such as
//! `spec.nodeName` and `status.phase` for pods); locally, any dotted path of the stored object is
//! resolved. A missing or null field reads as the empty string, as the apiserver's field sets
//! do (`spec.nodeName=` selects unscheduled pods); numbers and booleans read as their JSON text;
//! an object or a list equals no value.

use std::fmt;

use serde_json::Value;

use super::FilterError;

/// `=` (also written `==`) or `!=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldOp {
    /// `=` or `==`.
    Equals,
    /// `!=`.
    NotEquals,
}

/// One term of a field selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The dotted field, e.g. `spec.nodeName`.
    pub field: String,
    /// The comparison.
    pub op: FieldOp,
    /// The value, unescaped.
    pub value: String,
}

impl FieldRequirement {
    /// Whether `object` satisfies this term.
    pub fn matches(&self, object: &Value) -> bool {
        let mut node = Some(object);
        for part in self.field.split('.') {
            node = node.and_then(|n| n.get(part));
        }
        let equal = match node {
            None | Some(Value::Null) => self.value.is_empty(),
            Some(Value::String(s)) => *s == self.value,
            Some(Value::Bool(b)) => self.value == if *b { "true" } else { "false" },
            Some(Value::Number(n)) => n.to_string() == self.value,
            Some(Value::Object(_) | Value::Array(_)) => false,
        };
        match self.op {
            FieldOp::Equals => equal,
            FieldOp::NotEquals => !equal,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            FieldOp::Equals => "=",
            FieldOp::NotEquals => "!=",
        };
        write!(f, "{}{op}", self.field)?;
        for c in self.value.chars() {
            if matches!(c, '\\' | ',' | '=') {
                f.write_str("\\")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `a.b=c,d!=e`; errors name the column.
    ///
    /// ```
    /// use informerd::filter::FieldSelector;
    /// use serde_json::json;
    ///
    /// let s = FieldSelector::parse("spec.nodeName=node-1,status.phase!=Failed").unwrap();
    /// assert!(s.matches(&json!({"spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}})));
    /// let err = FieldSelector::parse("spec.nodeName").unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid field selector: 'spec.nodeName' has no operator (=, ==, !=) at column 1"
    /// );
    /// ```
    pub fn parse(text: &str) -> Result<FieldSelector, FilterError> {
        let error = |column: usize, message: String| FilterError::FieldSelector {
            message: format!("{message} at column {column}"),
        };
        let chars: Vec<char> = text.chars().collect();
        let mut requirements = Vec::new();
        let mut start = 0;
        while start <= chars.len() {
            // A term ends at the first unescaped comma.
            let mut end = start;
            while end < chars.len() && chars[end] != ',' {
                end += if chars[end] == '\\' { 2 } else { 1 };
            }
            let end = end.min(chars.len());
            let term = &chars[start..end];
            if !term.is_empty() || !requirements.is_empty() || end < chars.len() {
                requirements.push(parse_term(term, start + 1).map_err(|(c, m)| error(c, m))?);
            }
            start = end + 1;
        }
        Ok(FieldSelector { requirements })
    }

    /// The terms, in the order written.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether the selector matches everything (it has no term).
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `object` satisfies every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| r.matches(object))
    }
}

/// Parses one term that starts at `column` (from 1).
fn parse_term(term: &[char], column: usize) -> Result<FieldRequirement, (usize, String)> {
    let text: String = term.iter().collect();
    if term.is_empty() {
        return Err((column, "empty term, expected field=value".to_string()));
    }
    // The operator is the first unescaped '!=', '==' or '='.
    let mut i = 0;
    let (at, op, len) = loop {
        if i >= term.len() {
            return Err((column, format!("'{text}' has no operator (=, ==, !=)")));
        }
        match term[i] {
            '\\' => i += 2,
            '!' if term.get(i + 1) == Some(&'=') => break (i, FieldOp::NotEquals, 2),
            '=' if term.get(i + 1) == Some(&'=') => break (i, FieldOp::Equals, 2),
            '=' => break (i, FieldOp::Equals, 1),
            _ => i += 1,
        }
    };
    let field: String = term[..at].iter().collect();
    if field.is_empty() {
        return Err((
            column,
            format!("'{text}' has no field name before the operator"),
        ));
    }
    if let Some(bad) = field
        .chars()
        .position(|c| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
    {
        let c = field.chars().nth(bad).unwrap_or(' ');
        return Err((
            column + bad,
            format!("unexpected '{c}' in field name '{field}'"),
        ));
    }
    if field.split('.').any(str::is_empty) {
        return Err((column, format!("'{field}' is not a dotted field name")));
    }
    let mut value = String::new();
    let mut j = at + len;
    while j < term.len() {
        match term[j] {
            '\\' => match term.get(j + 1) {
                Some(c @ ('\\' | ',' | '=')) => {
                    value.push(*c);
                    j += 2;
                }
                Some(c) => {
                    return Err((
                        column + j,
                        format!(
                            "invalid escape sequence '\\{c}', only \\\\, \\, and \\= are allowed"
                        ),
                    ))
                }
                None => return Err((column + j, "a value cannot end with '\\'".to_string())),
            },
            c => {
                value.push(c);
                j += 1;
            }
        }
    }
    Ok(FieldRequirement { field, op, value })
}

super::string_syntax!(
    FieldSelector,
    "The Kubernetes string syntax, with values escaped."
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_terms_and_escapes() {
        let s = FieldSelector::parse(
            r"spec.nodeName=node-1,status.phase!=Failed,metadata.name==a\,b\=c\\d",
        )
        .unwrap();
        assert_eq!(
            s.requirements(),
            &[
                FieldRequirement {
                    field: "spec.nodeName".into(),
                    op: FieldOp::Equals,
                    value: "node-1".into()
                },
                FieldRequirement {
                    field: "status.phase".into(),
                    op: FieldOp::NotEquals,
                    value: "Failed".into()
                },
                FieldRequirement {
                    field: "metadata.name".into(),
                    op: FieldOp::Equals,
                    value: r"a,b=c\d".into()
                },
            ]
        );
        assert_eq!(
            s.to_string(),
            r"spec.nodeName=node-1,status.phase!=Failed,metadata.name=a\,b\=c\\d"
        );
        assert_eq!(FieldSelector::parse(&s.to_string()).unwrap(), s);
        assert!(FieldSelector::parse("").unwrap().is_everything());
        assert_eq!(
            FieldSelector::parse("spec.nodeName=")
                .unwrap()
                .requirements()[0]
                .value,
            ""
        );
    }

    #[test]
    fn matches_objects() {
        let pod = json!({
            "metadata": {"name": "p", "namespace": "default", "generation": 2},
            "spec": {"nodeName": "node-1", "hostNetwork": true, "containers": []},
            "status": {"phase": "Running"}
        });
        let cases = [
            ("spec.nodeName=node-1", true),
            ("spec.nodeName==node-2", false),
            ("spec.nodeName!=node-2", true),
            ("metadata.name=p,metadata.namespace=default", true),
            ("metadata.name=p,metadata.namespace=other", false),
            ("spec.schedulerName=", true),
            ("spec.schedulerName!=", false),
            ("spec.hostNetwork=true", true),
            ("metadata.generation=2", true),
            ("spec.containers=", false),
            ("status.phase!=Failed", true),
        ];
        for (selector, expected) in cases {
            assert_eq!(
                FieldSelector::parse(selector).unwrap().matches(&pod),
                expected,
                "{selector}"
            );
        }
    }

    #[test]
    fn errors_say_what_and_where() {
        let cases = [
            (
                "spec.nodeName",
                "'spec.nodeName' has no operator (=, ==, !=) at column 1",
            ),
            ("a=b,,c=d", "empty term, expected field=value at column 5"),
            ("a=b,", "empty term, expected field=value at column 5"),
            (
                "=x",
                "'=x' has no field name before the operator at column 1",
            ),
            (
                "a=b,spec node=x",
                "unexpected ' ' in field name 'spec node' at column 9",
            ),
            (
                "spec..x=1",
                "'spec..x' is not a dotted field name at column 1",
            ),
            (
                r"a=b\x",
                r"invalid escape sequence '\x', only \\, \, and \= are allowed at column 4",
            ),
        ];
        for (selector, message) in cases {
            let err = FieldSelector::parse(selector).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid field selector: {message}"),
                "{selector}"
            );
        }
    }
}
