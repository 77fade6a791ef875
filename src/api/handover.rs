//! The node's socket during a rolling update with a surge (deploy/node: `maxSurge: 1`,
//! `maxUnavailable: 0`): the new informerd starts while the old one still serves the socket
//! path on the node's hostPath directory. Instead of failing on a socket in use, the new one
//! waits, its caches syncing meanwhile, so that it becomes ready (`/readyz`) and the DaemonSet
//! controller stops the old one; it binds as soon as the old one stops listening (at the start
//! of its graceful shutdown). At exit each process removes the socket file only if it is still
//! the one it bound, never its successor's.
//!
//! Decision: the wait is not bounded. Two informerds configured on one socket outside a
//! rollout wait for each other's end; a warning repeats while it lasts, naming the socket, and
//! a SIGTERM ends the wait. Failing instead would stall every surge rollout on its first node.

use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// How often the socket is tried while another process serves it.
const POLL: Duration = Duration::from_millis(200);
/// How often the wait is logged.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// Whether another process accepts connections on `path`.
fn served(path: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(path).is_ok()
}

/// Waits until no process serves on `path` (at once when none does); `false` when `shutdown`
/// completed first.
pub async fn wait_until_free(path: &Path, shutdown: impl Future<Output = ()>) -> bool {
    if !served(path) {
        return true;
    }
    let wait = async {
        let (mut waited, mut warn_at) = (Duration::ZERO, Duration::ZERO);
        while served(path) {
            if waited >= warn_at {
                warn_at += WARN_EVERY;
                tracing::warn!(socket = %path.display(), waited_seconds = waited.as_secs(),
                    "another process serves on the socket (a rolling update?): serving here once \
                     it stops; the caches sync meanwhile");
            }
            tokio::time::sleep(POLL).await;
            waited += POLL;
        }
        tracing::info!(socket = %path.display(), "the other process stopped serving on the socket");
    };
    tokio::select! {
        () = wait => true,
        () = shutdown => false,
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
        assert!(
            wait_until_free(&path, std::future::pending()).await,
            "no socket: free"
        );

        let old = UnixListener::bind(&path).unwrap();
        let old_file = identity(&path);
        // Served: a shutdown ends the wait.
        assert!(!wait_until_free(&path, async {}).await);
        // The old process stops listening: the wait ends.
        let waiting = tokio::spawn({
            let path = path.clone();
            async move { wait_until_free(&path, std::future::pending()).await }
        });
        tokio::time::sleep(POLL * 2).await;
        assert!(!waiting.is_finished(), "waits while the socket is served");
        drop(old);
        assert!(waiting.await.unwrap());

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
