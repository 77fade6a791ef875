//! The JSON and YAML documents of the client commands (their shapes are in the
//! [module documentation](super)): writing one, quoting the resume token in YAML, and the
//! `List` and watch event documents.

use informerd::proto::WatchEvent;
use serde::Serialize;
use serde_json::{json, Value};

use super::{event_name, token, CliError, Format};

/// A JSON or YAML document, ending with a newline. `pretty`: indented JSON, else one line.
pub fn document(value: &impl Serialize, format: Format, pretty: bool) -> Result<String, CliError> {
    match format {
        Format::Json | Format::Table => {
            let mut text = if pretty {
                serde_json::to_string_pretty(value)
            } else {
                serde_json::to_string(value)
            }
            .map_err(|source| CliError::Decode {
                what: "output".into(),
                source,
            })?;
            text.push('\n');
            Ok(text)
        }
        Format::Yaml => serde_yaml::to_string(value).map_err(CliError::Yaml),
    }
}

/// Quotes the resume token of a YAML document: serde_yaml writes `123:45` bare, which YAML
/// 1.1 parsers (PyYAML, for one) read as a base-60 integer.
pub fn quote_token(yaml: String, epoch: u64, revision: u64) -> String {
    let bare = format!("resourceVersion: {}\n", token(epoch, revision));
    let quoted = format!("resourceVersion: '{}'\n", token(epoch, revision));
    yaml.replacen(&bare, &quoted, 1)
}

/// The `List` document of a list; see the module documentation.
pub fn list_document(items: Vec<Value>, epoch: u64, revision: u64) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": items,
        "metadata": {"resourceVersion": token(epoch, revision)},
    })
}

/// One watch event as a document; see the module documentation. A struct, so that the type
/// comes first (a `Value` sorts its keys).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventDocument {
    #[serde(rename = "type")]
    kind: &'static str,
    revision: u64,
    resource_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<Value>,
}

impl EventDocument {
    pub fn new(event: &WatchEvent, object: Option<Value>) -> EventDocument {
        EventDocument {
            kind: event_name(event.r#type),
            revision: event.revision,
            resource_version: token(event.epoch, event.revision),
            object,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_quotes_the_resume_token() {
        let list = list_document(vec![], 12036890116437781076, 3);
        let yaml = quote_token(
            document(&list, Format::Yaml, true).unwrap(),
            12036890116437781076,
            3,
        );
        assert!(
            yaml.contains("resourceVersion: '12036890116437781076:3'\n"),
            "{yaml}"
        );
        let back: Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(
            back["metadata"]["resourceVersion"],
            "12036890116437781076:3"
        );
    }
}
