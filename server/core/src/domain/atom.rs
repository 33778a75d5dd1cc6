//! [`Atom`]: an interned, shared, immutable string for the watch cache's
//! views.
//!
//! Ten thousand cached clusters repeat the same namespaces, label values,
//! images, port names, resource amounts and condition reasons in every
//! object; as `String`s each repetition was its own allocation. An atom is
//! one pointer to a string held once however often it occurs, and freed
//! when its last atom goes (`internment::ArcIntern`), so the interned set
//! follows what the cache holds rather than growing with every name ever
//! seen.

use std::{borrow::Borrow, fmt, hash::Hash, ops::Deref};

use internment::ArcIntern;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Short text an object has its own of (a resourceVersion, a pod IP, a
/// time): interning it would cost an interner entry for every object and
/// share nothing, so it is kept inline (up to 24 bytes) instead.
pub type ShortText = compact_str::CompactString;

/// A value many cached objects hold alike, held once: a worker group's
/// kept labels, its containers' names, what its pods charge. 200 000 Ray
/// pods come from 40 000 groups' templates, and each pod's own copies of
/// these were a third of its heap. Read through `Deref`; changed (in
/// tests) with [`Shared::edit`].
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Shared<T: Eq + Hash + Send + Sync + 'static>(ArcIntern<T>);

impl<T: Eq + Hash + Send + Sync + 'static> Shared<T> {
    /// The shared copy of `value`.
    pub fn new(value: T) -> Self {
        Self(ArcIntern::new(value))
    }

    /// Changes the value: a changed copy, shared in its turn.
    pub fn edit(&mut self, change: impl FnOnce(&mut T))
    where
        T: Clone,
    {
        let mut value = (*self.0).clone();
        change(&mut value);
        *self = Self::new(value);
    }
}

impl<T: Eq + Hash + Send + Sync + Default + 'static> Default for Shared<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: Eq + Hash + Send + Sync + 'static> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Eq + Hash + Send + Sync + fmt::Debug + 'static> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (*self.0).fmt(f)
    }
}

impl<T: Eq + Hash + Send + Sync + 'static> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

impl<'de, T: Eq + Hash + Send + Sync + Deserialize<'de> + 'static> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Self::new)
    }
}

/// An interned string: cloning is a reference-count increment, equal
/// atoms share one allocation.
#[derive(Clone, PartialEq, Eq)]
pub struct Atom(ArcIntern<str>);

impl Atom {
    /// The atom for `text`.
    pub fn new(text: &str) -> Self {
        Self(ArcIntern::from(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Atom {
    fn default() -> Self {
        Self::new("")
    }
}

impl Deref for Atom {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Atom {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

// `Borrow<str>` lets maps keyed by atoms be searched with a `&str`; that
// needs `Hash` and `Ord` to agree with `str`'s, so both go by the text
// (`ArcIntern` hashes its pointer). Equality by pointer agrees with
// equality by text: one text has one atom.
impl Borrow<str> for Atom {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl Hash for Atom {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for Atom {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Atom {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialEq<str> for Atom {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Atom {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Atom {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl From<&str> for Atom {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for Atom {
    fn from(text: String) -> Self {
        Self::new(&text)
    }
}

impl From<&Atom> for String {
    fn from(atom: &Atom) -> Self {
        atom.as_str().to_owned()
    }
}

impl fmt::Debug for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl Serialize for Atom {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self)
    }
}

impl<'de> Deserialize<'de> for Atom {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(Text)
    }
}

/// Reads a string as an atom without an owned copy on the way.
struct Text;

impl serde::de::Visitor<'_> for Text {
    type Value = Atom;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Atom, E> {
        Ok(Atom::new(v))
    }
}

/// An owned copy of an optional atom's (or short text's) text, for the
/// API's types.
pub fn owned<T: Deref<Target = str>>(text: Option<&T>) -> Option<String> {
    text.map(|t| (**t).to_owned())
}

/// Reads a JSON scalar as an atom of its text: strings as they are,
/// numbers and booleans as written (`2` → `"2"`), `null` as `""`. For
/// values the CRD types as strings that manifests often write as numbers
/// (`rayStartParams`, resource quantities, a service's `targetPort`).
pub fn scalar<'de, D: Deserializer<'de>>(d: D) -> Result<Atom, D::Error> {
    struct Scalar;
    impl serde::de::Visitor<'_> for Scalar {
        type Value = Atom;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string, number, boolean or null")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Atom, E> {
            Ok(Atom::new(v))
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Atom, E> {
            Ok(Atom::new(if v { "true" } else { "false" }))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Atom, E> {
            Ok(Atom::new(&v.to_string()))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Atom, E> {
            Ok(Atom::new(&v.to_string()))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Atom, E> {
            Ok(Atom::new(
                &serde_json::Number::from_f64(v).map_or_else(String::new, |n| n.to_string()),
            ))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Atom, E> {
            Ok(Atom::default())
        }
    }
    d.deserialize_any(Scalar)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde_json::json;

    use super::*;

    #[test]
    fn equal_texts_share_one_atom_and_maps_find_them_by_str() {
        let a = Atom::new("ray-demo");
        let b: Atom = serde_json::from_value(json!("ray-demo")).unwrap();
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        let hashed: HashMap<Atom, u8> = [(a.clone(), 1)].into();
        let sorted: BTreeMap<Atom, u8> = [(Atom::new("b"), 2), (a, 1)].into();
        assert_eq!(hashed.get("ray-demo"), Some(&1));
        assert_eq!(sorted.keys().map(Atom::as_str).collect::<Vec<_>>(), ["b", "ray-demo"]);
        let after_b = (std::ops::Bound::Excluded("b"), std::ops::Bound::Unbounded);
        assert_eq!(sorted.range::<str, _>(after_b).count(), 1);
    }

    #[test]
    fn scalars_read_as_their_text() {
        #[derive(Deserialize)]
        struct S(#[serde(deserialize_with = "scalar")] Atom);
        let read = |v| serde_json::from_value::<S>(v).unwrap().0.to_string();
        assert_eq!(read(json!("2Gi")), "2Gi");
        assert_eq!(read(json!(2)), "2");
        assert_eq!(read(json!(-1)), "-1");
        assert_eq!(read(json!(0.5)), "0.5");
        assert_eq!(read(json!(true)), "true");
        assert_eq!(read(json!(null)), "");
        assert!(serde_json::from_value::<S>(json!([1])).is_err());
    }

    #[test]
    fn clones_count_on_one_interned_text() {
        // `ArcIntern` frees the text when this count reaches zero.
        let a = Atom::new("clones_count_on_one_interned_text");
        let b = a.clone();
        assert_eq!(a.0.refcount(), 2);
        drop(b);
        assert_eq!(a.0.refcount(), 1);
    }
}
