//! Keeps README.md and docs/*.md true to the code.
//!
//! Why: documentation drifts silently. A page that names a `make` target the Makefile lost, a
//! flag the binary no longer takes or a file that moved sends a newcomer down a dead end, and
//! nothing else fails when it happens. This test reads every page and fails, naming the file,
//! the line and what is wrong, when:
//! - a `make TARGET` shown in code is not a target of the Makefile;
//! - an `informerd SUBCOMMAND` shown in code does not exist, or a `--flag` given with it is not
//!   in that subcommand's `--help` (docs/bad-input.md, whose wrong command lines are on
//!   purpose and run by tests/bad_input.rs, aside);
//! - a relative path linked, or quoted in backticks with a first component that is an entry of
//!   the repository's root (and not git-ignored), does not exist;
//! - README.md is longer than a front page (160 lines);
//! - a page holds a commit hash (figures are dated by their results files in benches/results,
//!   not by commits) or a path of one machine.
//!
//! It reads files and runs `informerd ... --help`: no control plane is needed.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const README_MAX_LINES: usize = 160;
/// Fenced blocks in these languages (or none) are read as shell commands.
const SHELL_LANGUAGES: &[&str] = &["", "sh", "bash", "shell", "console"];
/// Paths of one machine, never right in the docs.
const MACHINE_PATHS: &[&str] = &["/work/", "/root/", "/home/"];

/// One page: README.md or a file of docs/, by its path from the repository root (the
/// directory its relative links start from).
struct Page {
    name: String,
    text: String,
}

/// A piece of code a page shows: an inline code span, or one line of a fenced shell block.
struct Code {
    line: usize,
    text: String,
}

/// What is wrong, one line per problem: `FILE:LINE: message`.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn add(&mut self, page: &Page, line: usize, message: String) {
        self.0.push(format!("{}:{line}: {message}", page.name));
    }

    fn assert_none(self, what: &str) {
        assert!(
            self.0.is_empty(),
            "{what}:\n{}\n(tests/docs.rs says what is checked)",
            self.0.join("\n")
        );
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README.md, then docs/*.md in name order.
fn pages() -> Vec<Page> {
    let mut names: Vec<String> = fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("a docs/ entry").file_name())
        .map(|name| format!("docs/{}", name.to_string_lossy()))
        .filter(|name| name.ends_with(".md"))
        .collect();
    names.sort();
    names.insert(0, "README.md".to_string());
    let page = |name: String| Page {
        text: read(&root().join(&name)),
        name,
    };
    names.into_iter().map(page).collect()
}

/// The page with its fenced blocks blanked (lines kept, so that line numbers hold), and the
/// lines of its fenced shell blocks.
fn split_fences(text: &str) -> (String, Vec<Code>) {
    let mut prose = String::new();
    let mut shell = Vec::new();
    let mut fence: Option<(String, bool)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        match &fence {
            None if marker.len() >= 3 => {
                let language = trimmed[marker.len()..].trim();
                fence = Some((marker, SHELL_LANGUAGES.contains(&language)));
            }
            Some((open, _)) if marker.starts_with(open.as_str()) => fence = None,
            Some((_, true)) => shell.push(Code {
                line: i + 1,
                text: without_comment(line).to_string(),
            }),
            Some((_, false)) => {}
            None => prose.push_str(line),
        }
        prose.push('\n');
    }
    (prose, shell)
}

/// A shell line without its `# comment`.
fn without_comment(line: &str) -> &str {
    if line.trim_start().starts_with('#') {
        return "";
    }
    line.find(" #").map_or(line, |at| &line[..at])
}

/// The inline code spans of the prose (which may run over a line break, not over a blank
/// line), each at the line it starts on.
fn inline_spans(prose: &str) -> Vec<Code> {
    let bytes = prose.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|&&b| b == b'`').count();
        let start = i + run;
        match closing_run(bytes, start, run) {
            Some(end) => {
                spans.push(Code {
                    line: 1 + prose[..i].matches('\n').count(),
                    text: prose[start..end].replace('\n', " ").trim().to_string(),
                });
                i = end + run;
            }
            None => i = start,
        }
    }
    spans
}

/// Where the run of exactly `run` backticks that closes a span starts, before a blank line.
fn closing_run(bytes: &[u8], from: usize, run: usize) -> Option<usize> {
    let mut j = from;
    while j < bytes.len() {
        match bytes[j] {
            b'\n' if bytes.get(j + 1) == Some(&b'\n') => return None,
            b'`' => {
                let n = bytes[j..].iter().take_while(|&&b| b == b'`').count();
                if n == run {
                    return Some(j);
                }
                j += n;
            }
            _ => j += 1,
        }
    }
    None
}

/// Every piece of code on a page: its fenced shell lines and its inline spans.
fn code(page: &Page) -> Vec<Code> {
    let (prose, mut all) = split_fences(&page.text);
    all.extend(inline_spans(&prose));
    all
}

/// `NAME=value`, as before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The commands of a line of code, each as its words without leading `NAME=value`s: a command
/// starts the line, or follows `&&`, `||`, `|`, `;`, `$(` or `)`.
fn commands(text: &str) -> Vec<Vec<String>> {
    let text = text.replace("$(", " ; ").replace(')', " ; ");
    let mut all: Vec<Vec<String>> = vec![Vec::new()];
    for word in text.split_whitespace() {
        if matches!(word, "&&" | "||" | "|" | ";") {
            all.push(Vec::new());
            continue;
        }
        let current = all.last_mut().expect("never empty");
        if !(current.is_empty() && is_assignment(word)) {
            current.push(word.to_string());
        }
    }
    all.retain(|command| !command.is_empty());
    all
}

/// The Makefile's simple variables (`NAME := value`, `?=`, `=`), to expand target names.
fn make_variables(makefile: &str) -> HashMap<String, String> {
    let assignment = |line: &str| {
        let (name, value) = line.split_once('=')?;
        let name = name.trim_end_matches([':', '?']).trim();
        let simple = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        (simple && !name.is_empty()).then(|| (name.to_string(), value.trim().to_string()))
    };
    makefile.lines().filter_map(assignment).collect()
}

/// Every target of the Makefile, with `$(VAR)` expanded: `$(BIN)/grpcurl` is `.cache/bin/grpcurl`.
fn make_targets() -> BTreeSet<String> {
    let makefile = read(&root().join("Makefile"));
    let variables = make_variables(&makefile);
    let mut targets = BTreeSet::new();
    for line in makefile.lines() {
        if line.starts_with(['\t', '#', ' ']) {
            continue;
        }
        let Some((head, rest)) = line.split_once(':') else {
            continue;
        };
        if rest.starts_with('=') || head.contains('=') {
            continue;
        }
        for name in head.trim_end().trim_end_matches('&').split_whitespace() {
            let mut name = name.to_string();
            for (variable, value) in &variables {
                name = name.replace(&format!("$({variable})"), value);
            }
            targets.insert(name);
        }
    }
    targets
}

#[test]
fn every_make_target_named_exists() {
    let targets = make_targets();
    let mut problems = Problems::default();
    for page in pages() {
        for code in code(&page) {
            for command in commands(&code.text) {
                if command[0] != "make" {
                    continue;
                }
                for word in &command[1..] {
                    if word.starts_with('-') || is_assignment(word) || targets.contains(word) {
                        continue;
                    }
                    let message = format!("`make {word}`: the Makefile has no target `{word}`");
                    problems.add(&page, code.line, message);
                }
            }
        }
    }
    problems.assert_none("make targets the docs name but the Makefile lacks");
}

/// `informerd [SUBCOMMAND] --help`, run once each; `None` when the subcommand does not exist.
#[derive(Default)]
struct Helps(HashMap<String, Option<String>>);

impl Helps {
    fn of(&mut self, subcommand: &str) -> Option<&str> {
        self.0
            .entry(subcommand.to_string())
            .or_insert_with(|| {
                let mut command = Command::new(env!("CARGO_BIN_EXE_informerd"));
                if !subcommand.is_empty() {
                    command.arg(subcommand);
                }
                let out = command.arg("--help").output().expect("informerd runs");
                let help = String::from_utf8_lossy(&out.stdout).into_owned();
                out.status.success().then_some(help)
            })
            .as_deref()
    }
}

/// Whether `help` lists `flag` (`--timeout`, not merely `--timeout-seconds`).
fn lists_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let next = help[at + flag.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// What is wrong with one `informerd ...` command, if anything.
fn check_informerd(helps: &mut Helps, command: &[String]) -> Vec<String> {
    let Some(first) = command.get(1) else {
        return Vec::new();
    };
    let (subcommand, flags) = if first.starts_with('-') {
        ("", &command[1..])
    } else {
        (first.as_str(), &command[2..])
    };
    let Some(help) = helps.of(subcommand) else {
        return vec![format!("`informerd {subcommand}`: no such subcommand")];
    };
    flags
        .iter()
        .filter(|word| word.starts_with("--"))
        .map(|word| word.split('=').next().expect("split gives one part"))
        .filter(|flag| !lists_flag(help, flag))
        .map(|flag| {
            let shown = if subcommand.is_empty() { "" } else { " " };
            format!("`informerd{shown}{subcommand} {flag}`: not in its --help")
        })
        .collect()
}

/// The catalogue of bad input shows wrong command lines on purpose; tests/bad_input.rs runs
/// each of them and checks the answer it lists.
const WRONG_ON_PURPOSE: &str = "docs/bad-input.md";

#[test]
fn every_informerd_subcommand_and_flag_named_exists() {
    let mut helps = Helps::default();
    let mut problems = Problems::default();
    for page in pages().into_iter().filter(|p| p.name != WRONG_ON_PURPOSE) {
        // A span with `: ` in it is a message informerd prints (`informerd cannot ...: ...`).
        for code in code(&page).into_iter().filter(|c| !c.text.contains(": ")) {
            for command in commands(&code.text) {
                if command[0] != "informerd" && !command[0].ends_with("/informerd") {
                    continue;
                }
                for message in check_informerd(&mut helps, &command) {
                    problems.add(&page, code.line, message);
                }
            }
        }
    }
    problems.assert_none("informerd subcommands or flags the docs name but the binary lacks");
}

/// Whether a code span reads as a path of the repository: path characters only, a first
/// component that is an entry of the root, and not a git-ignored (generated) path such as
/// `.cluster/kubeconfig`.
fn is_repository_path(text: &str, root_entries: &BTreeSet<String>, ignored: &[String]) -> bool {
    let path_chars = |c: char| c.is_ascii_alphanumeric() || "._/-".contains(c);
    let first = text.split('/').next().unwrap_or_default();
    let under =
        |dir: &String| text.trim_end_matches('/') == dir || text.starts_with(&format!("{dir}/"));
    !text.is_empty()
        && text.chars().all(path_chars)
        && root_entries.contains(first)
        && !ignored.iter().any(under)
}

/// The relative link targets of a line (`[text](target)`), without their `#anchor`.
fn relative_links(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            let target = &rest[..rest.find(')')?];
            let target = target.split('#').next().unwrap_or_default();
            let external = target.contains("://") || target.starts_with("mailto:");
            (!target.is_empty() && !external).then_some(target)
        })
        .collect()
}

#[test]
fn every_repository_path_named_exists() {
    let root = root();
    let root_entries: BTreeSet<String> = fs::read_dir(&root)
        .expect("the repository root is readable")
        .map(|entry| {
            entry
                .expect("a root entry")
                .file_name()
                .to_string_lossy()
                .into()
        })
        .collect();
    let ignored: Vec<String> = read(&root.join(".gitignore"))
        .lines()
        .filter_map(|line| Some(line.strip_prefix('/')?.trim_end_matches('/').to_string()))
        .collect();
    let mut problems = Problems::default();
    for page in pages() {
        let (prose, _) = split_fences(&page.text);
        for (i, line) in prose.lines().enumerate() {
            for target in relative_links(line) {
                if !root.join(&page.name).with_file_name(target).exists() {
                    let message = format!("link to `{target}`: no such file or directory");
                    problems.add(&page, i + 1, message);
                }
            }
        }
        for span in inline_spans(&prose) {
            let path = &span.text;
            if is_repository_path(path, &root_entries, &ignored) && !root.join(path).exists() {
                let message = format!("`{path}`: no such file or directory");
                problems.add(&page, span.line, message);
            }
        }
    }
    problems.assert_none("paths the docs name that do not exist");
}

#[test]
fn the_readme_is_a_front_page() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md:{lines}: {lines} lines, more than {README_MAX_LINES}: move the detail into \
         a page of docs/ and link it"
    );
}

/// Whether a word is a commit hash: 7 to 40 hexadecimal digits, with a digit and a letter.
fn is_commit_hash(word: &str) -> bool {
    (7..=40).contains(&word.len())
        && word.chars().all(|c| c.is_ascii_hexdigit())
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

#[test]
fn no_page_holds_a_commit_hash_or_a_machine_path() {
    let mut problems = Problems::default();
    for page in pages() {
        for (i, line) in page.text.lines().enumerate() {
            let words = line.split(|c: char| !c.is_ascii_alphanumeric());
            for hash in words.filter(|word| is_commit_hash(word)) {
                let message = format!("`{hash}` looks like a commit hash: date figures instead");
                problems.add(&page, i + 1, message);
            }
            for path in MACHINE_PATHS.iter().filter(|path| line.contains(*path)) {
                let message = format!("`{path}...` is a path of one machine");
                problems.add(&page, i + 1, message);
            }
        }
    }
    problems.assert_none("commit hashes or machine paths in the docs");
}

#[test]
fn the_checks_read_code_as_intended() {
    let (prose, shell) =
        split_fences("a `make x`\n```sh\nmake y # make z\n```\n```yaml\nmake w\n```\n");
    let spans = inline_spans(&prose);
    assert_eq!((spans[0].line, spans[0].text.as_str()), (1, "make x"));
    assert_eq!((shell.len(), shell[0].text.trim()), (1, "make y"));
    let nested =
        commands("A=1 informerd list $(informerd ensure apps/v1 Deployment) -n a && make demo");
    assert_eq!(nested[0], ["informerd", "list"]);
    assert_eq!(nested[1], ["informerd", "ensure", "apps/v1", "Deployment"]);
    assert_eq!(nested[3], ["make", "demo"]);
    assert!(
        is_commit_hash("4f4be79") && !is_commit_hash("1795498991") && !is_commit_hash("defaced")
    );
    assert!(lists_flag("  --timeout <D>", "--timeout") && !lists_flag("--timeout-x", "--timeout"));
    assert!(make_targets().contains(".cache/bin/grpcurl"));
}
