//! The node's socket during a rolling update with a surge (deploy/node: `maxSurge: 1`,
//! `maxUnavailable: 0`): the new informerd starts while the old one still serves the socket
//! path on the node's hostPath directory. Instead of failing on a socket in use, the new one
//! waits, its caches syncing meanwhile, so that it becomes ready (`/readyz`) and the DaemonSet
//! controller stops the old one; it binds as soon as the old one stops listening (at the start
//! of its graceful shutdown). At exit each process removes the socket file only if it is still
//! the one it bound, never its successor's.
//!
//! Decision: the wait is bounded by `server.socketHandoverTimeout` (default 10 minutes,
//! `DEFAULT_SOCKET_HANDOVER_TIMEOUT`, a Deployment's default progress deadline: a rollout's
//! overlap is the new pod's sync plus seconds). Past it, informerd exits with an error naming
//! the socket and the process serving it (its pid and command, from the socket's peer
//! credentials; a process of another PID namespace, such as another pod's, shows pid 0 and is
//! named as such): a second informerd started on one socket by mistake fails where its
//! operator looks (the container restarts, its log says which process holds the socket),
//! rather than waiting silently for ever. A warning repeats while it waits, and a SIGTERM ends
//! the wait. `0s` fails at once, for who wants no handover.

use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::api::ApiError;

/// How often the socket is tried while another process serves it.
const POLL: Duration = Duration::from_millis(200);
/// How often the wait is logged.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// Whether another process accepts connections on `path`.
fn served(path: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(path).is_ok()
}

/// The process serving on `path`, in words: its pid and command and user when the socket's
/// peer credentials tell them.
async fn holder(path: &Path) -> String {
    let Ok(cred) = tokio::net::UnixStream::connect(path)
        .await
        .and_then(|s| s.peer_cred())
    else {
        return "a process informerd cannot identify".to_string();
    };
    match cred.pid().filter(|&pid| pid > 0) {
        Some(pid) => {
            let command = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_else(|_| "?".to_string());
            format!("pid {pid} ({command}, uid {})", cred.uid())
        }
        None => format!(
            "a process of another PID namespace (another pod or container?), uid {}",
            cred.uid()
        ),
    }
}

/// Waits until no process serves on `path` (at once when none does), for up to `timeout`;
/// `Ok(false)` when `shutdown` completed first, an error naming the socket and the process
/// serving it when the timeout passed.
pub async fn wait_until_free(
    path: &Path,
    timeout: Duration,
    shutdown: impl Future<Output = ()>,
) -> Result<bool, ApiError> {
    if !served(path) {
        return Ok(true);
    }
    let who = holder(path).await;
    let wait = async {
        let (mut waited, mut warn_at) = (Duration::ZERO, Duration::ZERO);
        while served(path) {
            if waited >= timeout {
                return Err(too_long(path, &who, timeout));
            }
            if waited >= warn_at {
                warn_at += WARN_EVERY;
                tracing::warn!(socket = %path.display(), holder = %who,
                    waited_seconds = waited.as_secs(), timeout_seconds = timeout.as_secs(),
                    "another process serves on the socket (a rolling update?): serving here once \
                     it stops; the caches sync meanwhile");
            }
            tokio::time::sleep(POLL).await;
            waited += POLL;
        }
        tracing::info!(socket = %path.display(), "the other process stopped serving on the socket");
        Ok(())
    };
    tokio::select! {
        waited = wait => waited.map(|()| true),
        () = shutdown => Ok(false),
    }
}

/// The error of a wait for `path` that lasted longer than `timeout`.
fn too_long(path: &Path, who: &str, timeout: Duration) -> ApiError {
    ApiError::Socket {
        path: path.to_path_buf(),
        message: format!(
            "{who} still serves on it after {}, longer than server.socketHandoverTimeout: two \
             informerds are configured with one socket outside a rolling update; stop the other \
             one or give this one another server.socket (or, if a rollout's new pod takes longer \
             to sync, raise server.socketHandoverTimeout)",
            humantime::format_duration(timeout)
        ),
    }
}

/// The file at `path` (device, inode and change time: a file system reuses the inode of a
/// removed file at once), to know it again at exit.
pub fn identity(path: &Path) -> Option<FileId> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| FileId(m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

/// A file's identity: see [`identity`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId(u64, u64, i64, i64);

/// Removes the socket file at `path` if it is still `ours` (from [`identity`] after binding)
/// and nobody listens on it (this process has stopped: a listener is a successor's).
pub fn remove_if_ours(path: &Path, ours: Option<FileId>) {
    if ours.is_some() && identity(path) == ours && !served(path) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[tokio::test]
    async fn waits_for_the_other_listener_and_removes_only_its_own_socket() {
        let dir = std::env::temp_dir().join(format!("informerd-handover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let long = Duration::from_secs(600);
        assert!(
            wait_until_free(&path, long, std::future::pending())
                .await
                .unwrap(),
            "no socket: free"
        );

        let old = UnixListener::bind(&path).unwrap();
        let old_file = identity(&path);
        // Served: a shutdown ends the wait.
        assert!(!wait_until_free(&path, long, async {}).await.unwrap());
        // Served for longer than the timeout: an error naming the socket and this process.
        let error = wait_until_free(&path, POLL, std::future::pending())
            .await
            .unwrap_err()
            .to_string();
        for named in [
            path.display().to_string(),
            format!("pid {}", std::process::id()),
            "server.socketHandoverTimeout".to_string(),
        ] {
            assert!(error.contains(&named), "{named} not in: {error}");
        }
        // The old process stops listening: the wait ends.
        let waiting = tokio::spawn({
            let path = path.clone();
            async move { wait_until_free(&path, long, std::future::pending()).await }
        });
        tokio::time::sleep(POLL * 2).await;
        assert!(!waiting.is_finished(), "waits while the socket is served");
        drop(old);
        assert!(waiting.await.unwrap().unwrap());

        // The successor binds anew; the old process's exit leaves the successor's file.
        std::fs::remove_file(&path).unwrap();
        let new = UnixListener::bind(&path).unwrap();
        let new_file = identity(&path);
        assert_ne!(old_file, new_file);
        remove_if_ours(&path, old_file);
        assert!(path.exists(), "not the old process's file any more");
        remove_if_ours(&path, new_file);
        assert!(path.exists(), "still listened on");
        drop(new);
        remove_if_ours(&path, new_file);
        assert!(
            !path.exists(),
            "its own file is removed once it stopped listening"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
