//! A private control plane that a test may break: its own etcd, kube-apiserver and
//! kube-controller-manager (started by the project's `cluster` tool in a directory of its own),
//! whose kube-apiserver can be killed with SIGKILL and restarted on the same port, and joined by
//! a second kube-apiserver on the same etcd. The chaos suite uses it; the shared control plane
//! of the other tests is never killed.
//!
//! Decision: the apiserver is restarted with exactly the command line, environment and working
//! directory of the process `cluster up` started (read from /proc before the kill), so the
//! restarted one serves on the same port with the same certificates and etcd; `state.json` is
//! updated with the new pid, so `cluster down` (run on drop, or by hand on a leftover
//! directory) stops it too.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use crate::{repo_root, run, sidecar::io, ControlPlane, Error, Result};

const READY_SECONDS: u64 = 180;

/// A control plane of the test's own, stopped (and its directory removed) when dropped.
#[derive(Debug)]
pub struct PrivateControlPlane {
    cp: ControlPlane,
    /// kube-apiserver processes this handle started (restarts, second apiservers).
    children: Mutex<Vec<Child>>,
}

/// How a kube-apiserver process was started: enough to start it again.
#[derive(Debug, Clone)]
struct Launch {
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
    exe: PathBuf,
}

impl PrivateControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager in a fresh temporary directory
    /// (takes as long as `make cluster` on a built tree: tens of seconds).
    pub fn start() -> Result<PrivateControlPlane> {
        let repo = repo_root();
        crate::make(&repo, "control-plane")?;
        let dir = crate::sidecar::temp_dir()?.join("cluster");
        let kubeconfig = cluster_up(&repo, &dir)?;
        Ok(PrivateControlPlane {
            cp: ControlPlane {
                repo,
                dir,
                kubeconfig,
            },
            children: Mutex::new(Vec::new()),
        })
    }

    /// The control plane, for clients, the seeder and [`crate::FaultProxy::start`].
    pub fn control_plane(&self) -> &ControlPlane {
        &self.cp
    }

    /// The address of the (first) kube-apiserver.
    pub fn apiserver_addr(&self) -> Result<std::net::SocketAddr> {
        crate::proxy::server_of(self.cp.kubeconfig())
    }

    /// Kills kube-apiserver with SIGKILL (no graceful shutdown: watches are cut, its watch
    /// cache is lost), runs `while_down`, and starts it again on the same port; returns once it
    /// is ready.
    ///
    /// `while_down` runs while no apiserver of this handle's first port serves, so nothing it
    /// changes in etcd reaches a client of that port before the restart (the chaos suite
    /// advances and compacts etcd there, so that every resume is older than the new watch
    /// cache: 410 Gone, whatever the client had seen before the kill).
    pub async fn kill_and_restart_apiserver(
        &self,
        while_down: impl AsyncFnOnce() -> Result<()>,
    ) -> Result<()> {
        self.restart_apiserver_with(&[], while_down).await
    }

    /// [`Self::kill_and_restart_apiserver`], with `extra` appended to its command line (and
    /// kept by later restarts, which start it as it runs): e.g.
    /// `--feature-gates=WatchList=false`, an apiserver that refuses streaming lists.
    pub async fn restart_apiserver_with(
        &self,
        extra: &[&str],
        while_down: impl AsyncFnOnce() -> Result<()>,
    ) -> Result<()> {
        let pid = self.recorded_pid("kube-apiserver")?;
        let mut launch = Launch::of(pid)?;
        launch.args.extend(extra.iter().map(|a| a.to_string()));
        let addr = self.apiserver_addr()?;
        kill(pid)?;
        self.reap(pid);
        while_down().await?;
        let log = self.cp.dir.join("logs/kube-apiserver.log");
        // The port is free once the old process has closed its files; on busy cores a new one
        // started at once has found it still bound, so wait until it can be bound.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpListener::bind(addr).is_err() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let child = launch.spawn(&log)?;
        let new_pid = child.id();
        self.children.lock().expect("children lock").push(child);
        self.record_pid("kube-apiserver", new_pid)?;
        self.wait_ready(addr, new_pid, &log).await
    }

    /// Starts another kube-apiserver on the same etcd, on a free port of 127.0.0.1, and returns
    /// its address once it is ready. It has a watch cache of its own, so it can lag behind or
    /// run ahead of the first; it is stopped when this handle is dropped.
    pub async fn start_second_apiserver(&self) -> Result<std::net::SocketAddr> {
        let pid = self.recorded_pid("kube-apiserver")?;
        let mut launch = Launch::of(pid)?;
        let port = crate::free_port();
        let at = launch
            .args
            .iter()
            .position(|a| a == "--secure-port")
            .ok_or_else(|| Error::Command {
                command: "start a second kube-apiserver".into(),
                detail: format!("no --secure-port in {:?}", launch.args),
            })?;
        launch.args[at + 1] = port.to_string();
        let log = self.cp.dir.join(format!("logs/kube-apiserver-{port}.log"));
        let child = launch.spawn(&log)?;
        let pid = child.id();
        self.children.lock().expect("children lock").push(child);
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        self.wait_ready(addr, pid, &log).await?;
        Ok(addr)
    }

    /// Waits until the apiserver at `addr` (our child `pid`, logging to `log`) answers
    /// `/readyz` with 200; the error has the end of its log. Decision: up to 180 s, as a
    /// kube-apiserver builds every API group before it listens, which on busy shared cores has
    /// taken more than a minute (`cluster up` allows 120 s).
    async fn wait_ready(&self, addr: std::net::SocketAddr, pid: u32, log: &Path) -> Result<()> {
        let mut config = self.cp.admin_config().await?;
        config.cluster_url = format!("https://{addr}").parse().expect("a URL");
        let client = kube::Client::try_from(config)?;
        let deadline = Instant::now() + Duration::from_secs(READY_SECONDS);
        loop {
            let request = hyper::Request::get("/readyz")
                .body(Vec::new())
                .expect("a request");
            let last = match client.request_text(request).await {
                Ok(text) if text.trim() == "ok" => return Ok(()),
                Ok(text) => text,
                Err(e) => e.to_string(),
            };
            let exited = self.exited(pid);
            if exited.is_some() || Instant::now() > deadline {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                return Err(Error::Command {
                    command: format!("wait for kube-apiserver at {addr}"),
                    detail: format!(
                        "not ready ({}): {last}; end of {}: {tail:#?}",
                        exited.unwrap_or_else(|| format!("after {READY_SECONDS} s")),
                        log.display()
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn state(&self) -> Result<serde_json::Value> {
        let path = self.cp.dir.join("state.json");
        std::fs::read(&path)
            .map_err(|e| io(&format!("read {}", path.display()), e))
            .and_then(|b| {
                serde_json::from_slice(&b).map_err(|e| Error::Command {
                    command: format!("read {}", path.display()),
                    detail: e.to_string(),
                })
            })
    }

    fn recorded_pid(&self, name: &str) -> Result<u32> {
        self.state()?["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .and_then(|p| p["pid"].as_u64())
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| Error::Command {
                command: format!("find {name} in {}", self.cp.dir.display()),
                detail: "not in state.json".into(),
            })
    }

    fn record_pid(&self, name: &str, pid: u32) -> Result<()> {
        let mut state = self.state()?;
        for p in state["processes"].as_array_mut().into_iter().flatten() {
            if p["name"] == name {
                p["pid"] = pid.into();
            }
        }
        let path = self.cp.dir.join("state.json");
        std::fs::write(&path, state.to_string())
            .map_err(|e| io(&format!("write {}", path.display()), e))
    }

    /// How our child `pid` exited, if it has.
    fn exited(&self, pid: u32) -> Option<String> {
        let mut children = self.children.lock().expect("children lock");
        let child = children.iter_mut().find(|c| c.id() == pid)?;
        child
            .try_wait()
            .ok()
            .flatten()
            .map(|status| format!("exited with {status}"))
    }

    /// Waits for a killed process: our own child is reaped; one `cluster up` started (and
    /// init reaps) is waited for until it is gone or a zombie (its files closed).
    fn reap(&self, pid: u32) {
        let mut children = self.children.lock().expect("children lock");
        if let Some(at) = children.iter().position(|c| c.id() == pid) {
            let mut child = children.remove(at);
            let _ = child.wait();
            return;
        }
        let running = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                // The state follows the command name in parentheses: Z and X are dead.
                let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
                !matches!(state.and_then(|r| r.chars().next()), Some('Z' | 'X'))
            })
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Launch {
    /// Reads the command line, environment and working directory of process `pid`.
    fn of(pid: u32) -> Result<Launch> {
        let read = |what: &str| {
            std::fs::read(format!("/proc/{pid}/{what}"))
                .map_err(|e| io(&format!("read /proc/{pid}/{what}"), e))
        };
        let split = |bytes: Vec<u8>| -> Vec<String> {
            bytes
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        };
        let mut args = split(read("cmdline")?);
        let env = split(read("environ")?)
            .into_iter()
            .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.into(), v.into())))
            .collect();
        let link = |what: &str| {
            std::fs::read_link(format!("/proc/{pid}/{what}"))
                .map_err(|e| io(&format!("read /proc/{pid}/{what}"), e))
        };
        let cwd = link("cwd")?;
        let exe = PathBuf::from(args.remove(0));
        Ok(Launch {
            args,
            env,
            cwd,
            exe,
        })
    }

    /// Starts it, appending its output to `log`, in a process group of its own (a Ctrl-C of
    /// the test does not reach it; drop or `cluster down` stops it).
    fn spawn(&self, log: &Path) -> Result<Child> {
        use std::os::unix::process::CommandExt;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| io(&format!("open {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| io(&format!("open {}", log.display()), e))?;
        Command::new(&self.exe)
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| io(&format!("start {}", self.exe.display()), e))
    }
}

/// `cluster up --dir DIR`: starts the control plane in `dir` unless it runs; returns the path
/// of its admin kubeconfig.
pub(crate) fn cluster_up(repo: &Path, dir: &Path) -> Result<PathBuf> {
    // Resolved: `cluster` knows its processes by their executable's path, which the kernel
    // gives resolved, so a `.cache/bin` that is a symbolic link would read as "exited".
    let bin = repo.join(".cache/bin");
    let bin = bin.canonicalize().unwrap_or(bin);
    let out = run(Command::new(repo.join(".cache/bin/cluster"))
        .arg("up")
        .arg("--dir")
        .arg(dir)
        .arg("--bin")
        .arg(bin))?;
    Ok(PathBuf::from(out.trim()))
}

/// SIGKILL to one process, by its id.
fn kill(pid: u32) -> Result<()> {
    run(Command::new("kill").arg("-KILL").arg(pid.to_string())).map(|_| ())
}

impl Drop for PrivateControlPlane {
    fn drop(&mut self) {
        let children = std::mem::take(&mut *self.children.lock().expect("children lock"));
        for mut child in children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = run(Command::new(self.cp.bin("cluster"))
            .arg("down")
            .arg("--dir")
            .arg(&self.cp.dir));
        if let Some(parent) = self.cp.dir.parent() {
            let _ = std::fs::remove_dir_all(parent);
        }
    }
}
