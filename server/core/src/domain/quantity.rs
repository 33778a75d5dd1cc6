//! Kubernetes resource quantities (`500m`, `2`, `4Gi`, `1e3`), parsed exactly.
//!
//! No maintained crate parses quantities without tying itself to one
//! `k8s-openapi` release, so this is a small parser of the grammar in
//! `k8s.io/apimachinery/pkg/api/resource`, kept exact by counting nano-units
//! in a `u128` (values finer than a nano-unit round up, as Kubernetes does).

use std::{cmp::Ordering, fmt, str::FromStr};

/// A parsed, non-negative quantity; keeps the text it was written as.
#[derive(Debug, Clone)]
pub struct Quantity {
    text: String,
    nanos: u128,
}

/// Why a string is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not of the quantity grammar.
    #[error("must be a Kubernetes quantity such as \"500m\", \"2\" or \"4Gi\"")]
    Syntax,
    /// Below zero.
    #[error("must not be negative")]
    Negative,
    /// Too large to represent exactly.
    #[error("is too large")]
    TooLarge,
}

const NANOS_PER_UNIT: u128 = 1_000_000_000;

impl Quantity {
    /// `1`.
    pub fn one() -> Self {
        Self {
            text: "1".to_owned(),
            nanos: NANOS_PER_UNIT,
        }
    }

    /// The quantity as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The value in nano-units (`1` → 1 000 000 000).
    pub fn nanos(&self) -> u128 {
        self.nanos
    }

    /// The value as a plain decimal without trailing zeros, as Ray expects
    /// numbers: `2500m` → `2.5`, `2` → `2`, `1k` → `1000`.
    pub fn to_decimal_string(&self) -> String {
        decimal(self.nanos)
    }
}

/// `nanos` nano-units as a plain decimal without trailing zeros
/// (`2_500_000_000` → `2.5`).
pub(super) fn decimal(nanos: u128) -> String {
    let whole = nanos / NANOS_PER_UNIT;
    let frac = nanos % NANOS_PER_UNIT;
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:09}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let split = unsigned
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(split);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
            return Err(QuantityError::Syntax);
        }
        let (exp10, exp2) = suffix_exponents(suffix)?;
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 36 {
            return Err(QuantityError::TooLarge);
        }
        let mantissa: u128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| QuantityError::Syntax)?
        };
        let frac_len = i32::try_from(frac_part.len()).map_err(|_| QuantityError::TooLarge)?;
        let nanos = scale(mantissa, exp10 + 9 - frac_len, exp2)?;
        if negative && nanos > 0 {
            return Err(QuantityError::Negative);
        }
        Ok(Self {
            text: text.to_owned(),
            nanos,
        })
    }
}

/// (power of ten, power of two) a suffix multiplies by.
fn suffix_exponents(suffix: &str) -> Result<(i32, u32), QuantityError> {
    let pair = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exponent = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or(QuantityError::Syntax)?;
            let digits = exponent.trim_start_matches(['+', '-']);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || exponent.len() - digits.len() > 1 {
                return Err(QuantityError::Syntax);
            }
            let value: i32 = exponent.parse().map_err(|_| QuantityError::TooLarge)?;
            if value.abs() > 60 {
                return Err(QuantityError::TooLarge);
            }
            (value, 0)
        }
    };
    Ok(pair)
}

/// `mantissa × 10^exp10 × 2^exp2`, rounded up to a whole number.
fn scale(mantissa: u128, exp10: i32, exp2: u32) -> Result<u128, QuantityError> {
    let shifted = mantissa.checked_mul(1u128 << exp2).ok_or(QuantityError::TooLarge)?;
    let power = |e: i32| 10u128.checked_pow(e.unsigned_abs());
    if exp10 >= 0 {
        power(exp10)
            .and_then(|p| shifted.checked_mul(p))
            .ok_or(QuantityError::TooLarge)
    } else {
        Ok(match power(exp10) {
            Some(p) => shifted.div_ceil(p),
            None => u128::from(shifted > 0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        s.parse().unwrap()
    }

    #[test]
    fn parses_every_suffix_family() {
        assert_eq!(q("1").nanos(), 1_000_000_000);
        assert_eq!(q("500m").nanos(), 500_000_000);
        assert_eq!(q("2500m").nanos(), 2_500_000_000);
        assert_eq!(q("1.5").nanos(), 1_500_000_000);
        assert_eq!(q(".5").nanos(), 500_000_000);
        assert_eq!(q("5.").nanos(), 5_000_000_000);
        assert_eq!(q("1k").nanos(), 1_000_000_000_000);
        assert_eq!(q("4Gi").nanos(), 4 * (1u128 << 30) * 1_000_000_000);
        assert_eq!(q("4G").nanos(), 4_000_000_000 * 1_000_000_000);
        assert_eq!(q("1e3").nanos(), q("1k").nanos());
        assert_eq!(q("1E-3").nanos(), q("1m").nanos());
        assert_eq!(q("+2").nanos(), q("2").nanos());
        assert_eq!(q("7n").nanos(), 7);
        assert_eq!(q("1u").nanos(), 1_000);
        assert!(q("0").is_zero());
        assert!(q("-0").is_zero());
    }

    #[test]
    fn rounds_sub_nano_values_up() {
        assert_eq!(q("0.1n").nanos(), 1);
        assert_eq!(q("1e-20").nanos(), 1);
    }

    #[test]
    fn compares_by_value_not_text() {
        assert!(q("4G") < q("4Gi"));
        assert!(q("4096Mi") == q("4Gi"));
        assert!(q("1000m") == q("1"));
        assert!(q("500m") < q("1"));
        assert!(q("8G") > q("4Gi"));
        assert_eq!(q("4096Mi").as_str(), "4096Mi");
    }

    #[test]
    fn formats_as_ray_numbers() {
        assert_eq!(q("2500m").to_decimal_string(), "2.5");
        assert_eq!(q("2").to_decimal_string(), "2");
        assert_eq!(q("2.0").to_decimal_string(), "2");
        assert_eq!(q("1000m").to_decimal_string(), "1");
        assert_eq!(q("1k").to_decimal_string(), "1000");
        assert_eq!(q("1.25").to_decimal_string(), "1.25");
        assert_eq!(q("1n").to_decimal_string(), "0.000000001");
    }

    #[test]
    fn rejects_what_kubernetes_rejects() {
        for bad in [
            "", "m", "abc", "1.2.3", "1x", "1KI", "1 Gi", " 1", "1e", "1e+", "1e--1", "1ee2", "Gi", "1.5.Gi", "--1",
            "1i",
        ] {
            assert_eq!(bad.parse::<Quantity>().unwrap_err(), QuantityError::Syntax, "{bad:?}");
        }
        assert_eq!("-1".parse::<Quantity>().unwrap_err(), QuantityError::Negative);
        assert_eq!("-500m".parse::<Quantity>().unwrap_err(), QuantityError::Negative);
    }

    #[test]
    fn refuses_values_too_large_to_hold() {
        for big in ["1e61", "99999999999999999999999999999999999999", "1000000000000Ei"] {
            assert_eq!(big.parse::<Quantity>().unwrap_err(), QuantityError::TooLarge, "{big:?}");
        }
    }
}
