//! The accept mutex (nginx's `ngx_trylock_accept_mutex`): with
//! `accept_mutex on`, a worker watches the listeners only while it holds
//! the lock.

use super::*;

impl Core {
    // ------------------------------------------------------------ accept mutex

    /// Makes this loop take `mutex` before accepting (`accept_mutex on`): the
    /// listeners are registered only while it is held.
    pub fn set_accept_mutex(&mut self, mutex: Box<dyn AcceptMutex>) -> io::Result<()> {
        self.accept_mutex = Some(mutex);
        self.accept_mutex_held = false;
        self.disable_accept_events()
    }

    pub(crate) fn accept_mutex_is_set(&self) -> bool {
        self.accept_mutex.is_some()
    }

    /// nginx's `ngx_trylock_accept_mutex`.
    pub(super) fn trylock_accept_mutex(&mut self) -> io::Result<()> {
        let got = self.accept_mutex.as_mut().is_some_and(|m| m.try_lock());
        if got {
            if !self.accept_events_enabled {
                if let Err(e) = self.enable_accept_events() {
                    if let Some(m) = self.accept_mutex.as_mut() {
                        m.unlock();
                    }
                    self.accept_mutex_held = false;
                    return Err(e);
                }
            }
            self.accept_mutex_held = true;
        } else {
            if self.accept_events_enabled {
                self.disable_accept_events()?;
            }
            self.accept_mutex_held = false;
        }
        Ok(())
    }
}
