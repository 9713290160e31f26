//! The connection string's TLS settings, which the shipper reads itself: the `postgres` crate
//! parses only `sslmode` `disable`, `prefer` and `require`, and knows no `sslrootcert`. So
//! `sslmode` and `sslrootcert` are taken out of the string (key=value or URI form, as libpq reads
//! them) and the rest is left to the crate.

use std::path::PathBuf;

/// libpq's `sslmode`, as the shipper honours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain text only.
    Disable,
    /// TLS when the server offers it, unverified; else plain text (libpq's default). `allow` is
    /// read as this: it too accepts either.
    Prefer,
    /// TLS, the certificate unverified (verified as by `verify-ca` when a root certificate file
    /// is given or exists, as libpq does).
    Require,
    /// TLS, the certificate's chain verified against the root certificates.
    VerifyCa,
    /// TLS, the chain and the host name verified.
    VerifyFull,
}

impl SslMode {
    fn parse(v: &str) -> Result<SslMode, String> {
        Ok(match v {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode \"{other}\" is not disable, allow, prefer, require, verify-ca or verify-full"
                ))
            }
        })
    }
}

/// Where and how to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conn {
    /// The connection string without `sslmode` and `sslrootcert`.
    pub dsn: String,
    pub ssl: SslMode,
    /// The root certificates (PEM) to verify the server against: `sslrootcert`, else
    /// `PGSSLROOTCERT`, else `~/.postgresql/root.crt` when it exists (libpq's default).
    pub root_cert: Option<PathBuf>,
}

/// Reads `dsn`'s TLS settings; `env` gives `PGSSLMODE`, `PGSSLROOTCERT` and `HOME` for what the
/// string leaves out.
pub fn parse(dsn: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Conn, String> {
    let (rest, mut pairs) =
        if dsn.starts_with("postgres://") || dsn.starts_with("postgresql://") { uri(dsn)? } else { key_values(dsn)? };
    let mut take = |key: &str| pairs.iter().position(|(k, _)| k == key).map(|i| pairs.remove(i).1);
    let (mode, root) = (take("sslmode"), take("sslrootcert"));
    let ssl = SslMode::parse(&mode.or_else(|| env("PGSSLMODE")).unwrap_or_else(|| "prefer".to_owned()))?;
    let root_cert = root.or_else(|| env("PGSSLROOTCERT")).filter(|p| !p.is_empty()).map(PathBuf::from).or_else(|| {
        let default = PathBuf::from(env("HOME")?).join(".postgresql/root.crt");
        default.exists().then_some(default)
    });
    if root_cert.as_deref().is_some_and(|p| p.as_os_str() == "system") {
        return Err("sslrootcert=system is not supported: give the root certificate file".to_owned());
    }
    Ok(Conn { dsn: rebuild(&rest, &pairs), ssl, root_cert })
}

/// The string again from what is left: the URI's base with its query, or key='value' pairs.
fn rebuild(uri_base: &Option<String>, pairs: &[(String, String)]) -> String {
    match uri_base {
        Some(base) if pairs.is_empty() => base.clone(),
        Some(base) => {
            let q: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", percent_encode(v))).collect();
            format!("{base}?{}", q.join("&"))
        }
        None => pairs
            .iter()
            .map(|(k, v)| format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'")))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

type Pairs = (Option<String>, Vec<(String, String)>);

/// A URI's base (everything before `?`) and its query parameters, decoded.
fn uri(dsn: &str) -> Result<Pairs, String> {
    let (base, query) = dsn.split_once('?').unwrap_or((dsn, ""));
    let mut pairs = Vec::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| format!("the URI parameter \"{part}\" has no value"))?;
        pairs.push((percent_decode(k)?, percent_decode(v)?));
    }
    Ok((Some(base.to_owned()), pairs))
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(|| format!("a bad %-escape in \"{s}\""))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("a bad %-escape in \"{s}\""))?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("\"{s}\" decodes to bytes that are not UTF-8"))
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// libpq's key=value form: `key = value`, a value quoted with `'` (then `\` escapes `'` and `\`)
/// or running to the next blank (where `\` escapes the next character).
fn key_values(dsn: &str) -> Result<Pairs, String> {
    let mut pairs = Vec::new();
    let mut chars = dsn.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(format!("\"{key}\" in the connection string has no \"=\""));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    None => return Err(format!("the value of \"{key}\" has no closing quote")),
                    Some('\'') => break,
                    Some('\\') => value.push(chars.next().ok_or("a connection string ends in \\")?),
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.push(chars.next().ok_or("a connection string ends in \\")?);
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
    Ok((None, pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn key_value_strings_lose_their_tls_settings_and_keep_the_rest() {
        let c =
            parse("host=db.example port = 5432 user='o\\'brien' sslmode=verify-full sslrootcert=/etc/ca.pem", &no_env)
                .unwrap();
        assert_eq!(c.ssl, SslMode::VerifyFull);
        assert_eq!(c.root_cert, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(c.dsn, "host='db.example' port='5432' user='o\\'brien'");
        let parsed: postgres::Config = c.dsn.parse().unwrap();
        assert_eq!(parsed.get_user(), Some("o'brien"));
    }

    #[test]
    fn uris_lose_their_tls_parameters_and_keep_the_rest() {
        let c = parse(
            "postgresql://ship@db.example:5433/app?sslmode=verify-ca&sslrootcert=%2Fetc%2Fca%20x.pem&connect_timeout=5",
            &no_env,
        )
        .unwrap();
        assert_eq!(c.ssl, SslMode::VerifyCa);
        assert_eq!(c.root_cert, Some(PathBuf::from("/etc/ca x.pem")));
        assert_eq!(c.dsn, "postgresql://ship@db.example:5433/app?connect_timeout=5");
        let c = parse("postgres://db/app?sslmode=require", &no_env).unwrap();
        assert_eq!((c.ssl, c.dsn.as_str()), (SslMode::Require, "postgres://db/app"));
    }

    #[test]
    fn the_environment_fills_in_and_libpq_defaults_hold() {
        let env = |k: &str| match k {
            "PGSSLMODE" => Some("verify-full".to_owned()),
            "PGSSLROOTCERT" => Some("/r.pem".to_owned()),
            _ => None,
        };
        let c = parse("host=h", &env).unwrap();
        assert_eq!((c.ssl, c.root_cert), (SslMode::VerifyFull, Some(PathBuf::from("/r.pem"))));
        let c = parse("host=h sslmode=disable", &env).unwrap();
        assert_eq!(c.ssl, SslMode::Disable, "the string wins");
        assert_eq!(parse("", &no_env).unwrap().ssl, SslMode::Prefer);
        assert_eq!(parse("sslmode=allow", &no_env).unwrap().ssl, SslMode::Prefer);
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(parse("sslmode=verify", &no_env).unwrap_err().contains("verify-full"));
        assert!(parse("host='x", &no_env).is_err());
        assert!(parse("host", &no_env).is_err());
        assert!(parse("sslrootcert=system sslmode=verify-full", &no_env).is_err());
        assert!(parse("postgres://h/d?sslmode", &no_env).is_err());
    }
}
