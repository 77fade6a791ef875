//! A running informerd sidecar for tests and benchmarks: the real binary, serving the control
//! plane's objects on a Unix socket of its own.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{ControlPlane, Error, Result, SidecarConfig};

/// An `informerd serve` process; killed when dropped.
#[derive(Debug)]
pub struct Sidecar {
    bin: PathBuf,
    dir: PathBuf,
    config: PathBuf,
    socket: PathBuf,
    kubeconfig: PathBuf,
    /// Environment variables of the process, beside the test's own.
    env: Vec<(String, String)>,
    /// A cgroup the process runs in (from its first instruction), if any.
    cgroup: Option<PathBuf>,
    child: Option<Child>,
}

impl Sidecar {
    /// Starts `bin serve` with `config` (its `server.socket` set to a socket in a fresh
    /// temporary directory); returns once the socket accepts connections (the API serves
    /// before the caches have synced: wait with the API, e.g. [`crate::wait_synced`]).
    pub fn start(bin: &Path, cluster: &ControlPlane, config: &SidecarConfig) -> Result<Sidecar> {
        Self::start_with_env(bin, cluster, &[], config)
    }

    /// Like [`Sidecar::start`], with environment variables for the process (which the
    /// configuration reads as `${NAME}`).
    pub fn start_with_env(
        bin: &Path,
        cluster: &ControlPlane,
        env: &[(&str, &str)],
        config: &SidecarConfig,
    ) -> Result<Sidecar> {
        Self::start_in(bin, cluster, env, None, config)
    }

    /// Like [`Sidecar::start`], the process in the cgroup of directory `cgroup` (a
    /// [`crate::MemoryCgroup`]'s) from before its first instruction, as in a container.
    pub fn start_in_cgroup(
        bin: &Path,
        cluster: &ControlPlane,
        cgroup: &Path,
        config: &SidecarConfig,
    ) -> Result<Sidecar> {
        Self::start_in(bin, cluster, &[], Some(cgroup), config)
    }

    fn start_in(
        bin: &Path,
        cluster: &ControlPlane,
        env: &[(&str, &str)],
        cgroup: Option<&Path>,
        config: &SidecarConfig,
    ) -> Result<Sidecar> {
        let dir = temp_dir()?;
        let socket = dir.join("informerd.sock");
        let text = config.clone().socket(&socket).to_yaml();
        let config = dir.join("informerd.yaml");
        std::fs::write(&config, text).map_err(|e| io("write the sidecar config", e))?;
        let mut sidecar = Sidecar {
            bin: bin.to_path_buf(),
            dir,
            config,
            socket,
            kubeconfig: cluster.kubeconfig().to_path_buf(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cgroup: cgroup.map(Path::to_path_buf),
            child: None,
        };
        sidecar.spawn()?;
        Ok(sidecar)
    }

    /// The Unix socket it serves on.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Its standard error so far (the log).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("informerd.log")).unwrap_or_default()
    }

    /// [`Sidecar::log`] without its colours (ANSI escapes), for matching its lines.
    pub fn plain_log(&self) -> String {
        let log = self.log();
        let mut out = String::with_capacity(log.len());
        let mut rest = log.as_str();
        while let Some(i) = rest.find('\x1b') {
            out.push_str(&rest[..i]);
            rest = &rest[i..];
            rest = rest.find('m').map_or("", |m| &rest[m + 1..]);
        }
        out.push_str(rest);
        out
    }

    /// Kills the process and starts a new one with the same configuration and socket.
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        self.spawn()
    }

    /// Sets an environment variable for the next start ([`Sidecar::restart`]).
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.env.push((name.to_string(), value.to_string()));
    }

    /// Stops the process with SIGTERM, as the kubelet does, and waits (up to 120 s) until it
    /// has exited; returns how it exited. [`Sidecar::restart`] starts it again.
    pub fn terminate(&mut self) -> Result<std::process::ExitStatus> {
        let Some(mut child) = self.child.take() else {
            return Err(io(
                "terminate the sidecar",
                std::io::ErrorKind::NotFound.into(),
            ));
        };
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .map_err(|e| io("run kill -TERM", e))?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = child
                .try_wait()
                .map_err(|e| io("wait for the sidecar", e))?
            {
                return Ok(status);
            }
            if !sent.success() || Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Command {
                    command: format!("{} serve", self.bin.display()),
                    detail: format!("did not exit after SIGTERM: {}", self.log()),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the process (dropping does too).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn spawn(&mut self) -> Result<()> {
        let _ = std::fs::remove_file(&self.socket);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("informerd.log"))
            .map_err(|e| io("open the sidecar log", e))?;
        let mut command = match &self.cgroup {
            None => Command::new(&self.bin),
            Some(cgroup) => {
                // The shell joins the cgroup, then becomes the sidecar (same pid): nothing of
                // the sidecar runs, nor is charged, outside it.
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(r#"echo $$ > "$1/cgroup.procs" && shift && exec "$@""#)
                    .arg("sh")
                    .arg(cgroup)
                    .arg(&self.bin);
                sh
            }
        };
        let child = command
            .arg("serve")
            .arg("--config")
            .arg(&self.config)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| io(&format!("start {}", self.bin.display()), e))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        // Connectable, not just present: the file appears at bind(), a moment before listen().
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(Error::Command {
                    command: format!("{} serve", self.bin.display()),
                    detail: format!("exited with {status}: {}", self.log()),
                });
            }
            if Instant::now() > deadline {
                return Err(Error::Command {
                    command: format!("{} serve", self.bin.display()),
                    detail: format!("no socket after 60 s: {}", self.log()),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(crate) fn temp_dir() -> Result<PathBuf> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    // Short: a Unix socket path is limited to about 100 bytes.
    let dir = std::env::temp_dir().join(format!(
        "informerd-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| io("create a temporary directory", e))?;
    Ok(dir)
}

pub(crate) fn io(what: &str, e: std::io::Error) -> Error {
    Error::Command {
        command: what.to_string(),
        detail: e.to_string(),
    }
}
