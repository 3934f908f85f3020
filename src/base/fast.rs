//! Hash maps and sets for hot paths: foldhash instead of SipHash, seeded per process (keys an
//! outsider chooses still do not collide predictably).

pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
