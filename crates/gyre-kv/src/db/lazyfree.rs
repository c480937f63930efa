//! Freeing big aggregates a slice at a time (Redis's `lazyfree.c` role,
//! on the loop instead of a thread): see the module notes of [`super`].

use super::*;

impl Db {
    /// Drop a removed aggregate, burying a big one for `free_some`.
    pub(super) fn bury_obj(&mut self, o: Object) {
        if o.len() > LAZYFREE_MIN {
            self.graveyard.push(o);
        }
    }

    /// Remove node `i` and drop its value (see [`Db::bury`]).
    pub(super) fn delete_at(&mut self, i: usize) {
        let n = self.remove_at(i);
        if let Some(o) = n.slot.into_obj() {
            self.bury_obj(o);
        }
    }

    /// Free up to `budget` elements of buried aggregates; true while some
    /// remain.
    pub fn free_some(&mut self, mut budget: usize) -> bool {
        while budget > 0 {
            let Some(o) = self.graveyard.last_mut() else {
                return false;
            };
            budget = budget.saturating_sub(o.free_some(budget));
            if o.is_empty() {
                self.graveyard.pop();
                self.lazyfreed += 1;
            }
        }
        !self.graveyard.is_empty()
    }

    /// Buried aggregates not yet freed (INFO lazyfree_pending_objects).
    pub fn lazyfree_pending(&self) -> usize {
        self.graveyard.len()
    }

    /// Buried aggregates freed so far (INFO lazyfreed_objects).
    pub fn lazyfreed(&self) -> u64 {
        self.lazyfreed
    }
}
