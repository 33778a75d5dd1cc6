//! Kubernetes name rules: DNS-1035 and DNS-1123 labels.

/// KubeRay derives pod and service names from the cluster name, so it caps
/// cluster names well below the 63 characters of a label.
pub const MAX_CLUSTER_NAME_LEN: usize = 53;

const MAX_LABEL_LEN: usize = 63;
const MAX_SUBDOMAIN_LEN: usize = 253;

/// Checks a DNS-1035 label (`[a-z]([-a-z0-9]*[a-z0-9])?`) of at most `max`
/// characters; the error says what is wrong, as Kubernetes would.
pub fn check_dns1035_label(value: &str, max: usize) -> Result<(), String> {
    check_label(value, max, false)
}

/// Checks a DNS-1123 label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, ≤ 63).
pub fn check_dns1123_label(value: &str) -> Result<(), String> {
    check_label(value, MAX_LABEL_LEN, true)
}

/// Checks a DNS-1123 subdomain (dot-separated labels, ≤ 253): the name rule
/// the API server applies to most objects, custom resources included.
pub fn check_dns1123_subdomain(value: &str) -> Result<(), String> {
    if value.len() > MAX_SUBDOMAIN_LEN {
        return Err(format!("must be no more than {MAX_SUBDOMAIN_LEN} characters"));
    }
    // Labels are bounded by the whole (unlike DNS), as in Kubernetes.
    value.split('.').try_for_each(|label| check_label(label, MAX_SUBDOMAIN_LEN, true)).map_err(|_| {
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".into()
    })
}

fn check_label(value: &str, max: usize, digit_first: bool) -> Result<(), String> {
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    if value.chars().count() > max {
        return Err(format!("must be no more than {max} characters"));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let first_ok = |c: char| c.is_ascii_lowercase() || (digit_first && c.is_ascii_digit());
    let last_ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let valid = value.chars().all(ok_char)
        && value.chars().next().is_some_and(first_ok)
        && value.chars().last().is_some_and(last_ok);
    if valid {
        return Ok(());
    }
    Err(if digit_first {
        "must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character".into()
    } else {
        "must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1035_accepts_labels_up_to_the_limit() {
        assert!(check_dns1035_label("a", 53).is_ok());
        assert!(check_dns1035_label("my-cluster-2", 53).is_ok());
        assert!(check_dns1035_label(&"a".repeat(53), 53).is_ok());
    }

    #[test]
    fn dns1035_rejects_bad_labels() {
        for bad in ["", "1abc", "-abc", "abc-", "ABC", "a_b", "a.b", "é"] {
            assert!(check_dns1035_label(bad, 53).is_err(), "{bad:?}");
        }
        let long = check_dns1035_label(&"a".repeat(54), 53).unwrap_err();
        assert_eq!(long, "must be no more than 53 characters");
    }

    #[test]
    fn dns1123_allows_a_leading_digit() {
        assert!(check_dns1123_label("1gpu").is_ok());
        assert!(check_dns1123_label(&"a".repeat(63)).is_ok());
        for bad in ["", "-a", "a-", "A", &"a".repeat(64)] {
            assert!(check_dns1123_label(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn subdomains_are_dotted_labels_up_to_253() {
        assert!(check_dns1123_subdomain("ray.io").is_ok());
        assert!(check_dns1123_subdomain(&[&*"a".repeat(63); 3].join(".")).is_ok());
        assert!(check_dns1123_subdomain(&"a".repeat(200)).is_ok(), "no limit per label");
        for bad in [
            "",
            ".a",
            "a.",
            "a..b",
            "A.b",
            "a\0b",
            &"a".repeat(254),
            &"a.".repeat(127),
        ] {
            assert!(check_dns1123_subdomain(bad).is_err(), "{bad:?}");
        }
    }
}
