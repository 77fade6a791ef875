//! The index examples of the docs give the answers of the functions they replace: crcache's
//! README shows the `cel:` index that stands for the Kubebuilder book's `jobOwnerKey` indexer
//! (`metav1.GetControllerOf(job)`, then nothing unless the owner is a CronJob of the book's
//! group and version, else its name). The expression is read from the README itself and
//! evaluated by informerd's own index code on Jobs owned every way that matters, beside a port
//! of the book's function: an example that drifted from the function (it once left out the
//! owner's kind, so a Job controlled by a ConfigMap named like a CronJob was counted as that
//! CronJob's) fails here.

use informerd::filter::StringsExpr;
use serde_json::{json, Value};

const README: &str = include_str!("../clients/go/crcache/README.md");
const BOOK_API_VERSION: &str = "batch.tutorial.kubebuilder.io/v1";

/// The `cel:` of the index named `name` in the README's YAML.
fn readme_index(name: &str) -> String {
    let mut lines = README.lines();
    lines
        .find(|l| l.trim_start().starts_with(&format!("- name: {name} ")))
        .unwrap_or_else(|| panic!("README has no index named {name}"));
    let cel = lines.next().expect("a line after the index's name").trim();
    let quoted = cel
        .strip_prefix("cel: ")
        .expect("the index is a cel: index");
    quoted.trim_matches('\'').to_string()
}

/// The book's indexer: the controller's name if it is a CronJob of the book's API.
fn book_job_owner(job: &Value) -> Vec<String> {
    let owners = job["metadata"]["ownerReferences"].as_array();
    let controller = owners
        .into_iter()
        .flatten()
        .find(|o| o["controller"].as_bool() == Some(true));
    match controller {
        Some(o) if o["apiVersion"] == BOOK_API_VERSION && o["kind"] == "CronJob" => {
            vec![o["name"].as_str().expect("owner name").to_string()]
        }
        _ => Vec::new(),
    }
}

fn job(owners: Option<Value>) -> Value {
    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": "j", "namespace": "ns"}});
    if let Some(owners) = owners {
        job["metadata"]["ownerReferences"] = owners;
    }
    job
}

/// A Job with the one owner `o`.
fn owned_by(o: Value) -> Value {
    job(Some(json!([o])))
}

fn owner(api_version: &str, kind: &str, name: &str, controller: Option<bool>) -> Value {
    let mut o = json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": "u"});
    if let Some(c) = controller {
        o["controller"] = json!(c);
    }
    o
}

#[test]
fn the_kubebuilder_book_index_gives_the_book_functions_answers() {
    let index = StringsExpr::cel(&readme_index(".metadata.controller")).expect("compiles");
    let jobs = [
        job(None),
        job(Some(json!([]))),
        owned_by(owner(BOOK_API_VERSION, "CronJob", "nightly", Some(true))),
        // Named like a CronJob, controlled by another kind: not the CronJob's.
        owned_by(owner("v1", "ConfigMap", "nightly", Some(true))),
        owned_by(owner("batch/v1", "CronJob", "nightly", Some(true))),
        owned_by(owner(BOOK_API_VERSION, "CronJob", "nightly", Some(false))),
        owned_by(owner(BOOK_API_VERSION, "CronJob", "nightly", None)),
        job(Some(json!([
            owner(BOOK_API_VERSION, "CronJob", "other", None),
            owner(BOOK_API_VERSION, "CronJob", "nightly", Some(true)),
        ]))),
    ];
    let mut owned = 0;
    for job in &jobs {
        let want = book_job_owner(job);
        owned += want.len();
        assert_eq!(index.values(job), want, "{job}");
    }
    assert_eq!(owned, 2, "the cases include Jobs the book counts as owned");
}
