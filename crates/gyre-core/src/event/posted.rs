//! Posted event queues (nginx's `ngx_posted_accept_events` and
//! `ngx_posted_events`).
//!
//! While a worker holds the accept mutex it only queues what epoll reported,
//! runs the queued accepts, releases the mutex, and only then runs the other
//! handlers, so the mutex is held for as short a time as possible. Handlers
//! may also post events to run later in the same iteration.
//!
//! The queues are intrusive doubly linked lists over event indices (two per
//! connection slot: read and write), so posting is O(1) and idempotent, and a
//! closing connection unlinks its events in O(1) instead of leaving stale
//! entries behind.

const NIL: u32 = u32::MAX;

/// Which queue an event is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queue {
    Accept = 0,
    Events = 1,
}

#[derive(Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
    /// NIL when not posted, else the queue number.
    queue: u32,
}

const UNLINKED: Link = Link {
    prev: NIL,
    next: NIL,
    queue: NIL,
};

/// The two posted queues over `capacity` event indices.
pub struct Posted {
    links: Vec<Link>,
    head: [u32; 2],
    tail: [u32; 2],
    len: [usize; 2],
}

impl Posted {
    pub fn new(capacity: usize) -> Posted {
        Posted {
            links: vec![UNLINKED; capacity],
            head: [NIL; 2],
            tail: [NIL; 2],
            len: [0; 2],
        }
    }

    /// Whether event `ev` is in any queue.
    #[inline]
    pub fn is_posted(&self, ev: u32) -> bool {
        self.links[ev as usize].queue != NIL
    }

    pub fn is_empty(&self, q: Queue) -> bool {
        self.len[q as usize] == 0
    }

    pub fn len(&self, q: Queue) -> usize {
        self.len[q as usize]
    }

    /// Appends `ev` to `q` unless it is already posted (to any queue).
    pub fn post(&mut self, ev: u32, q: Queue) {
        if self.is_posted(ev) {
            return;
        }
        let qi = q as usize;
        let tail = self.tail[qi];
        self.links[ev as usize] = Link {
            prev: tail,
            next: NIL,
            queue: qi as u32,
        };
        if tail == NIL {
            self.head[qi] = ev;
        } else {
            self.links[tail as usize].next = ev;
        }
        self.tail[qi] = ev;
        self.len[qi] += 1;
    }

    /// Unlinks `ev` if posted.
    pub fn remove(&mut self, ev: u32) {
        let l = self.links[ev as usize];
        if l.queue == NIL {
            return;
        }
        let qi = l.queue as usize;
        if l.prev == NIL {
            self.head[qi] = l.next;
        } else {
            self.links[l.prev as usize].next = l.next;
        }
        if l.next == NIL {
            self.tail[qi] = l.prev;
        } else {
            self.links[l.next as usize].prev = l.prev;
        }
        self.links[ev as usize] = UNLINKED;
        self.len[qi] -= 1;
    }

    /// Takes the oldest event off `q`.
    pub fn pop(&mut self, q: Queue) -> Option<u32> {
        let h = self.head[q as usize];
        if h == NIL {
            return None;
        }
        self.remove(h);
        Some(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_idempotent_and_removable() {
        let mut p = Posted::new(8);
        p.post(3, Queue::Events);
        p.post(1, Queue::Events);
        p.post(3, Queue::Events);
        p.post(3, Queue::Accept); // already posted elsewhere: no-op
        p.post(5, Queue::Events);
        p.post(0, Queue::Accept);
        assert_eq!(p.len(Queue::Events), 3);
        p.remove(1);
        p.remove(1);
        assert_eq!(p.pop(Queue::Events), Some(3));
        assert_eq!(p.pop(Queue::Events), Some(5));
        assert_eq!(p.pop(Queue::Events), None);
        assert!(p.is_empty(Queue::Events));
        assert_eq!(p.pop(Queue::Accept), Some(0));
        assert!(!p.is_posted(3));
        p.post(3, Queue::Events);
        assert!(p.is_posted(3));
    }
}
