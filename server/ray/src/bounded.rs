//! Collections read from a head's JSON that hold at most `N` entries: the
//! rest of the array or object is skipped without being kept
//! ([`serde::de::IgnoredAny`]), and [`Bounded::truncated`] says so. A
//! head's answer is the tenant's; its size is capped before it is read, and
//! these keep what is parsed from it from growing past what krayne uses
//! (a 4 MiB `[{},{},…]` would otherwise be two million parsed jobs).

use std::{fmt, marker::PhantomData};

use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, MapAccess, SeqAccess, Visitor},
};

/// At most `N` items, in the order the head sent them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bounded<T, const N: usize> {
    /// The first `N` items.
    pub(crate) items: Vec<T>,
    /// Whether the head sent more than `N`.
    pub(crate) truncated: bool,
}

impl<T, const N: usize> Default for Bounded<T, N> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            truncated: false,
        }
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Bounded<T, N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(SeqVisitor(PhantomData))
    }
}

struct SeqVisitor<T, const N: usize>(PhantomData<T>);

impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for SeqVisitor<T, N> {
    type Value = Bounded<T, N>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an array (at most {N} items are read)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut bounded = Bounded::default();
        while bounded.items.len() < N {
            match seq.next_element()? {
                Some(item) => bounded.items.push(item),
                None => return Ok(bounded),
            }
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {
            bounded.truncated = true;
        }
        Ok(bounded)
    }
}

/// At most `N` entries of a JSON object, keyed by text, in the order the
/// head sent them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoundedMap<V, const N: usize> {
    /// The first `N` entries.
    pub(crate) entries: Vec<(String, V)>,
    /// Whether the head sent more than `N`.
    pub(crate) truncated: bool,
}

impl<V, const N: usize> Default for BoundedMap<V, N> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            truncated: false,
        }
    }
}

impl<'de, V: Deserialize<'de>, const N: usize> Deserialize<'de> for BoundedMap<V, N> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MapVisitor(PhantomData))
    }
}

struct MapVisitor<V, const N: usize>(PhantomData<V>);

impl<'de, V: Deserialize<'de>, const N: usize> Visitor<'de> for MapVisitor<V, N> {
    type Value = BoundedMap<V, N>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an object (at most {N} entries are read)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut bounded = BoundedMap::default();
        while bounded.entries.len() < N {
            match map.next_entry::<String, V>()? {
                Some(entry) => bounded.entries.push(entry),
                None => return Ok(bounded),
            }
        }
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
            bounded.truncated = true;
        }
        Ok(bounded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_items_are_skipped_and_said_to_be() {
        let few: Bounded<u8, 3> = serde_json::from_str("[1, 2]").unwrap();
        assert_eq!((few.items, few.truncated), (vec![1, 2], false));
        let many: Bounded<u8, 3> = serde_json::from_str("[1, 2, 3, 4, {\"x\": [5]}]").unwrap();
        assert_eq!((many.items, many.truncated), (vec![1, 2, 3], true));
        let exact: Bounded<u8, 2> = serde_json::from_str("[1, 2]").unwrap();
        assert!(!exact.truncated);
        let map: BoundedMap<u8, 1> = serde_json::from_str(r#"{"a": 1, "b": 2}"#).unwrap();
        assert_eq!(map.entries, vec![("a".to_owned(), 1)]);
        assert!(map.truncated);
        assert!(serde_json::from_str::<Bounded<u8, 3>>("{}").is_err());
    }

    #[test]
    fn nesting_past_serde_jsons_limit_is_an_error_not_a_crash() {
        let deep = format!("[{}{}]", "[".repeat(100_000), "]".repeat(100_000));
        // Skipped without recursion, or refused past 128 levels: either
        // way no stack is spent on it.
        let skipped = serde_json::from_str::<Bounded<IgnoredAny, 3>>(&deep);
        assert!(skipped.is_ok_and(|b| b.items.len() == 1));
        assert!(serde_json::from_str::<Bounded<serde_json::Value, 3>>(&deep).is_err());
    }
}
