//! Pydantic v2's lax-mode conversions, for the scalar types of Krayne's
//! `ClusterConfig` (an `int` or a `bool` field, validated in Python mode
//! as Krayne validates what PyYAML read). Ported from pydantic-core's
//! `str_as_int`, `float_as_int`, `str_as_bool` and `int_as_bool`; see
//! <https://docs.pydantic.dev/latest/concepts/conversion_table/>.

use serde_json::{Number, Value};

/// How a value reads as a field's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Lax<T> {
    /// Already of the type.
    Exact(T),
    /// Converted as pydantic's lax mode does; strict mode refuses it.
    Converted(T),
    /// Refused in every mode; says why.
    Invalid(String),
}

/// An `int` field: an integer; in lax mode also a boolean (`true` is 1),
/// a float without a fractional part (`2.0`), or a string of an integer
/// (`"2"`, `" +2 "`, `"1_000"`, `"2.00"`). `2.5` and `"2.5"` are refused.
pub(super) fn int(value: &Value) -> Lax<i128> {
    match value {
        Value::Number(n) => number_as_int(n),
        Value::Bool(b) => Lax::Converted(i128::from(*b)),
        Value::String(s) => match str_as_int(s) {
            Some(i) => Lax::Converted(i),
            None => Lax::Invalid(format!("must be a whole number, not {}", describe(value))),
        },
        other => Lax::Invalid(format!(
            "must be a whole number, not {}",
            krayne_proto::config::type_name(other)
        )),
    }
}

/// A `bool` field: a boolean; in lax mode also `0`/`1` (as integers or
/// floats) and the strings `0`, `1`, and, in any case, `f`, `n`, `no`,
/// `off`, `false`, `t`, `y`, `on`, `yes`, `true`.
pub(super) fn boolean(value: &Value) -> Lax<bool> {
    let refused = || Lax::Invalid(format!("must be true or false, not {}", describe(value)));
    match value {
        Value::Bool(b) => Lax::Exact(*b),
        Value::String(s) => str_as_bool(s).map_or_else(refused, Lax::Converted),
        Value::Number(n) => match number_as_int(n) {
            Lax::Exact(0) | Lax::Converted(0) => Lax::Converted(false),
            Lax::Exact(1) | Lax::Converted(1) => Lax::Converted(true),
            _ => refused(),
        },
        _ => refused(),
    }
}

/// The value as a warning or an error names it: `the string "2"`, `2.0`.
pub(super) fn describe(value: &Value) -> String {
    match value {
        // Enough to recognise the value; a document may hold 1 MiB strings.
        Value::String(s) => format!("the string {:?}", super::text::bounded(s, 64)),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => krayne_proto::config::type_name(other).to_owned(),
    }
}

fn number_as_int(n: &Number) -> Lax<i128> {
    if let Some(i) = n.as_i64() {
        return Lax::Exact(i128::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Lax::Exact(i128::from(u));
    }
    match n.as_f64() {
        Some(f) if !f.is_finite() => Lax::Invalid("must be a finite number".into()),
        // pydantic refuses floats outside i64 (`int_parsing_size`).
        Some(f) if f.fract() == 0.0 && f.abs() < 2f64.powi(63) => Lax::Converted(f as i128),
        Some(f) if f.fract() == 0.0 => Lax::Invalid("is too large".into()),
        _ => Lax::Invalid(format!("must be a whole number, not {n}")),
    }
}

/// pydantic-core's `str_as_int`: surrounding whitespace, one leading `+`
/// or `-`, leading zeros, a fractional part of only zeros and single
/// underscores between digits are allowed.
fn str_as_int(text: &str) -> Option<i128> {
    let mut s = text.trim();
    if let Some(rest) = s.strip_prefix('+') {
        if rest.starts_with('-') {
            return None;
        }
        s = rest;
    }
    let negative = match s.strip_prefix('-') {
        Some(rest) if rest.starts_with(['-', '+']) => return None,
        Some(rest) => {
            s = rest;
            true
        }
        None => false,
    };
    if let Some((whole, fraction)) = s.split_once('.')
        && !fraction.is_empty()
        && fraction.bytes().all(|b| b == b'0')
    {
        s = whole;
    }
    if s.starts_with('_') || s.ends_with('_') || s.contains("__") {
        return None;
    }
    let digits = s.replace('_', "");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Longer than any count is refused later by its bound; saturate.
    let magnitude = digits.parse::<i128>().unwrap_or(i128::MAX);
    Some(if negative { -magnitude } else { magnitude })
}

/// pydantic-core's `str_as_bool`: exact `0`/`1`, the other words in any
/// ASCII case, no surrounding whitespace.
fn str_as_bool(s: &str) -> Option<bool> {
    const FALSE: [&str; 5] = ["f", "n", "no", "off", "false"];
    const TRUE: [&str; 5] = ["t", "y", "on", "yes", "true"];
    if s == "0" || FALSE.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        Some(false)
    } else if s == "1" || TRUE.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        Some(true)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// pydantic v2 (Python mode, lax) on an `int` field, one row per input.
    #[test]
    fn int_follows_pydantics_table() {
        let converted = [
            (json!(true), 1),
            (json!(false), 0),
            (json!(2.0), 2),
            (json!(-0.0), 0),
            (json!("2"), 2),
            (json!(" 2 "), 2),
            (json!("+2"), 2),
            (json!("-2"), -2),
            (json!("002"), 2),
            (json!("2.0"), 2),
            (json!("2.000"), 2),
            (json!("1_000"), 1000),
            (json!("0"), 0),
        ];
        for (input, want) in converted {
            assert_eq!(int(&input), Lax::Converted(want), "{input}");
        }
        assert_eq!(int(&json!(3)), Lax::Exact(3));
        assert_eq!(int(&json!(-3)), Lax::Exact(-3));
        for refused in [
            json!(2.5),
            json!("2.5"),
            json!("2."),
            json!(".0"),
            json!("1e3"),
            json!("two"),
            json!(""),
            json!("_1"),
            json!("1__0"),
            json!("+-1"),
            json!("--1"),
            json!("0x10"),
            json!(null),
            json!([1]),
            json!({"a": 1}),
            json!(1e300),
        ] {
            assert!(matches!(int(&refused), Lax::Invalid(_)), "{refused} was accepted");
        }
    }

    /// pydantic v2 (Python mode, lax) on a `bool` field.
    #[test]
    fn boolean_follows_pydantics_table() {
        for (input, want) in [
            ("true", true),
            ("True", true),
            ("TRUE", true),
            ("yes", true),
            ("Yes", true),
            ("on", true),
            ("y", true),
            ("t", true),
            ("1", true),
            ("false", false),
            ("no", false),
            ("OFF", false),
            ("n", false),
            ("f", false),
            ("0", false),
        ] {
            assert_eq!(boolean(&json!(input)), Lax::Converted(want), "{input}");
        }
        assert_eq!(boolean(&json!(true)), Lax::Exact(true));
        assert_eq!(boolean(&json!(1)), Lax::Converted(true));
        assert_eq!(boolean(&json!(0)), Lax::Converted(false));
        assert_eq!(boolean(&json!(1.0)), Lax::Converted(true));
        assert_eq!(boolean(&json!(0.0)), Lax::Converted(false));
        for refused in [
            json!(2),
            json!(-1),
            json!(0.5),
            json!(" true"),
            json!("maybe"),
            json!("enabled"),
            json!(""),
            json!(null),
            json!([]),
        ] {
            assert!(matches!(boolean(&refused), Lax::Invalid(_)), "{refused} was accepted");
        }
    }
}
