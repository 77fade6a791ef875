//! kubectl as a user runs it, for the tests that apply `deploy/`: the one the Makefile builds
//! from the control plane's own release (`make .cache/bin/kubectl`; `$INFORMERD_KUBECTL` names
//! another), as the control plane's admin, in the repository.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
};

use crate::{repo_root, ControlPlane};

/// The kubectl the Makefile builds, against the control plane as its admin.
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// Builds kubectl if needed (unless `$INFORMERD_KUBECTL` names one).
    pub fn new(cp: &ControlPlane) -> Kubectl {
        let bin = match std::env::var_os("INFORMERD_KUBECTL") {
            Some(path) => PathBuf::from(path),
            None => {
                let made = Command::new("make")
                    .args(["-s", "-C"])
                    .arg(repo_root())
                    .arg(".cache/bin/kubectl")
                    .status()
                    .expect("run make");
                assert!(made.success(), "make .cache/bin/kubectl failed");
                cp.bin("kubectl")
            }
        };
        Kubectl {
            bin,
            kubeconfig: cp.kubeconfig().to_path_buf(),
        }
    }

    /// Runs `kubectl ARGS` in the repository with `stdin`; its output, or a panic with its errors.
    pub fn run(&self, args: &[&str], stdin: &str) -> String {
        use std::io::Write;
        let mut child = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .current_dir(repo_root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kubectl");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// The YAML documents of `manifests` (what `kubectl kustomize` prints).
pub fn documents(manifests: &str) -> Vec<serde_yaml::Value> {
    serde_yaml::Deserializer::from_str(manifests)
        .map(|d| <serde_yaml::Value as serde::Deserialize>::deserialize(d).unwrap())
        .collect()
}
