//! The shape of the code, held by a test so that it does not drift back: the modules of `src/`
//! import one another without a cycle (the data flow config → fleet → filter → transform →
//! store → api reads one way; `metrics` is a leaf the components register into), and the store
//! crate builds without a Kubernetes client, gRPC or CEL.
//!
//! Decision: imports are read from the source (every `crate::NAME` path, grouped `use
//! crate::{...}` included) rather than from the compiler, so that the test needs nothing but
//! the files; a module's children count as the module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// The top-level modules `text` names through `crate::`: `crate::fleet::Fleet` and
/// `use crate::{config::Config, store}` both count.
fn crate_imports(text: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The items of the group at its own depth: `a::b`, `c`, `d::{e, f}`.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        let name = ident(&group[i..]);
                        if !name.is_empty() {
                            out.insert(name);
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// The modules of `src/` (a folder or a file beside lib.rs) and those each imports.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join("src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("src/") {
        let path = entry.expect("an entry of src/").path();
        let name = path
            .file_stem()
            .and_then(|n| n.to_str())
            .expect("a file name")
            .to_string();
        if ["lib", "main"].contains(&name.as_str()) {
            continue;
        }
        let files = if path.is_dir() {
            rust_files(&path)
        } else {
            vec![path.clone()]
        };
        let imports: &mut BTreeSet<String> = graph.entry(name.clone()).or_default();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a source file");
            imports.extend(crate_imports(&text).into_iter().filter(|m| *m != name));
        }
    }
    graph
}

/// A cycle of `graph`, if it has one: the modules along it, the first repeated at the end.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if graph.contains_key(next) {
                if let Some(cycle) = visit(graph, next, path, done) {
                    return Some(cycle);
                }
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

#[test]
fn imports_are_read_from_single_and_grouped_paths() {
    let text = "use crate::{config::Config, store, fleet::{a, b}};\nlet x = crate::api::Api::new();\n// crate::cli is a comment\n";
    let names: Vec<String> = crate_imports(text).into_iter().collect();
    assert_eq!(names, ["api", "config", "fleet", "store"]);
    let cyclic = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(
        find_cycle(&cyclic),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
}

#[test]
fn the_modules_of_src_import_one_another_without_a_cycle() {
    let graph = module_graph();
    assert!(
        graph.contains_key("api") && graph.contains_key("metrics"),
        "{graph:?}"
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "src/ has an import cycle: {} (each module's imports: {graph:?}); move what one side \
             needs of the other into it, or invert the dependency (e.g. register into the leaf)",
            cycle.join(" → ")
        );
    }
}

#[test]
fn metrics_imports_no_component() {
    let graph = module_graph();
    let components: BTreeSet<&str> =
        ["api", "config", "fleet", "filter", "snapshot", "rbac"].into();
    let imported: Vec<&String> = graph["metrics"]
        .iter()
        .filter(|m| components.contains(m.as_str()))
        .collect();
    assert!(
        imported.is_empty(),
        "src/metrics imports {imported:?}: components register their collectors into metrics, \
         which must import none of them"
    );
}

#[test]
fn the_store_crate_builds_without_kube_tonic_or_cel() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root())
        .args([
            "tree",
            "--offline",
            "-p",
            "informerd-store",
            "-e",
            "normal,dev,build",
        ])
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("informerd-store"),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crates: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let banned: Vec<&&str> = crates
        .iter()
        .filter(|c| {
            ["kube", "k8s-openapi", "tonic", "prost", "cel", "hyper"].contains(c)
                || c.starts_with("kube-")
        })
        .collect();
    assert!(
        banned.is_empty(),
        "informerd-store (crates/store) depends on {banned:?}: the store crate's tests and \
         benchmarks must build without a Kubernetes client, gRPC or CEL"
    );
}
