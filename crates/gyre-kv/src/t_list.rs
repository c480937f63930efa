//! Lists (Redis's `t_list.c`): the list commands over a [`Quicklist`].
//! OBJECT ENCODING answers `quicklist` for every list, as Redis 7.0 does.

use crate::quicklist::Quicklist;

pub type ListObj = Quicklist;
