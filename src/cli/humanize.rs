//! Numbers for people, as the commands print them: ages the way kubectl prints them, byte sizes
//! in binary units, counts with thousands separators. Shared by the client commands' output and
//! `bench`'s table.

/// An age the way kubectl prints it: `45s`, `3m20s`, `2h5m`, `3d4h`, `400d`, `2y10d`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        two_units(m, "m", s % 60, "s")
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        two_units(h, "h", m % 60, "m")
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        two_units(d, "d", h % 24, "h")
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        two_units(d / 365, "y", d % 365, "d")
    } else {
        format!("{}y", d / 365)
    }
}

/// `3m20s`, or `3m` when the smaller unit is zero.
fn two_units(large: i64, large_unit: &str, small: i64, small_unit: &str) -> String {
    if small == 0 {
        format!("{large}{large_unit}")
    } else {
        format!("{large}{large_unit}{small}{small_unit}")
    }
}

/// Bytes for people: `812B`, `4.7KiB`, `12.3MiB`, `1.1GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{}", UNITS[unit])
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_like_kubectl() {
        for (seconds, age) in [
            (5, "5s"),
            (119, "119s"),
            (200, "3m20s"),
            (1200, "20m"),
            (3 * 3600 + 300, "3h5m"),
            (20 * 3600, "20h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (400 * 86400, "400d"),
            (3 * 365 * 86400 + 10 * 86400, "3y10d"),
            (-5, "<invalid>"),
        ] {
            assert_eq!(human_duration(seconds), age, "{seconds} seconds");
        }
    }

    #[test]
    fn bytes_for_people() {
        for (bytes, text) in [(812, "812B"), (4813, "4.7KiB"), (12_900_000, "12.3MiB")] {
            assert_eq!(human_bytes(bytes), text);
        }
    }

    #[test]
    fn thousands_separators() {
        for (n, text) in [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (1234567, "1,234,567"),
        ] {
            assert_eq!(thousands(n), text);
        }
    }
}
