//! Byte sizes in Kubernetes quantity syntax: `64Mi`, `1Gi`, `500M`, `1.5Ki`, `1e6`, `1048576`.

/// The binary suffixes: 1024 to the power of their place, from 1.
const BINARY_SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
/// The decimal suffixes: 1000 to the power of their place, from 1.
const DECIMAL_SUFFIXES: [&str; 6] = ["k", "M", "G", "T", "P", "E"];

/// Parses a quantity into a whole number of bytes. Binary suffixes (`Ki`, `Mi`, `Gi`, `Ti`, `Pi`,
/// `Ei`) are powers of 1024, decimal ones (`k`, `M`, `G`, `T`, `P`, `E`) powers of 1000, and
/// `e`/`E` followed by an integer is a decimal exponent, as in Kubernetes. Negative values,
/// milli (`m`) and fractions of a byte are errors.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let expected = "expected a quantity such as 64Mi, 1Gi, 500M or 1048576";
    let body = text.strip_prefix('+').unwrap_or(text);
    if body.starts_with('-') {
        return Err(format!("'{text}' is negative; {expected}"));
    }
    let number_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_end);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(format!("'{text}' is not a quantity; {expected}"));
    }
    // value = digits / 10^frac_len * base^power
    let (base, power) = match suffix_scale(suffix) {
        Some(scale) => scale,
        None if suffix == "m" => {
            return Err(format!(
                "'{text}' is in thousandths; a size needs whole bytes"
            ))
        }
        None if suffix.starts_with(['e', 'E']) => match suffix[1..].parse::<u32>() {
            Ok(exp) if exp <= 30 => (10, exp),
            _ => return Err(format!("'{text}' has an invalid exponent; {expected}")),
        },
        None => {
            return Err(format!(
                "'{text}' has an unknown suffix '{suffix}'; use {} (powers of 1024) or {} \
                 (powers of 1000)",
                BINARY_SUFFIXES.join(", "),
                DECIMAL_SUFFIXES.join(", ")
            ))
        }
    };
    let too_large = || format!("'{text}' is too large");
    let digits: u128 = format!("{int}{frac}").parse().map_err(|_| too_large())?;
    let scale = 10u128
        .checked_pow(frac.len() as u32)
        .ok_or_else(too_large)?;
    let multiplier = base.checked_pow(power).ok_or_else(too_large)?;
    let scaled = digits.checked_mul(multiplier).ok_or_else(too_large)?;
    if scaled % scale != 0 {
        return Err(format!("'{text}' is not a whole number of bytes"));
    }
    u64::try_from(scaled / scale).map_err(|_| too_large())
}

/// The (base, power) of a multiplier `suffix`; (1, 0) for none.
fn suffix_scale(suffix: &str) -> Option<(u128, u32)> {
    if suffix.is_empty() {
        return Some((1, 0));
    }
    let power = |table: &[&str]| {
        let place = table.iter().position(|s| *s == suffix)?;
        u32::try_from(place + 1).ok()
    };
    power(&BINARY_SUFFIXES)
        .map(|p| (1024, p))
        .or_else(|| power(&DECIMAL_SUFFIXES).map(|p| (1000, p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_quantities() {
        let cases = [
            ("0", 0),
            ("1048576", 1 << 20),
            ("64Mi", 64 << 20),
            ("1Gi", 1 << 30),
            ("1.5Ki", 1536),
            ("500M", 500_000_000),
            ("2k", 2000),
            ("1e6", 1_000_000),
            ("1E3", 1000),
            ("+1Ki", 1024),
            ("0.5Mi", 512 << 10),
            ("8Ei", 8 << 60),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_bytes(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn rejects_what_is_not_a_size() {
        for (text, message) in [
            ("64MB", "unknown suffix 'MB'"),
            ("64mi", "unknown suffix 'mi'"),
            ("-1Mi", "is negative"),
            ("100m", "thousandths"),
            ("0.5", "not a whole number of bytes"),
            ("Mi", "is not a quantity"),
            ("1.2.3", "is not a quantity"),
            ("", "is not a quantity"),
            ("16Ei", "too large"),
            ("1e", "invalid exponent"),
        ] {
            let err = parse_bytes(text).unwrap_err();
            assert!(err.contains(message), "{text}: {err}");
        }
        assert_eq!(
            parse_bytes("64MB").unwrap_err(),
            "'64MB' has an unknown suffix 'MB'; use Ki, Mi, Gi, Ti, Pi, Ei (powers of 1024) or \
             k, M, G, T, P, E (powers of 1000)"
        );
    }
}
