//! The few fields of an X.509 certificate the transport reports (serial, validity), read
//! straight from its DER (RFC 5280 §4.1) without a full parser. Certificates come from files
//! and peers, so every read is checked: anything unexpected is `None`, never a panic.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The serial number and validity period of a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertSummary {
    /// The serial number's content octets (big-endian, as encoded; at most 20 in RFC 5280).
    pub serial: Vec<u8>,
    /// The start of the validity period (`notBefore`).
    pub not_before: SystemTime,
    /// The end of the validity period (`notAfter`).
    pub not_after: SystemTime,
}

impl CertSummary {
    /// The serial as lower-case hex, as `openssl x509 -serial` prints it (without leading
    /// zero octets).
    pub fn serial_hex(&self) -> String {
        let start = self.serial.iter().position(|&b| b != 0).unwrap_or(self.serial.len().saturating_sub(1));
        self.serial[start..].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Reads the serial and validity of the DER certificate `der`; `None` when it is not a
/// certificate of the shape RFC 5280 gives.
pub fn summary(der: &[u8]) -> Option<CertSummary> {
    let (cert, _) = tlv(der, 0x30)?;
    let (tbs, _) = tlv(cert, 0x30)?;
    // version [0] EXPLICIT is optional (absent for v1).
    let rest = match tbs.first() {
        Some(0xa0) => tlv(tbs, 0xa0)?.1,
        _ => tbs,
    };
    let (serial, rest) = tlv(rest, 0x02)?;
    let (_signature, rest) = tlv(rest, 0x30)?;
    let (_issuer, rest) = tlv(rest, 0x30)?;
    let (validity, _) = tlv(rest, 0x30)?;
    let (not_before, rest) = time(validity)?;
    let (not_after, _) = time(rest)?;
    Some(CertSummary { serial: serial.to_vec(), not_before, not_after })
}

/// Splits one DER element with tag `tag` off the front of `input`: its content and what
/// follows it.
fn tlv(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&t, rest) = input.split_first()?;
    if t != tag {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let octets = usize::from(first & 0x7f);
        if octets == 0 || octets > 4 {
            return None;
        }
        let (bytes, after) = (rest.get(..octets)?, rest.get(octets..)?);
        rest = after;
        bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    Some((rest.get(..len)?, rest.get(len..)?))
}

/// Reads one `Time` (UTCTime `YYMMDDHHMMSSZ` or GeneralizedTime `YYYYMMDDHHMMSSZ`).
fn time(input: &[u8]) -> Option<(SystemTime, &[u8])> {
    let (year, digits, rest) = match input.first() {
        Some(0x17) => {
            let (v, rest) = tlv(input, 0x17)?;
            let yy = number(v.get(..2)?)?;
            // RFC 5280 §4.1.2.5.1: 50..99 are 19xx, 00..49 are 20xx.
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, v.get(2..)?, rest)
        }
        Some(0x18) => {
            let (v, rest) = tlv(input, 0x18)?;
            (number(v.get(..4)?)?, v.get(4..)?, rest)
        }
        _ => return None,
    };
    if digits.len() != 11 || digits[10] != b'Z' {
        return None;
    }
    let field = |i: usize| number(&digits[i..i + 2]);
    let (month, day, hour, minute, second) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(hour * 3_600 + minute * 60 + second);
    let at = if secs >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(secs.unsigned_abs()))?
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))?
    };
    Some((at, rest))
}

/// Parses ASCII decimal digits (all of them must be digits).
fn number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0')))
}

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_what_rcgen_wrote() {
        let mut params = rcgen::CertificateParams::new(vec!["a".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2024, 2, 29);
        params.not_after = rcgen::date_time_ymd(2051, 12, 31);
        params.serial_number = Some(rcgen::SerialNumber::from(vec![0x01, 0x02, 0xff]));
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let s = summary(cert.der()).expect("a certificate");
        assert_eq!(s.serial_hex(), "0102ff");
        assert_eq!(s.not_before, UNIX_EPOCH + Duration::from_secs(1_709_164_800));
        // 2051 is past 2049: GeneralizedTime.
        assert_eq!(s.not_after, UNIX_EPOCH + Duration::from_secs(2_587_593_600));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = summary(&bytes);
        }
    }
}
