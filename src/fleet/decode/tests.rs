use kube::Resource as _;
use serde_json::{json, Value};

use super::*;
use crate::fleet::{Decoded, Decoding};
use crate::transform::Transform;
use informerd_store::fixtures::all_pods;

fn pod(rv: &str) -> Value {
    json!({"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": rv,
                        "managedFields": [{"manager": "kubectl"}]},
           "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
           "status": {"phase": "Running"}})
}

fn controller(mut object: Value) -> Value {
    Transform::controller().apply(&mut object);
    object
}

/// The event's type and object (as JSON), for an object's event.
fn object_of(event: WatchEvent<Projected>) -> (&'static str, Projected) {
    match event {
        WatchEvent::Added(o) => ("ADDED", o),
        WatchEvent::Modified(o) => ("MODIFIED", o),
        WatchEvent::Deleted(o) => ("DELETED", o),
        other => panic!("not an object's event: {other:?}"),
    }
}

#[test]
fn an_objects_event_is_decoded_with_the_scopes_transform() {
    let transform = Transform::controller();
    let _decoding = Decoding::enter(Some(&transform));
    for kind in ["ADDED", "MODIFIED", "DELETED"] {
        let line = format!(r#"{{"type":"{kind}","object":{}}}"#, pod("7"));
        let (got, object) = object_of(watch_line(&line).unwrap().unwrap());
        assert_eq!(got, kind);
        assert!(
            matches!(object.object, Decoded::Tape(_)),
            "read by our reader"
        );
        assert_eq!(object.meta().resource_version.as_deref(), Some("7"));
        assert_eq!(object.meta().namespace.as_deref(), Some("ns"));
        assert_eq!(object.object.into_json(), controller(pod("7")));
    }
}

#[test]
fn outside_a_scope_an_object_is_decoded_whole() {
    let line = format!(r#"{{"type":"ADDED","object":{}}}"#, pod("7"));
    let (_, object) = object_of(watch_line(&line).unwrap().unwrap());
    assert!(!object.transformed);
    assert_eq!(object.object, Decoded::Json(pod("7")));
}

#[test]
fn other_shapes_of_a_line_are_decoded_as_kube_rs_decodes_them() {
    let transform = Transform::controller();
    let _decoding = Decoding::enter(Some(&transform));
    // Members in another order, and whitespace: serde_json's path, the transform applied.
    let line = format!(r#"{{ "object": {}, "type": "MODIFIED" }}"#, pod("8"));
    let (kind, object) = object_of(watch_line(&line).unwrap().unwrap());
    assert_eq!(kind, "MODIFIED");
    assert!(object.transformed);
    assert_eq!(object.object.into_json(), controller(pod("8")));

    let bookmark = r#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1",
        "metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}"#
        .replace('\n', "");
    match watch_line(&bookmark).unwrap().unwrap() {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, "12"),
        other => panic!("{other:?}"),
    }

    let gone = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}}"#;
    match watch_line(gone).unwrap().unwrap() {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("{other:?}"),
    }

    // A bare Status (not an event) is the API's error, as in kube-rs.
    let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden","reason":"Forbidden","code":403}"#;
    match watch_line(status).unwrap() {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_incomplete_line_is_skipped_and_a_broken_one_is_an_error() {
    let transform = Transform::controller();
    let _decoding = Decoding::enter(Some(&transform));
    let line = format!(r#"{{"type":"ADDED","object":{}}}"#, pod("7"));
    // Cut short, as the last line of a response can be: skipped, as kube-rs skips it.
    assert!(watch_line(&line[..line.len() / 2]).is_none());
    // Broken where the transform keeps: serde_json's error, which names where.
    let broken = line.replace(r#""phase":"Running""#, r#""phase":Running"#);
    match watch_line(&broken).unwrap() {
        Err(kube::Error::SerdeError(e)) => assert!(e.to_string().contains("column"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn recorded_pods_decode_as_whole_objects_transformed() {
    let transform = Transform::controller();
    let _decoding = Decoding::enter(Some(&transform));
    for pod in all_pods() {
        let line = format!(r#"{{"type":"ADDED","object":{pod}}}"#);
        let (_, object) = object_of(watch_line(&line).unwrap().unwrap());
        assert!(matches!(object.object, Decoded::Tape(_)));
        assert_eq!(object.object.into_json(), controller(pod));
    }
}

#[test]
fn a_list_body_is_decoded_as_kube_rs_decodes_it_with_items_transformed() {
    let transform = Transform::controller();
    let _decoding = Decoding::enter(Some(&transform));
    let body = json!({"kind": "PodList", "apiVersion": "v1",
                      "metadata": {"resourceVersion": "42", "continue": "tok"},
                      "items": [pod("1"), pod("2")]})
    .to_string();
    let list = list_body(&body).unwrap();
    assert_eq!(list.types.kind, "PodList");
    assert_eq!(list.types.api_version, "v1");
    assert_eq!(list.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(list.metadata.continue_.as_deref(), Some("tok"));
    let items: Vec<Value> = list
        .items
        .into_iter()
        .map(|o| o.object.into_json())
        .collect();
    assert_eq!(items, vec![controller(pod("1")), controller(pod("2"))]);

    // `items: null`, as an empty list may say, is no items.
    let empty = list_body(r#"{"kind":"PodList","apiVersion":"v1","metadata":{},"items":null}"#);
    assert!(empty.unwrap().items.is_empty());

    let e = list_body(&body[..body.len() - 3]).unwrap_err();
    assert!(e.to_string().contains("EOF"), "{e}");
}

#[test]
fn a_list_body_in_other_spellings_is_read_as_kube_rs_reads_it() {
    let transform = Transform::controller();
    let _decoding = Decoding::enter(Some(&transform));
    // An escaped key is the same key.
    let body = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{}},"\u0069tems":[{}]}}"#,
        pod("1")
    );
    assert_eq!(list_body(&body).unwrap().items.len(), 1);
    // `kind` without `apiVersion`: kube-rs's defaults for both.
    let list = list_body(r#"{"kind":"PodList","items":[]}"#).unwrap();
    assert_eq!(
        (list.types.api_version.as_str(), list.types.kind.as_str()),
        ("v1", "List")
    );
    // A repeated `items` is refused, as serde refuses a repeated field.
    let e = list_body(r#"{"items":[],"items":[]}"#).unwrap_err();
    assert!(e.to_string().contains("duplicate field"), "{e}");
    // serde_json's error names its position once.
    let e = list_body(r#"{"metadata":{"resourceVersion":7},"items":[]}"#).unwrap_err();
    assert_eq!(e.to_string().matches(" line ").count(), 1, "{e}");
}
