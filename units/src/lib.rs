//! Quantities with units, as people write them on command lines and in configuration files:
//! sizes (`64KB`, `100M`), durations (`10ms`, `2min`), rates (`100mbit`), counts and booleans.
//! Values are held in the project's canonical units: bytes, µs, bytes/s.

/// The unit a parameter is expressed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Bytes; accepts `B`, `KB`, `MB`, `GB` (powers of 1000) and `KiB`, `MiB`, `GiB`.
    Bytes,
    /// Packets (segments); accepts an optional `pkts` suffix.
    Packets,
    /// A duration stored in µs; accepts `us`, `ms`, `s`.
    Micros,
    /// A rate stored in bytes/s; accepts `bit`, `kbit`, `mbit`, `gbit` (and `bps` forms) or `Bps`.
    Rate,
    /// A dimensionless number.
    Number,
    /// A whole count.
    Count,
    /// `true` / `false`.
    Bool,
    /// Text kept as written (a name, a list, an expression); its canonical number is 0 and the
    /// parameter set keeps the text.
    Text,
}

impl Unit {
    /// How a person should write a value of this unit.
    pub fn expected(self) -> &'static str {
        match self {
            Unit::Bytes => "a size in bytes, e.g. 15000, 64KB, 100M or 1MiB",
            Unit::Packets => "a number of packets, e.g. 10 or 10pkts",
            Unit::Micros => "a duration, e.g. 500us, 10ms or 1s (a bare number is µs)",
            Unit::Rate => {
                "a rate, e.g. 100mbit, 1gbit, 500kbit or 12500000Bps (a bare number is bytes/s)"
            }
            Unit::Number => "a number, e.g. 0.7",
            Unit::Count => "a whole number, e.g. 3",
            Unit::Bool => "true or false",
            Unit::Text => "text, e.g. a name (bbr), a list (cubic+copa) or an expression",
        }
    }

    /// Short unit label for listings.
    pub fn label(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Packets => "packets",
            Unit::Micros => "µs",
            Unit::Rate => "bytes/s",
            Unit::Number => "number",
            Unit::Count => "count",
            Unit::Bool => "bool",
            Unit::Text => "text",
        }
    }

    /// Parse `text` in this unit into the canonical value.
    pub fn parse(self, text: &str) -> Result<f64, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("empty value".into());
        }
        if self == Unit::Text {
            return Ok(0.0);
        }
        if self == Unit::Bool {
            return match t {
                "true" | "yes" | "on" | "1" => Ok(1.0),
                "false" | "no" | "off" | "0" => Ok(0.0),
                _ => Err(format!("{t:?} is not {}", self.expected())),
            };
        }
        let split = t
            .find(|c: char| {
                !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')
            })
            .unwrap_or(t.len());
        // "1e3" is a number, but "1ms" must split at 'm'; an 'e' directly followed by a letter is a suffix.
        let (num, suffix) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("{t:?} is not {}", self.expected()))?;
        if !value.is_finite() || value < 0.0 {
            return Err(format!("{t:?} must be a finite, non-negative value"));
        }
        let suffix = suffix.trim();
        // Rates may be written per second: `10Mbit/s`, `500kbit/s`.
        let suffix = match self {
            Unit::Rate => suffix.strip_suffix("/s").unwrap_or(suffix),
            _ => suffix,
        };
        let scale = match (self, suffix) {
            (_, "") => 1.0,
            (Unit::Bytes, "B") => 1.0,
            (Unit::Bytes, "KB" | "kB" | "K" | "k") => 1e3,
            (Unit::Bytes, "MB" | "M") => 1e6,
            (Unit::Bytes, "GB" | "G") => 1e9,
            (Unit::Bytes, "KiB") => 1024.0,
            (Unit::Bytes, "MiB") => 1024.0 * 1024.0,
            (Unit::Bytes, "GiB") => 1024.0 * 1024.0 * 1024.0,
            (Unit::Packets, "pkt" | "pkts" | "packets") => 1.0,
            (Unit::Micros, "us" | "µs") => 1.0,
            (Unit::Micros, "ms") => 1e3,
            (Unit::Micros, "s") => 1e6,
            (Unit::Micros, "min") => 60e6,
            (Unit::Rate, "Bps") => 1.0,
            (Unit::Rate, "bit" | "bps") => 1.0 / 8.0,
            (Unit::Rate, "kbit" | "kbps" | "Kbit" | "Kbps") => 1e3 / 8.0,
            (Unit::Rate, "mbit" | "mbps" | "Mbit" | "Mbps") => 1e6 / 8.0,
            (Unit::Rate, "gbit" | "gbps" | "Gbit" | "Gbps") => 1e9 / 8.0,
            _ => {
                return Err(format!(
                    "unit {suffix:?} does not fit: expected {}",
                    self.expected()
                ));
            }
        };
        let v = value * scale;
        if matches!(self, Unit::Count | Unit::Packets) && v.fract() != 0.0 {
            return Err(format!("{t:?} is not {}", self.expected()));
        }
        Ok(v)
    }

    /// Render a canonical value for people.
    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Bool => (v != 0.0).to_string(),
            Unit::Text => String::new(),
            Unit::Micros if v >= 1000.0 => format!("{}ms", v / 1000.0),
            Unit::Micros => format!("{v}us"),
            Unit::Rate => format!("{}mbit", v * 8.0 / 1e6),
            Unit::Bytes => format!("{v}B"),
            Unit::Packets => format!("{v}pkts"),
            _ => format!("{v}"),
        }
    }
}

/// Parse a size such as `100M` or `64KiB` into bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    Unit::Bytes.parse(text).map(|v| v as u64)
}

/// Parse a duration such as `30s` or `250ms`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    Unit::Micros
        .parse(text)
        .map(|us| std::time::Duration::from_micros(us as u64))
}

/// Refuse a bare number other than 0 (which means the same in every unit), suggesting `units`.
fn refuse_bare(text: &str, units: [&str; 3]) -> Result<(), String> {
    let t = text.trim();
    if t.parse::<f64>().is_ok_and(|v| v.is_finite() && v != 0.0) {
        let [a, b, c] = units;
        return Err(format!(
            "{text:?} has no unit; write e.g. {t}{a}, {t}{b} or {t}{c}"
        ));
    }
    Ok(())
}

/// As [`parse_duration`], but a bare number other than 0 is refused: on a command line
/// `--time 30` would otherwise be 30 µs, not the 30 s a person means.
pub fn parse_duration_with_unit(text: &str) -> Result<std::time::Duration, String> {
    refuse_bare(text, ["s", "ms", "us"])?;
    parse_duration(text).map_err(|_| {
        format!("{text:?} is not a duration with a unit, e.g. 500us, 10ms or 1s (0 needs none)")
    })
}

/// Parse a rate such as `50mbit` into bytes/s.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    Unit::Rate.parse(text).map(|v| v as u64)
}

/// As [`parse_rate`], but a bare number other than 0 is refused: `--rate 100` would otherwise
/// be 100 bytes/s, not the 100 Mbit/s a person means.
pub fn parse_rate_with_unit(text: &str) -> Result<u64, String> {
    refuse_bare(text, ["mbit", "kbit", "Bps"])?;
    parse_rate(text).map_err(|_| {
        format!("{text:?} is not a rate with a unit, e.g. 100mbit, 500kbit or 12500000Bps (0 needs none)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_parse_and_scale() {
        assert_eq!(Unit::Micros.parse("10ms").unwrap(), 10_000.0);
        assert_eq!(Unit::Micros.parse("1s").unwrap(), 1e6);
        assert_eq!(Unit::Micros.parse("250").unwrap(), 250.0);
        assert_eq!(Unit::Rate.parse("100mbit").unwrap(), 12_500_000.0);
        assert_eq!(Unit::Rate.parse("100Mbit/s").unwrap(), 12_500_000.0);
        assert_eq!(Unit::Rate.parse("10kbit/s").unwrap(), 1_250.0);
        assert!(Unit::Micros.parse("10ms/s").is_err());
        assert_eq!(
            parse_duration_with_unit("30s").unwrap(),
            std::time::Duration::from_secs(30)
        );
        let e = parse_duration_with_unit("30").unwrap_err();
        assert!(e.contains("no unit; write e.g. 30s"), "{e}");
        assert_eq!(
            parse_duration_with_unit("0").unwrap(),
            std::time::Duration::ZERO
        );
        let e = parse_rate_with_unit("100").unwrap_err();
        assert!(e.contains("no unit; write e.g. 100mbit"), "{e}");
        assert_eq!(parse_rate_with_unit("100mbit").unwrap(), 12_500_000);
        assert_eq!(parse_rate_with_unit("0").unwrap(), 0);
        // A bad unit is not told that a bare number would do.
        let e = parse_duration_with_unit("10sec").unwrap_err();
        assert!(
            e.contains("not a duration with a unit") && !e.contains("bare"),
            "{e}"
        );
        let e = parse_rate_with_unit("10ms").unwrap_err();
        assert!(
            e.contains("not a rate with a unit") && !e.contains("bare"),
            "{e}"
        );
        assert!(
            parse_duration_with_unit("nan")
                .unwrap_err()
                .contains("not a duration")
        );
        assert_eq!(Unit::Bytes.parse("64KiB").unwrap(), 65536.0);
        assert_eq!(Unit::Bytes.parse("200M").unwrap(), 200e6);
        assert_eq!(Unit::Micros.parse("2min").unwrap(), 120e6);
        assert_eq!(Unit::Packets.parse("10pkts").unwrap(), 10.0);
        assert_eq!(Unit::Number.parse("0.7").unwrap(), 0.7);
        assert_eq!(Unit::Bool.parse("true").unwrap(), 1.0);
    }

    #[test]
    fn wrong_unit_is_an_error_naming_the_expected_form() {
        let e = Unit::Packets.parse("10ms").unwrap_err();
        assert!(e.contains("number of packets"), "{e}");
        let e = Unit::Rate.parse("5KB").unwrap_err();
        assert!(e.contains("rate"), "{e}");
        assert!(Unit::Count.parse("2.5").is_err());
        assert!(Unit::Number.parse("-1").is_err());
        assert!(Unit::Number.parse("abc").is_err());
    }

    #[test]
    fn helpers() {
        assert_eq!(parse_bytes("200M").unwrap(), 200_000_000);
        assert_eq!(
            parse_duration("250ms").unwrap(),
            std::time::Duration::from_millis(250)
        );
        assert_eq!(parse_rate("8kbit").unwrap(), 1000);
        assert!(parse_bytes("10ms").is_err());
    }
}
