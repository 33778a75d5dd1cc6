//! [`Uid`]: an object's `metadata.uid`, held in its 16 bytes.

use std::{borrow::Cow, fmt};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An object's uid. Kubernetes gives every object a UUID, written
/// lowercase and hyphenated: held as its 16 bytes, 24 bytes in all and no
/// allocation, where a boxed string cost 64 for each of a large platform's
/// 200 000 pods. Any other text (an API server may write what it likes) is
/// kept as it is, so the text always reads back exactly.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Uid {
    /// A UUID written as Kubernetes writes them.
    Uuid(uuid::Uuid),
    /// Any other uid, as written.
    Text(Box<str>),
}

impl Uid {
    /// The uid written `text`.
    pub fn new(text: &str) -> Self {
        match uuid::Uuid::try_parse(text) {
            Ok(uuid) if canonical(&uuid, text) => Self::Uuid(uuid),
            _ => Self::Text(text.into()),
        }
    }

    /// As written.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Self::Uuid(uuid) => Cow::Owned(uuid.hyphenated().to_string()),
            Self::Text(text) => Cow::Borrowed(text),
        }
    }
}

/// Whether `text` is `uuid` as Kubernetes writes one (so it reads back
/// the same).
fn canonical(uuid: &uuid::Uuid, text: &str) -> bool {
    let mut buffer = uuid::Uuid::encode_buffer();
    uuid.hyphenated().encode_lower(&mut buffer) == text
}

impl From<&str> for Uid {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl PartialEq<str> for Uid {
    fn eq(&self, other: &str) -> bool {
        match self {
            Self::Uuid(uuid) => canonical(uuid, other),
            Self::Text(text) => **text == *other,
        }
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uuid(uuid) => fmt::Display::fmt(&uuid.hyphenated(), f),
            Self::Text(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text(), f)
    }
}

impl Serialize for Uid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Uid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Uid;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Uid, E> {
                Ok(Uid::new(v))
            }
        }
        d.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_reads_back_as_written_and_a_kubernetes_one_takes_no_allocation() {
        let kubernetes = "0d9c4f5e-6a7b-4c8d-9e0f-123456789abc";
        let uid: Uid = serde_json::from_str(&format!("\"{kubernetes}\"")).unwrap();
        assert!(matches!(uid, Uid::Uuid(_)));
        assert_eq!(uid.text(), kubernetes);
        assert_eq!(uid.to_string(), kubernetes);
        assert_eq!(serde_json::to_string(&uid).unwrap(), format!("\"{kubernetes}\""));
        assert!(uid == *kubernetes);
        assert!(uid != *"0D9C4F5E-6A7B-4C8D-9E0F-123456789ABC");
        // Not as Kubernetes writes them: kept as text, exactly.
        for other in [
            "0D9C4F5E-6A7B-4C8D-9E0F-123456789ABC",
            "0d9c4f5e6a7b4c8d9e0f123456789abc",
            "ml",
            "",
        ] {
            let uid = Uid::new(other);
            assert!(matches!(uid, Uid::Text(_)), "{other}");
            assert_eq!(uid.text(), other);
            assert!(uid == *other);
        }
        assert_eq!(size_of::<Option<Uid>>(), 24);
    }
}
