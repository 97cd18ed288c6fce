//! Giving back the room of the bookkeeping's maps after a big drain (a heal of every object):
//! a hash map or queue never shrinks by itself, so without this the peak would stay.

use std::{
    collections::{HashMap, VecDeque},
    hash::Hash,
};

/// Shrinks `map` to twice its length once under a quarter full: O(1) per removal.
pub(super) fn shrink<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > SHRINK_FROM && map.len() < map.capacity() / 4 {
        map.shrink_to(map.len() * 2);
    }
}

/// [`shrink`] for a queue.
pub(super) fn shrink_deque<T>(deque: &mut VecDeque<T>) {
    if deque.capacity() > SHRINK_FROM && deque.len() < deque.capacity() / 4 {
        deque.shrink_to(deque.len() * 2);
    }
}

/// Room below which a map is left as it is.
const SHRINK_FROM: usize = 64;
