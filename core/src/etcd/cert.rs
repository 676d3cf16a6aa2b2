//! What an etcd client reads of its own client certificate before it
//! connects (PROTOCOL 15.1): the validity period, so that an expired or
//! not yet valid certificate is named as such rather than met as a
//! connection the member closes without a word, and the common names of
//! its subject and issuer, which say which etcd user the certificate is
//! (a member with `--client-cert-auth` maps the subject's common name to
//! a user) and which CA the member must trust.
//!
//! The reader walks the DER of an X.509 certificate (RFC 5280, 4.1) as far
//! as its subject, and no further: it checks no signature (the member
//! does), and it refuses, with `None`, anything that is not laid out as a
//! certificate. It cannot panic on any input.

/// What [`read`] found in a certificate. Times are seconds since the Unix
/// epoch (UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Cert<'a> {
    /// The start of the validity period (`notBefore`).
    pub not_before: i64,
    /// Its end (`notAfter`): the certificate is valid up to and including
    /// this second.
    pub not_after: i64,
    /// The subject's common name (`CN`), as the certificate has it (a
    /// string type's bytes: UTF-8 or ASCII for every type a CA issues).
    pub subject_cn: Option<&'a [u8]>,
    /// The issuer's common name.
    pub issuer_cn: Option<&'a [u8]>,
}

/// Whether a certificate is valid at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Validity {
    /// Within its validity period.
    Valid,
    /// Before its `notBefore`: the clocks of its CA and of this host may
    /// disagree.
    NotYetValid,
    /// After its `notAfter`.
    Expired,
}

impl Cert<'_> {
    /// Whether the certificate is valid at `now` (seconds since the Unix
    /// epoch), as a TLS peer judges it.
    pub fn validity(&self, now: i64) -> Validity {
        if now < self.not_before {
            Validity::NotYetValid
        } else if now > self.not_after {
            Validity::Expired
        } else {
            Validity::Valid
        }
    }
}

/// A time of the proleptic Gregorian calendar in UTC, for messages that
/// name a certificate's validity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Utc {
    /// The year.
    pub year: i64,
    /// The month, 1 to 12.
    pub month: u8,
    /// The day of the month, 1 to 31.
    pub day: u8,
    /// The hour, 0 to 23.
    pub hour: u8,
    /// The minute, 0 to 59.
    pub minute: u8,
    /// The second, 0 to 59.
    pub second: u8,
}

impl Utc {
    /// The time `secs` seconds after the Unix epoch (Howard Hinnant's
    /// `civil_from_days`).
    pub fn from_unix(secs: i64) -> Utc {
        let days = secs.div_euclid(86_400);
        let of_day = secs.rem_euclid(86_400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let day_of_era = z - era * 146_097;
        let year_of_era =
            (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
        let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
        let month_from_march = (5 * day_of_year + 2) / 153;
        let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
        let month = if month_from_march < 10 {
            month_from_march + 3
        } else {
            month_from_march - 9
        };
        let year = year_of_era + era * 400 + i64::from(month <= 2);
        // Each is within its field's range by the arithmetic above.
        let small = |v: i64| u8::try_from(v).unwrap_or(0);
        Utc {
            year,
            month: small(month),
            day: small(day),
            hour: small(of_day / 3_600),
            minute: small(of_day % 3_600 / 60),
            second: small(of_day % 60),
        }
    }
}

/// DER tags this reader meets.
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const INTEGER: u8 = 0x02;
const OID: u8 = 0x06;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0] EXPLICIT`: the version of a v2 or v3 certificate.
const VERSION: u8 = 0xa0;
/// The attribute type `id-at-commonName` (2.5.4.3), as DER writes its OID.
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// The certificate in `der`: its validity and common names; `None` if it
/// is not laid out as an X.509 certificate.
pub fn read(der: &[u8]) -> Option<Cert<'_>> {
    let (certificate, _) = element(der, SEQUENCE)?;
    let (tbs, _) = element(certificate, SEQUENCE)?;
    let rest = match element(tbs, VERSION) {
        Some((_, rest)) => rest,
        None => tbs,
    };
    let (_serial, rest) = element(rest, INTEGER)?;
    let (_signature, rest) = element(rest, SEQUENCE)?;
    let (issuer, rest) = element(rest, SEQUENCE)?;
    let (validity, rest) = element(rest, SEQUENCE)?;
    let (subject, _) = element(rest, SEQUENCE)?;
    let (not_before, after) = time(validity)?;
    let (not_after, _) = time(after)?;
    Some(Cert {
        not_before,
        not_after,
        subject_cn: common_name(subject),
        issuer_cn: common_name(issuer),
    })
}

/// The first element of `input`, which must have tag `tag`: its contents,
/// and what follows it. Lengths in the short form, or the long form of up
/// to four bytes; no indefinite length (DER has none).
fn element(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&found, rest) = input.split_first()?;
    if found != tag {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, rest) = rest.split_at(count);
        let len = bytes
            .iter()
            .fold(0usize, |len, &b| (len << 8) + usize::from(b));
        (len, rest)
    };
    if rest.len() < len {
        return None;
    }
    Some(rest.split_at(len))
}

/// Any first element of `input`: its tag, contents, and what follows.
fn any(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let &tag = input.first()?;
    let (contents, rest) = element(input, tag)?;
    Some((tag, contents, rest))
}

/// A `Time` (UTCTime or GeneralizedTime, in UTC with seconds, as RFC 5280
/// requires of certificates): seconds since the epoch, and what follows.
fn time(input: &[u8]) -> Option<(i64, &[u8])> {
    let (tag, text, rest) = any(input)?;
    let (year, text) = match tag {
        UTC_TIME => {
            let (yy, text) = digits(text, 2)?;
            // RFC 5280 4.1.2.5.1: 50-99 are 1950-1999.
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, text)
        }
        GENERALIZED_TIME => digits(text, 4)?,
        _ => return None,
    };
    let (month, text) = digits(text, 2)?;
    let (day, text) = digits(text, 2)?;
    let (hour, text) = digits(text, 2)?;
    let (minute, text) = digits(text, 2)?;
    let (second, text) = digits(text, 2)?;
    if text != b"Z" || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some((days * 86_400 + hour * 3_600 + minute * 60 + second, rest))
}

/// `n` ASCII digits at the start of `text`, as a number, and the rest.
fn digits(text: &[u8], n: usize) -> Option<(i64, &[u8])> {
    if text.len() < n {
        return None;
    }
    let (number, rest) = text.split_at(n);
    let mut value = 0i64;
    for &b in number {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i64::from(b - b'0');
    }
    Some((value, rest))
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar
/// (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The value of the first common name in a `Name` (a sequence of sets of
/// attribute type and value pairs).
fn common_name(mut name: &[u8]) -> Option<&[u8]> {
    while !name.is_empty() {
        let (set, rest) = element(name, SET)?;
        name = rest;
        let mut attributes = set;
        while !attributes.is_empty() {
            let (pair, rest) = element(attributes, SEQUENCE)?;
            attributes = rest;
            let (oid, value) = element(pair, OID)?;
            if oid == COMMON_NAME {
                let (_, text, _) = any(value)?;
                return Some(text);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate made by `openssl req -x509 -newkey ec -pkeyopt
    /// ec_paramgen_curve:P-256 -subj /CN=locker -days 1` (self-signed: the
    /// issuer is the subject), valid from 2026-12-05 01:39:16 UTC for a day,
    /// in DER (`openssl x509 -outform der`).
    const LOCKER: &[u8] = include_bytes!("locker.der");

    #[test]
    fn a_certificate_gives_its_validity_and_common_names() {
        let cert = read(LOCKER).expect("a certificate");
        // 2026-12-05 01:39:16 UTC, as `date -u -d ... +%s` says.
        assert_eq!(cert.not_before, 1_796_434_756);
        assert_eq!(cert.not_after, 1_796_434_756 + 86_400);
        assert_eq!(cert.subject_cn, Some(&b"locker"[..]));
        assert_eq!(cert.issuer_cn, Some(&b"locker"[..]));
        assert_eq!(cert.validity(cert.not_before - 1), Validity::NotYetValid);
        assert_eq!(cert.validity(cert.not_before), Validity::Valid);
        assert_eq!(cert.validity(cert.not_after), Validity::Valid);
        assert_eq!(cert.validity(cert.not_after + 1), Validity::Expired);
    }

    #[test]
    fn times_of_both_forms_count_from_the_epoch() {
        let utc = |t: &[u8]| {
            let mut der = [0u8; 32];
            der[0] = UTC_TIME;
            der[1] = t.len() as u8;
            der[2..2 + t.len()].copy_from_slice(t);
            time(&der[..2 + t.len()]).map(|(s, _)| s)
        };
        assert_eq!(utc(b"700101000000Z"), Some(0));
        assert_eq!(utc(b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(utc(b"000229120000Z"), Some(951_825_600));
        assert_eq!(utc(b"500101000000Z"), Some(-631_152_000), "1950");
        assert_eq!(utc(b"700101000060Z"), Some(60), "a leap second");
        assert_eq!(utc(b"700101000061Z"), None);
        assert_eq!(utc(b"700101006000Z"), None);
        assert_eq!(utc(b"700101240000Z"), None);
        assert_eq!(utc(b"700132000000Z"), None);
        assert_eq!(utc(b"700100000000Z"), None);
        assert_eq!(utc(b"700001000000Z"), None);
        assert_eq!(utc(b"700101000000"), None, "no zone");
        assert_eq!(utc(b"701301000000Z"), None, "month 13");
        assert_eq!(utc(b"70010100000aZ"), None);
        let general = [
            GENERALIZED_TIME,
            15,
            b'2',
            b'1',
            b'0',
            b'6',
            b'0',
            b'2',
            b'0',
            b'7',
            b'0',
            b'6',
            b'2',
            b'8',
            b'1',
            b'5',
            b'Z',
        ];
        assert_eq!(time(&general).map(|(s, _)| s), Some(4_294_967_295));
    }

    #[test]
    fn a_time_reads_back_as_the_date_it_was() {
        for (secs, (year, month, day, hour, minute, second)) in [
            (0, (1970, 1, 1, 0, 0, 0)),
            (951_825_600, (2000, 2, 29, 12, 0, 0)),
            (1_796_434_756, (2026, 12, 5, 1, 39, 16)),
            (4_294_967_295, (2106, 2, 7, 6, 28, 15)),
            (-1, (1969, 12, 31, 23, 59, 59)),
            // Around the century's day that is not a leap day, and the
            // last day of a 400-year era, where each term of the
            // conversion counts.
            (4_107_456_000, (2100, 2, 28, 0, 0, 0)),
            (4_107_542_400, (2100, 3, 1, 0, 0, 0)),
            (13_574_606_400, (2400, 2, 29, 12, 0, 0)),
            (13_574_649_600, (2400, 3, 1, 0, 0, 0)),
            (-11_670_998_400, (1600, 2, 29, 0, 0, 0)),
            (951_868_800, (2000, 3, 1, 0, 0, 0)),
        ] {
            let t = Utc::from_unix(secs);
            assert_eq!(
                (t.year, t.month, t.day, t.hour, t.minute, t.second),
                (year, month, day, hour, minute, second),
                "{secs}"
            );
            let days = days_from_civil(year, i64::from(month), i64::from(day));
            assert_eq!(
                days * 86_400
                    + i64::from(hour) * 3_600
                    + i64::from(minute) * 60
                    + i64::from(second),
                secs
            );
        }
    }

    #[test]
    fn anything_else_is_refused_without_a_panic() {
        assert_eq!(read(&[]), None);
        assert_eq!(read(b"-----BEGIN CERTIFICATE-----"), None);
        // Every truncation, and every single-byte change, of a real one.
        for n in 0..LOCKER.len() {
            assert_eq!(read(&LOCKER[..n]), None, "cut at {n}");
            let mut changed = [0u8; 512];
            let changed = &mut changed[..LOCKER.len()];
            changed.copy_from_slice(LOCKER);
            changed[n] ^= 0xff;
            let _ = read(changed);
        }
        // A long-form length of five bytes, and one past the end.
        assert_eq!(element(&[0x30, 0x85, 0, 0, 0, 0, 1, 7], SEQUENCE), None);
        assert_eq!(
            element(&[0x30, 0x84, 0, 0, 0, 1, 7, 8], SEQUENCE),
            Some((&[7u8][..], &[8u8][..]))
        );
        assert_eq!(
            element(&[0x30, 0x81, 0], SEQUENCE),
            Some((&[][..], &[][..]))
        );
        assert_eq!(element(&[0x30, 0x81], SEQUENCE), None);
        assert_eq!(element(&[0x30, 0x7f], SEQUENCE), None);
        // The indefinite length (0x80) is BER's, not DER's.
        let mut indefinite = [0u8; 130];
        indefinite[0] = 0x30;
        indefinite[1] = 0x80;
        assert_eq!(element(&indefinite, SEQUENCE), None);
        assert_eq!(digits(b"12", 2), Some((12, &b""[..])));
        assert_eq!(digits(b"1", 2), None);
        assert_eq!(digits(b"1x", 2), None);
        assert_eq!(element(&[0x30, 0x82, 0xff, 0xff], SEQUENCE), None);
        assert_eq!(element(&[0x30, 0x80], SEQUENCE), None);
    }
}
