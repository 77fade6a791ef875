//! Kubernetes label selectors: the string syntax of `kubectl -l` and `?labelSelector=`, and the
//! structured `LabelSelector` of API objects, parsed, validated and matched locally.
//!
//! kube-core's `Selector` converts structured selectors and matches maps, but it has no parser
//! for the string syntax, no `<`/`>` requirements and no validation of keys and values, which is
//! what configuration and the gRPC API need; hence this module. [`LabelSelector::to_string`]
//! writes the string syntax, which kube-rs' `ListParams::labels` takes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::BuildHasher;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

use super::FilterError;
use crate::vocab::names::{label_value, qualified_name};

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value`, `key==value`, matchLabels: the label exists and has this value.
    Equals(String, String),
    /// `key!=value`: the label is absent or has another value.
    NotEquals(String, String),
    /// `key in (a,b)`: the label exists and has one of the values.
    In(String, BTreeSet<String>),
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn(String, BTreeSet<String>),
    /// `key`: the label exists.
    Exists(String),
    /// `!key`: the label does not exist.
    DoesNotExist(String),
    /// `key>n`: the label exists and is an integer greater than `n`.
    GreaterThan(String, i64),
    /// `key<n`: the label exists and is an integer less than `n`.
    LessThan(String, i64),
}

impl Requirement {
    /// The label key the requirement is about.
    pub fn key(&self) -> &str {
        match self {
            Requirement::Equals(k, _)
            | Requirement::NotEquals(k, _)
            | Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k)
            | Requirement::GreaterThan(k, _)
            | Requirement::LessThan(k, _) => k,
        }
    }

    /// Whether a label value (`None`: absent) satisfies the requirement.
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match self {
            Requirement::Equals(_, v) => value == Some(v.as_str()),
            Requirement::NotEquals(_, v) => value != Some(v.as_str()),
            Requirement::In(_, vs) => value.is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(_, vs) => value.is_none_or(|x| !vs.contains(x)),
            Requirement::Exists(_) => value.is_some(),
            Requirement::DoesNotExist(_) => value.is_none(),
            Requirement::GreaterThan(_, n) => value
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            Requirement::LessThan(_, n) => value
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |vs: &BTreeSet<String>| vs.iter().cloned().collect::<Vec<_>>().join(",");
        match self {
            Requirement::Equals(k, v) => write!(f, "{k}={v}"),
            Requirement::NotEquals(k, v) => write!(f, "{k}!={v}"),
            Requirement::In(k, vs) => write!(f, "{k} in ({})", set(vs)),
            Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", set(vs)),
            Requirement::Exists(k) => write!(f, "{k}"),
            Requirement::DoesNotExist(k) => write!(f, "!{k}"),
            Requirement::GreaterThan(k, n) => write!(f, "{k}>{n}"),
            Requirement::LessThan(k, n) => write!(f, "{k}<{n}"),
        }
    }
}

/// Something labels can be read from.
pub trait Labels {
    /// The value of label `key`, if present.
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// The `metadata.labels` of an object as JSON; non-string values count as absent.
impl Labels for serde_json::Map<String, Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

impl<T: Labels + ?Sized> Labels for &T {
    fn label(&self, key: &str) -> Option<&str> {
        (**self).label(key)
    }
}

impl<T: Labels> Labels for Option<T> {
    fn label(&self, key: &str) -> Option<&str> {
        self.as_ref().and_then(|l| l.label(key))
    }
}

/// A parsed, validated label selector: all requirements must hold (AND). The empty selector
/// matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// Parses the Kubernetes string syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`,
    /// `a`, `!a`, `a>1`, `a<1`, joined by commas (AND). Keys and values are validated as
    /// Kubernetes does; errors name the column.
    ///
    /// ```
    /// use informerd::filter::LabelSelector;
    /// use std::collections::BTreeMap;
    ///
    /// let s = LabelSelector::parse("app in (web,api), tier!=db, !canary").unwrap();
    /// let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    /// assert!(s.matches(&labels));
    /// let err = LabelSelector::parse("app=~web").unwrap_err();
    /// assert_eq!(err.to_string(), "invalid label selector: unknown operator '=~' at column 4");
    /// ```
    pub fn parse(text: &str) -> Result<LabelSelector, FilterError> {
        Parser::new(text)
            .parse()
            .map_err(|(column, message)| FilterError::LabelSelector {
                field: None,
                message: format!("{message} at column {column}"),
            })
    }

    /// Converts the structured selector of API objects (`matchLabels` and `matchExpressions`
    /// with `In`, `NotIn`, `Exists`, `DoesNotExist`), validated as Kubernetes does. An empty
    /// selector matches everything. Errors name the offending field, e.g.
    /// `matchExpressions[1].operator`.
    pub fn from_k8s(selector: &meta::LabelSelector) -> Result<LabelSelector, FilterError> {
        let error = |field: String, message: String| FilterError::LabelSelector {
            field: Some(field),
            message,
        };
        let mut requirements = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            let field = format!("matchLabels.{key}");
            qualified_name(key)
                .map_err(|e| error(field.clone(), format!("invalid key '{key}': {e}")))?;
            label_value(value)
                .map_err(|e| error(field, format!("invalid value '{value}': {e}")))?;
            requirements.push(Requirement::Equals(key.clone(), value.clone()));
        }
        for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
            let field = |name: &str| format!("matchExpressions[{i}].{name}");
            let key = &expr.key;
            qualified_name(key)
                .map_err(|e| error(field("key"), format!("invalid key '{key}': {e}")))?;
            let values = expr.values.clone().unwrap_or_default();
            for (j, value) in values.iter().enumerate() {
                label_value(value).map_err(|e| {
                    error(
                        field(&format!("values[{j}]")),
                        format!("invalid value '{value}': {e}"),
                    )
                })?;
            }
            let set: BTreeSet<String> = values.iter().cloned().collect();
            let requirement = match expr.operator.as_str() {
                "In" | "NotIn" if set.is_empty() => {
                    return Err(error(
                        field("values"),
                        format!("must be non-empty when operator is {}", expr.operator),
                    ))
                }
                "In" => Requirement::In(key.clone(), set),
                "NotIn" => Requirement::NotIn(key.clone(), set),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(error(
                        field("values"),
                        format!("must be empty when operator is {}", expr.operator),
                    ))
                }
                "Exists" => Requirement::Exists(key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(key.clone()),
                other => {
                    return Err(error(
                        field("operator"),
                        format!(
                            "unknown operator '{other}', expected one of In, NotIn, Exists, \
                             DoesNotExist"
                        ),
                    ))
                }
            };
            requirements.push(requirement);
        }
        Ok(LabelSelector { requirements })
    }

    /// The requirements, in the order written.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether the selector matches everything (it has no requirement).
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches_value(labels.label(r.key())))
    }

    /// Whether the `metadata.labels` of an object (JSON) satisfy every requirement.
    pub fn matches_object(&self, object: &Value) -> bool {
        let labels = object
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.matches(&labels)
    }
}

impl fmt::Display for LabelSelector {
    /// The Kubernetes string syntax, e.g. for `ListParams::labels`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::write_requirements(f, &self.requirements)
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = FilterError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LabelSelector::parse(s)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    /// A key, a value, or `in` / `notin`.
    Word(String),
    /// A run of operator characters: `=`, `==`, `!=`, `!`, `<`, `>`, or something unknown.
    Op(String),
    Open,
    Close,
    Comma,
    End,
}

fn is_op_char(c: char) -> bool {
    matches!(c, '=' | '!' | '<' | '>' | '~')
}

fn is_word_char(c: char) -> bool {
    !c.is_whitespace() && !is_op_char(c) && !matches!(c, '(' | ')' | ',')
}

/// A selector parser; errors are `(column, message)`, the column counting characters from 1.
struct Parser {
    chars: Vec<char>,
    pos: usize,
    /// The current token and its column.
    token: Token,
    column: usize,
}

type ParseResult<T> = Result<T, (usize, String)>;

impl Parser {
    fn new(text: &str) -> Parser {
        let mut parser = Parser {
            chars: text.chars().collect(),
            pos: 0,
            token: Token::End,
            column: 1,
        };
        parser.advance();
        parser
    }

    /// Moves to the next token.
    fn advance(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
        self.column = self.pos + 1;
        let Some(&c) = self.chars.get(self.pos) else {
            self.token = Token::End;
            return;
        };
        let run = |parser: &mut Parser, pred: fn(char) -> bool| {
            let start = parser.pos;
            while parser.chars.get(parser.pos).is_some_and(|c| pred(*c)) {
                parser.pos += 1;
            }
            parser.chars[start..parser.pos].iter().collect::<String>()
        };
        self.token = match c {
            '(' => {
                self.pos += 1;
                Token::Open
            }
            ')' => {
                self.pos += 1;
                Token::Close
            }
            ',' => {
                self.pos += 1;
                Token::Comma
            }
            c if is_op_char(c) => Token::Op(run(self, is_op_char)),
            _ => Token::Word(run(self, is_word_char)),
        };
    }

    fn describe(&self) -> String {
        match &self.token {
            Token::Word(w) => format!("'{w}'"),
            Token::Op(o) => format!("'{o}'"),
            Token::Open => "'('".to_string(),
            Token::Close => "')'".to_string(),
            Token::Comma => "','".to_string(),
            Token::End => "the end".to_string(),
        }
    }

    fn parse(mut self) -> ParseResult<LabelSelector> {
        let mut requirements = Vec::new();
        if self.token == Token::End {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(self.requirement()?);
            match self.token {
                Token::End => break,
                Token::Comma => self.advance(),
                _ => {
                    return Err((
                        self.column,
                        format!("found {}, expected ',' or the end", self.describe()),
                    ))
                }
            }
        }
        Ok(LabelSelector { requirements })
    }

    fn key(&mut self) -> ParseResult<String> {
        match &self.token {
            Token::Word(w) => {
                let key = w.clone();
                qualified_name(&key)
                    .map_err(|e| (self.column, format!("invalid label key '{key}': {e}")))?;
                self.advance();
                Ok(key)
            }
            _ => Err((
                self.column,
                format!("found {}, expected a label key", self.describe()),
            )),
        }
    }

    fn requirement(&mut self) -> ParseResult<Requirement> {
        if let Token::Op(op) = &self.token {
            if op == "!" {
                self.advance();
                let key = self.key()?;
                return match self.token {
                    Token::Comma | Token::End => Ok(Requirement::DoesNotExist(key)),
                    _ => Err((
                        self.column,
                        format!(
                            "found {}, expected ',' or the end after !{key}",
                            self.describe()
                        ),
                    )),
                };
            }
        }
        let key = self.key()?;
        let (column, token) = (self.column, self.token.clone());
        match token {
            Token::Comma | Token::End => Ok(Requirement::Exists(key)),
            Token::Word(w) if w == "in" || w == "notin" => {
                self.advance();
                let values = self.values()?;
                if values.is_empty() {
                    return Err((column, format!("the values of '{w}' must not be empty")));
                }
                Ok(if w == "in" {
                    Requirement::In(key, values)
                } else {
                    Requirement::NotIn(key, values)
                })
            }
            Token::Op(op) => {
                self.advance();
                match op.as_str() {
                    "=" | "==" => Ok(Requirement::Equals(key, self.value()?)),
                    "!=" => Ok(Requirement::NotEquals(key, self.value()?)),
                    ">" | "<" => {
                        let value_column = self.column;
                        let value = self.value()?;
                        let n = value.parse::<i64>().map_err(|_| {
                            (
                                value_column,
                                format!("'{op}' needs an integer value, found '{value}'"),
                            )
                        })?;
                        Ok(if op == ">" {
                            Requirement::GreaterThan(key, n)
                        } else {
                            Requirement::LessThan(key, n)
                        })
                    }
                    other => Err((column, format!("unknown operator '{other}'"))),
                }
            }
            _ => Err((
                column,
                format!(
                    "found {}, expected an operator (=, ==, !=, in, notin, <, >), ',' or the end",
                    self.describe()
                ),
            )),
        }
    }

    /// A single value after `=`, `==`, `!=`, `<`, `>`; empty when a comma or the end follows.
    fn value(&mut self) -> ParseResult<String> {
        match &self.token {
            Token::Word(w) => {
                let value = w.clone();
                label_value(&value)
                    .map_err(|e| (self.column, format!("invalid label value '{value}': {e}")))?;
                self.advance();
                Ok(value)
            }
            Token::Comma | Token::End => Ok(String::new()),
            _ => Err((
                self.column,
                format!("found {}, expected a label value", self.describe()),
            )),
        }
    }

    /// `( v1, v2, ... )`; an empty element between commas is the empty value.
    fn values(&mut self) -> ParseResult<BTreeSet<String>> {
        if self.token != Token::Open {
            return Err((
                self.column,
                format!("found {}, expected '('", self.describe()),
            ));
        }
        self.advance();
        let mut values = BTreeSet::new();
        if self.token == Token::Close {
            self.advance();
            return Ok(values);
        }
        loop {
            match &self.token {
                Token::Word(_) => {
                    values.insert(self.value()?);
                }
                Token::Comma | Token::Close => {
                    values.insert(String::new());
                }
                _ => {
                    return Err((
                        self.column,
                        format!("found {}, expected a label value", self.describe()),
                    ))
                }
            }
            match self.token {
                Token::Comma => self.advance(),
                Token::Close => {
                    self.advance();
                    return Ok(values);
                }
                _ => {
                    return Err((
                        self.column,
                        format!("found {}, expected ',' or ')'", self.describe()),
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_the_whole_string_syntax() {
        let s = LabelSelector::parse(
            "app=web, tier==front,env!=prod, zone in (a, b,c), team notin (x), ready, !canary, \
             replicas>2, weight<10, app.kubernetes.io/name=informerd, empty=",
        )
        .unwrap();
        assert_eq!(
            s.requirements(),
            &[
                Requirement::Equals("app".into(), "web".into()),
                Requirement::Equals("tier".into(), "front".into()),
                Requirement::NotEquals("env".into(), "prod".into()),
                Requirement::In("zone".into(), ["a", "b", "c"].map(String::from).into()),
                Requirement::NotIn("team".into(), ["x".to_string()].into()),
                Requirement::Exists("ready".into()),
                Requirement::DoesNotExist("canary".into()),
                Requirement::GreaterThan("replicas".into(), 2),
                Requirement::LessThan("weight".into(), 10),
                Requirement::Equals("app.kubernetes.io/name".into(), "informerd".into()),
                Requirement::Equals("empty".into(), "".into()),
            ]
        );
        assert_eq!(
            s.to_string(),
            "app=web,tier=front,env!=prod,zone in (a,b,c),team notin (x),ready,!canary,\
             replicas>2,weight<10,app.kubernetes.io/name=informerd,empty="
        );
        // The written form parses back to the same selector.
        assert_eq!(LabelSelector::parse(&s.to_string()).unwrap(), s);
        assert!(LabelSelector::parse("").unwrap().is_everything());
        assert!(LabelSelector::parse("  ").unwrap().is_everything());
    }

    #[test]
    fn matches_like_kubernetes() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("replicas", "3")]);
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app=api", false),
            ("app!=api", true),
            ("missing!=x", true),
            ("app in (web,api)", true),
            ("app in (api)", false),
            ("missing in (x)", false),
            ("app notin (api)", true),
            ("missing notin (x)", true),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("replicas>2", true),
            ("replicas>3", false),
            ("replicas<4", true),
            ("app>1", false),
            ("missing<1", false),
            ("app=web,tier=back", false),
            ("app=web,tier=front", true),
        ];
        for (selector, expected) in cases {
            let s = LabelSelector::parse(selector).unwrap();
            assert_eq!(s.matches(&l), expected, "{selector}");
            let json = serde_json::json!({"metadata": {"labels": l}});
            assert_eq!(s.matches_object(&json), expected, "{selector} on JSON");
        }
        let none = serde_json::json!({"metadata": {}});
        assert!(LabelSelector::parse("!app").unwrap().matches_object(&none));
        assert!(!LabelSelector::parse("app").unwrap().matches_object(&none));
    }

    #[test]
    fn errors_say_what_and_where() {
        let cases = [
            ("app=~web", "unknown operator '=~' at column 4"),
            ("app in web", "found 'web', expected '(' at column 8"),
            ("app in ()", "the values of 'in' must not be empty at column 5"),
            ("app in (a", "found the end, expected ',' or ')' at column 10"),
            ("app web", "found 'web', expected an operator (=, ==, !=, in, notin, <, >), ',' or the end at column 5"),
            ("a=b c", "found 'c', expected ',' or the end at column 5"),
            ("=b", "found '=', expected a label key at column 1"),
            ("a,,b", "found ',', expected a label key at column 3"),
            ("replicas>x", "'>' needs an integer value, found 'x' at column 10"),
            ("-app=x", "invalid label key '-app': name part must consist of alphanumeric characters"),
            ("app=-x", "invalid label value '-x': a valid label must be an empty string"),
            ("!a=b", "found '=', expected ',' or the end after !a at column 3"),
        ];
        for (selector, message) in cases {
            let err = LabelSelector::parse(selector).unwrap_err();
            let FilterError::LabelSelector {
                field: None,
                message: got,
            } = &err
            else {
                panic!("{selector}: {err:?}");
            };
            assert!(got.starts_with(message), "{selector}: {got}");
        }
    }

    #[test]
    fn from_k8s_validates_and_matches() {
        let selector = meta::LabelSelector {
            match_labels: Some(BTreeMap::from([("team".to_string(), "x".to_string())])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "env".into(),
                    operator: "In".into(),
                    values: Some(vec!["prod".into(), "staging".into()]),
                },
                LabelSelectorRequirement {
                    key: "legacy".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        let s = LabelSelector::from_k8s(&selector).unwrap();
        assert_eq!(s.to_string(), "team=x,env in (prod,staging),!legacy");
        assert!(s.matches(&labels(&[("team", "x"), ("env", "prod")])));
        assert!(!s.matches(&labels(&[("team", "x"), ("env", "dev")])));
        assert!(!s.matches(&labels(&[("team", "x"), ("env", "prod"), ("legacy", "")])));
        assert!(LabelSelector::from_k8s(&Default::default())
            .unwrap()
            .is_everything());

        let bad = |operator: &str, values: Option<Vec<String>>| meta::LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: operator.into(),
                values,
            }]),
        };
        let field = |s: meta::LabelSelector| match LabelSelector::from_k8s(&s).unwrap_err() {
            FilterError::LabelSelector { field, message } => (field.unwrap(), message),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(bad("Matches", None)),
            (
                "matchExpressions[0].operator".to_string(),
                "unknown operator 'Matches', expected one of In, NotIn, Exists, DoesNotExist"
                    .to_string()
            )
        );
        assert_eq!(field(bad("In", None)).0, "matchExpressions[0].values");
        assert_eq!(
            field(bad("Exists", Some(vec!["a".into()]))).0,
            "matchExpressions[0].values"
        );
        assert_eq!(
            field(bad("In", Some(vec!["a b".into()]))).0,
            "matchExpressions[0].values[0]"
        );
    }
}
