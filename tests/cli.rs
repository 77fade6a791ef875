//! The binary as a user meets it: `check-config` accepts the example and refuses a bad file
//! with `FILE:LINE:COLUMN: field: message` and a non-zero exit; `serve` refuses to start on a
//! bad file, and on a kind the cluster does not serve, without starting anything.

use std::process::Command;

use informerd_testkit::ControlPlane;

fn informerd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_informerd"))
}

fn write(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("informerd-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write config");
    path
}

#[test]
fn check_config_accepts_every_example() {
    let dir = informerd_testkit::repo_root().join("examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let out = informerd()
                .arg("check-config")
                .arg(&path)
                .output()
                .expect("run");
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            // The examples run as written: no expression that errs on some objects.
            assert!(
                out.stderr.is_empty(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 2,
        "examples/ holds the example and the demo configs"
    );
}

#[test]
fn check_config_names_file_line_column_and_field() {
    let path = write(
        "bad.yaml",
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  filter: 'object.metadata.name'\n",
    );
    let out = informerd()
        .arg("check-config")
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!("{}:6:11: resources[0].filter:", path.display());
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(
        stderr.contains("bool"),
        "the message says what is wrong: {stderr}"
    );
}

#[test]
fn check_config_warns_of_a_field_read_without_has_and_accepts_the_file() {
    let path = write(
        "unguarded.yaml",
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  filter: 'object.metadata.ownerReferences.exists(o, o.kind == \"DaemonSet\")'\n  indexes:\n  - name: app\n    cel: 'has(object.metadata.labels) ? [object.metadata.labels[\"app\"]] : []'\n",
    );
    let out = informerd()
        .arg("check-config")
        .arg(&path)
        .output()
        .expect("run");
    assert!(out.status.success(), "a warning is not an error: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!("{}:6:11: resources[0].filter: warning:", path.display());
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(
        stderr.contains("has(object.metadata.ownerReferences)"),
        "the warning names the test to add: {stderr}"
    );
    assert_eq!(
        stderr.lines().count(),
        1,
        "the guarded index is fine: {stderr}"
    );
}

#[test]
fn serve_refuses_an_unknown_field_before_starting_anything() {
    let path = write(
        "unknown.yaml",
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  colour: blue\n",
    );
    let out = informerd()
        .arg("serve")
        .arg("--config")
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:6:3: resources[0].colour: unknown field",
            path.display()
        )),
        "{stderr}"
    );
}

#[test]
fn serve_refuses_a_kind_the_cluster_does_not_serve() {
    let cp = ControlPlane::get();
    let path = write(
        "gadget.yaml",
        "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n- apiVersion: example.com/v1\n  kind: Gadget\n",
    );
    let out = informerd()
        .arg("serve")
        .arg("--config")
        .arg(&path)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:7:9: resources[1].kind:", path.display())),
        "{stderr}"
    );
}
