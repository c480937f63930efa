//! The background fsync of `appendfsync everysec` (Redis's `bio.c` AOF
//! fsync job): the loop hands a duplicate of the file descriptor to this
//! thread and goes on; the thread reports the offset it made durable.

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What the loop reads of the thread's progress.
#[derive(Debug, Default)]
pub struct BioShared {
    /// A job is queued or running.
    pub busy: AtomicBool,
    /// Bytes of the current file known to be on disk.
    pub fsynced: AtomicU64,
    /// The last fsync failed.
    pub failed: AtomicBool,
}

/// The fsync thread.
#[derive(Debug)]
pub struct Bio {
    tx: Option<Sender<(File, u64)>>,
    handle: Option<JoinHandle<()>>,
    pub shared: Arc<BioShared>,
}

impl Bio {
    pub fn spawn() -> std::io::Result<Bio> {
        let (tx, rx) = channel::<(File, u64)>();
        let shared = Arc::new(BioShared::default());
        let sh = shared.clone();
        let handle = std::thread::Builder::new()
            .name("gyre-aof-fsync".into())
            .spawn(move || {
                while let Ok((f, offset)) = rx.recv() {
                    match f.sync_data() {
                        Ok(()) => {
                            sh.fsynced.fetch_max(offset, Ordering::AcqRel);
                            sh.failed.store(false, Ordering::Release);
                        }
                        Err(e) => {
                            log::warn!("Fail to fsync the AOF file: {e}");
                            sh.failed.store(true, Ordering::Release);
                        }
                    }
                    sh.busy.store(false, Ordering::Release);
                }
            })?;
        Ok(Bio {
            tx: Some(tx),
            handle: Some(handle),
            shared,
        })
    }

    /// Whether an fsync is queued or running (`aofFsyncInProgress`).
    pub fn busy(&self) -> bool {
        self.shared.busy.load(Ordering::Acquire)
    }

    /// Queue an fsync of `f` covering `offset` bytes.
    pub fn fsync(&self, f: &File, offset: u64) {
        let Ok(dup) = f.try_clone() else {
            return;
        };
        if let Some(tx) = &self.tx {
            self.shared.busy.store(true, Ordering::Release);
            if tx.send((dup, offset)).is_err() {
                self.shared.busy.store(false, Ordering::Release);
            }
        }
    }
}

impl Drop for Bio {
    /// Let a queued fsync finish (the process is stopping or the AOF is
    /// turned off: what was written must reach the disk).
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
