//! etcdctl's connection settings for `run --etcd` and `status --etcd`:
//! its flags (`--endpoints`, `--cacert`, `--cert`, `--key`, `--user`, and
//! ours, `--password-file` and `--tls-server-name`) and its `ETCDCTL_*`
//! variables, with etcdctl 3.4's rule between them: a flag and its own
//! variable both set is an error (`conflicting environment variable ... is
//! shadowed by corresponding command-line flag`), whatever their values.
//! Strings only: reading a password and building the lock are
//! `cli/etcd.rs`'s.

// Without the etcd feature only the parser takes these flags (to refuse them).
#![cfg_attr(not(feature = "etcd"), allow(dead_code))]

use std::ffi::OsString;

/// The default endpoint, etcdctl's.
pub(super) const DEFAULT_ENDPOINT: &str = "127.0.0.1:2379";

/// The flags as given.
#[derive(Default)]
pub(super) struct EtcdFlags {
    endpoints: Option<OsString>,
    cacert: Option<OsString>,
    cert: Option<OsString>,
    key: Option<OsString>,
    user: Option<OsString>,
    password_file: Option<OsString>,
    server_name: Option<OsString>,
    insecure_skip_tls_verify: bool,
    /// The first one given, for a message when `--etcd` is not.
    first: Option<&'static str>,
}

/// A flag and its `ETCDCTL_*` variable.
const PAIRS: &[(&str, &str)] = &[
    ("endpoints", "ETCDCTL_ENDPOINTS"),
    ("cacert", "ETCDCTL_CACERT"),
    ("cert", "ETCDCTL_CERT"),
    ("key", "ETCDCTL_KEY"),
    ("user", "ETCDCTL_USER"),
    ("password", "ETCDCTL_PASSWORD"),
    (
        "insecure-skip-tls-verify",
        "ETCDCTL_INSECURE_SKIP_TLS_VERIFY",
    ),
];

impl EtcdFlags {
    /// Takes the long option `name` if it is one of these, with its value
    /// from `p`: whether it was.
    pub(super) fn take(&mut self, name: &str, p: &mut lexopt::Parser) -> Result<bool, String> {
        let mut value = |slot: &mut Option<OsString>, flag: &'static str| {
            if slot.is_some() {
                return Err(format!("--{flag} was given twice"));
            }
            *slot = Some(p.value().map_err(|e| e.to_string())?);
            Ok(flag)
        };
        let flag = match name {
            "endpoints" => value(&mut self.endpoints, "endpoints")?,
            "cacert" => value(&mut self.cacert, "cacert")?,
            "cert" => value(&mut self.cert, "cert")?,
            "key" => value(&mut self.key, "key")?,
            "user" => value(&mut self.user, "user")?,
            "password-file" => value(&mut self.password_file, "password-file")?,
            "tls-server-name" => value(&mut self.server_name, "tls-server-name")?,
            "insecure-skip-tls-verify" => {
                self.insecure_skip_tls_verify = true;
                "insecure-skip-tls-verify"
            }
            "password" => {
                return Err(
                    "--password would show the password to every user of this host \
                     (in ps and /proc): give it in a file (--password-file), in \
                     ETCDCTL_PASSWORD, or at the prompt of --user NAME"
                        .into(),
                )
            }
            "discovery-srv" => {
                return Err("--discovery-srv: DNS discovery is not supported: give the \
                     endpoints (--endpoints)"
                    .into())
            }
            _ => return Ok(false),
        };
        self.first.get_or_insert(flag);
        Ok(true)
    }

    /// The first of these flags given, if any.
    pub(super) fn first(&self) -> Option<&'static str> {
        self.first
    }
}

/// The URLs after `--etcd`: `--etcd=URLS`, or the next argument if it
/// names endpoints (a `://` in it, or `HOST:PORT` parts) rather than the
/// lock; empty when `--etcd` came alone, the endpoints then being
/// `--endpoints`', `ETCDCTL_ENDPOINTS`' or etcdctl's default.
pub(super) fn etcd_urls(p: &mut lexopt::Parser) -> Result<String, String> {
    let value = match p.optional_value() {
        Some(v) => Some(v),
        None => p
            .try_raw_args()
            .and_then(|mut raw| raw.next_if(|a| a.to_str().is_some_and(names_endpoints))),
    };
    match value {
        None => Ok(String::new()),
        Some(v) => v
            .into_string()
            .map_err(|_| "--etcd takes URLs, as text".to_owned()),
    }
}

/// Whether `arg` names endpoints: URLs, or `HOST:PORT` parts.
fn names_endpoints(arg: &str) -> bool {
    arg.contains("://")
        || arg.split(',').all(|part| {
            part.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty()
                    && !host.contains('/')
                    && !port.is_empty()
                    && port.bytes().all(|b| b.is_ascii_digit())
            })
        })
}

/// Where the password comes from.
#[derive(PartialEq, Eq)]
pub(super) enum Password {
    /// Given on the command line, after the user's name (`--user
    /// NAME:PASSWORD`): hidden from the process's command line once read.
    InArguments(String),
    /// From `ETCDCTL_PASSWORD`, or `ETCDCTL_USER=NAME:PASSWORD`.
    InEnvironment(String),
    /// The first line of a file.
    File(OsString),
    /// Asked on the terminal.
    Prompt,
}

/// Where the password came from, never the password.
impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Password::InArguments(_) => f.write_str("InArguments(..)"),
            Password::InEnvironment(_) => f.write_str("InEnvironment(..)"),
            Password::File(path) => f.debug_tuple("File").field(path).finish(),
            Password::Prompt => f.write_str("Prompt"),
        }
    }
}

/// The settings, resolved.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct EtcdSettings {
    pub(super) endpoints: Vec<String>,
    pub(super) cacert: Option<OsString>,
    pub(super) cert: Option<OsString>,
    pub(super) key: Option<OsString>,
    pub(super) server_name: Option<String>,
    /// `--insecure-skip-tls-verify`.
    pub(super) insecure: bool,
    pub(super) user: Option<(String, Password)>,
}

/// The settings of `--etcd URLS` (`urls` empty when `--etcd` came without
/// them) and `flags`, with the variables `env` gives.
pub(super) fn resolve(
    urls: &str,
    flags: &EtcdFlags,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<EtcdSettings, String> {
    // etcdctl's rule: a flag and its own variable both set is an error.
    for (flag, var) in PAIRS {
        let given = match *flag {
            "endpoints" => flags.endpoints.is_some(),
            "cacert" => flags.cacert.is_some(),
            "cert" => flags.cert.is_some(),
            "key" => flags.key.is_some(),
            "user" => flags.user.is_some(),
            "insecure-skip-tls-verify" => flags.insecure_skip_tls_verify,
            _ => false,
        };
        if given && env(var).is_some() {
            return Err(format!(
                "conflicting environment variable {var} is shadowed by the flag --{flag}: \
                 unset the variable or give no flag (as etcdctl)"
            ));
        }
    }
    // Past that rule, a variable set empty is unset, as etcdctl takes it.
    let env = |var: &str| env(var).filter(|v| !v.is_empty());
    // Skipping verification takes a lock from whoever answers at the
    // endpoints: only when asked for by name, never by a variable left in
    // the environment for etcdctl; set to false (in Go's words for it),
    // the variable asks for what is done anyway.
    let skip = env("ETCDCTL_INSECURE_SKIP_TLS_VERIFY");
    let false_words = ["0", "f", "F", "false", "FALSE", "False"];
    if skip.is_some_and(|v| !false_words.iter().any(|w| v == *w)) {
        return Err(
            "ETCDCTL_INSECURE_SKIP_TLS_VERIFY is refused: skipping the verification \
             of the members' certificates must be asked for by name, on the command line \
             (--insecure-skip-tls-verify); better, give the CA that signed them (--cacert)"
                .into(),
        );
    }
    let text = |value: OsString, what: &str| {
        value
            .into_string()
            .map_err(|v| format!("{what} must be text: {}", v.to_string_lossy()))
    };
    // A value that may hold the password is never repeated.
    let secret = |value: OsString, what: &str| {
        value
            .into_string()
            .map_err(|_| format!("{what} must be text (UTF-8); its value is not shown"))
    };
    let endpoints = if !urls.is_empty() {
        if flags.endpoints.is_some() {
            return Err("the endpoints were given twice: by --etcd URLS and --endpoints".into());
        }
        urls.to_owned()
    } else if let Some(e) = &flags.endpoints {
        text(e.clone(), "--endpoints")?
    } else if let Some(e) = env("ETCDCTL_ENDPOINTS") {
        text(e, "ETCDCTL_ENDPOINTS")?
    } else if env("ETCDCTL_DISCOVERY_SRV").is_some() {
        return Err(
            "ETCDCTL_DISCOVERY_SRV: DNS discovery is not supported: give the \
             endpoints (--etcd URLS, --endpoints or ETCDCTL_ENDPOINTS)"
                .into(),
        );
    } else {
        DEFAULT_ENDPOINT.to_owned()
    };
    let endpoints: Vec<String> = endpoints.split(',').map(|e| e.trim().to_owned()).collect();
    let file = |flag: &Option<OsString>, var: &str| {
        flag.clone().or_else(|| env(var)).filter(|v| !v.is_empty())
    };
    let server_name = match &flags.server_name {
        Some(n) => Some(text(n.clone(), "--tls-server-name")?),
        None => None,
    };
    let user = match (&flags.user, env("ETCDCTL_USER")) {
        (Some(u), _) => Some((secret(u.clone(), "--user")?, true)),
        (None, Some(u)) => Some((secret(u, "ETCDCTL_USER")?, false)),
        (None, None) => None,
    };
    let user = match user {
        None => {
            if flags.password_file.is_some() {
                return Err("--password-file needs a user (--user NAME)".into());
            }
            None
        }
        // With a password apart, etcdctl takes the whole of --user as the
        // name; a colon there may then be a password typed after the name,
        // which would show in an error naming the user and in `ps` for the
        // whole run: refused, without repeating the value.
        Some((user, from_flag))
            if user.contains(':')
                && (flags.password_file.is_some() || env("ETCDCTL_PASSWORD").is_some()) =>
        {
            let whence = if from_flag { "--user" } else { "ETCDCTL_USER" };
            return Err(format!(
                "{whence} holds a ':' while a password is also given apart (--password-file or \
                 ETCDCTL_PASSWORD): what follows the ':' may be a password, which would be \
                 taken as part of the user name; give the user name alone, or the password \
                 one way only"
            ));
        }
        Some((user, from_flag)) => Some(match (&flags.password_file, env("ETCDCTL_PASSWORD")) {
            (Some(f), _) => (user, Password::File(f.clone())),
            (None, Some(p)) => (
                user,
                Password::InEnvironment(secret(p, "ETCDCTL_PASSWORD")?),
            ),
            (None, None) => match user.split_once(':') {
                Some((name, password)) if from_flag => {
                    (name.to_owned(), Password::InArguments(password.to_owned()))
                }
                Some((name, password)) => (
                    name.to_owned(),
                    Password::InEnvironment(password.to_owned()),
                ),
                None => (user, Password::Prompt),
            },
        }),
    };
    if let Some((name, _)) = &user {
        if name.is_empty() {
            return Err("--user needs a user name (NAME or NAME:PASSWORD)".into());
        }
    }
    Ok(EtcdSettings {
        endpoints,
        cacert: file(&flags.cacert, "ETCDCTL_CACERT"),
        cert: file(&flags.cert, "ETCDCTL_CERT"),
        key: file(&flags.key, "ETCDCTL_KEY"),
        server_name,
        insecure: flags.insecure_skip_tls_verify,
        user,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn flags(args: &[&str]) -> EtcdFlags {
        let mut p = lexopt::Parser::from_args(args.iter().copied());
        let mut f = EtcdFlags::default();
        while let Some(arg) = p.next().unwrap() {
            match arg {
                lexopt::Arg::Long(name) => {
                    let name = name.to_owned();
                    assert!(f.take(&name, &mut p).unwrap(), "{name}");
                }
                other => panic!("{other:?}"),
            }
        }
        f
    }

    fn resolved(urls: &str, args: &[&str], vars: &[(&str, &str)]) -> Result<EtcdSettings, String> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        resolve(urls, &flags(args), |k| vars.get(k).cloned())
    }

    #[test]
    fn a_flag_and_its_own_variable_both_set_is_an_error_as_etcdctls() {
        let said = resolved(
            "",
            &["--endpoints", "https://a:2379"],
            &[("ETCDCTL_ENDPOINTS", "https://a:2379")],
        )
        .unwrap_err();
        assert!(
            said.contains("ETCDCTL_ENDPOINTS is shadowed by the flag --endpoints"),
            "{said}"
        );
        let said = resolved("", &["--cacert", "x"], &[("ETCDCTL_CACERT", "y")]).unwrap_err();
        assert!(said.contains("ETCDCTL_CACERT"), "{said}");
        // A variable alone, or another flag's, is taken.
        let s = resolved(
            "",
            &["--cacert", "ca.pem"],
            &[
                ("ETCDCTL_ENDPOINTS", "https://b:2379"),
                ("ETCDCTL_CERT", "c.pem"),
                ("ETCDCTL_KEY", "k.pem"),
            ],
        )
        .unwrap();
        assert_eq!(s.endpoints, ["https://b:2379"]);
        assert_eq!(
            (s.cacert, s.cert, s.key),
            (
                Some("ca.pem".into()),
                Some("c.pem".into()),
                Some("k.pem".into())
            )
        );
    }

    #[test]
    fn etcd_urls_come_first_then_endpoints_then_the_variable_then_etcdctls_default() {
        let env = [("ETCDCTL_ENDPOINTS", "http://env:2379")];
        assert_eq!(
            resolved("http://a:1,http://b:2", &[], &env)
                .unwrap()
                .endpoints,
            ["http://a:1", "http://b:2"]
        );
        assert_eq!(
            resolved("", &["--endpoints", "c:3"], &[])
                .unwrap()
                .endpoints,
            ["c:3"]
        );
        assert_eq!(
            resolved("", &[], &env).unwrap().endpoints,
            ["http://env:2379"]
        );
        assert_eq!(
            resolved("", &[], &[]).unwrap().endpoints,
            [DEFAULT_ENDPOINT]
        );
        assert!(resolved("http://a:1", &["--endpoints", "c:3"], &[]).is_err());
        assert!(resolved("", &[], &[("ETCDCTL_DISCOVERY_SRV", "example.com")]).is_err());
        // Set empty, a variable is unset, but still conflicts with its flag.
        let empty = [("ETCDCTL_ENDPOINTS", ""), ("ETCDCTL_USER", "")];
        let s = resolved("", &[], &empty).unwrap();
        assert_eq!(
            (s.endpoints, s.user),
            (vec![DEFAULT_ENDPOINT.to_owned()], None)
        );
        assert!(resolved("", &["--endpoints", "c:3"], &empty).is_err());
    }

    #[test]
    fn the_password_is_split_from_the_user_as_etcdctl_splits_it() {
        let user = |args: &[&str], vars: &[(&str, &str)]| resolved("", args, vars).unwrap().user;
        assert_eq!(
            user(&["--user", "locker:pw:with:colons"], &[]),
            Some((
                "locker".into(),
                Password::InArguments("pw:with:colons".into())
            ))
        );
        assert_eq!(
            user(&["--user", "locker"], &[]),
            Some(("locker".into(), Password::Prompt))
        );
        // A password apart and a colon in the user: refused, the value not
        // repeated (it may hold a password).
        for (args, vars) in [
            (
                &["--user", "a:secret"][..],
                &[("ETCDCTL_PASSWORD", "pw")][..],
            ),
            (
                &["--user", "a:secret", "--password-file", "/run/pw"][..],
                &[][..],
            ),
            (
                &[][..],
                &[("ETCDCTL_USER", "a:secret"), ("ETCDCTL_PASSWORD", "pw")][..],
            ),
        ] {
            let refused = resolved("", args, vars).unwrap_err();
            assert!(
                refused.contains("holds a ':'") && !refused.contains("secret"),
                "{refused}"
            );
        }
        assert_eq!(
            user(&["--user", "a"], &[("ETCDCTL_PASSWORD", "pw")]),
            Some(("a".into(), Password::InEnvironment("pw".into())))
        );
        assert_eq!(
            user(&["--user", "a", "--password-file", "/run/pw"], &[]),
            Some(("a".into(), Password::File("/run/pw".into())))
        );
        assert_eq!(
            user(&[], &[("ETCDCTL_USER", "locker:pw")]),
            Some(("locker".into(), Password::InEnvironment("pw".into())))
        );
        assert_eq!(user(&[], &[]), None);
        assert!(resolved("", &["--password-file", "f"], &[]).is_err());
        assert!(resolved("", &["--user", ":pw"], &[]).is_err());
    }

    #[test]
    fn etcd_takes_the_next_argument_only_if_it_names_endpoints() {
        let urls = |args: &[&str]| {
            let mut p = lexopt::Parser::from_args(args.iter().copied());
            let first = p.next().unwrap();
            assert_eq!(first, Some(lexopt::Arg::Long("etcd")));
            let urls = etcd_urls(&mut p).unwrap();
            let next = p.next().unwrap().map(|a| format!("{a:?}"));
            (urls, next)
        };
        assert_eq!(
            urls(&["--etcd", "http://a:1,http://b:2", "jobs"]).0,
            "http://a:1,http://b:2"
        );
        assert_eq!(
            urls(&["--etcd", "10.0.0.1:2379", "jobs"]).0,
            "10.0.0.1:2379"
        );
        assert_eq!(urls(&["--etcd=jobs"]).0, "jobs");
        let (given, next) = urls(&["--etcd", "jobs/nightly", "true"]);
        assert_eq!(
            (given.as_str(), next.as_deref()),
            ("", Some("Value(\"jobs/nightly\")"))
        );
        let (given, next) = urls(&["--etcd", "--endpoints", "x"]);
        assert_eq!(
            (given.as_str(), next.as_deref()),
            ("", Some("Long(\"endpoints\")"))
        );
        assert!(!names_endpoints("a/b:1"));
        assert!(!names_endpoints("name:"));
    }

    #[test]
    fn skipping_verification_only_by_name_and_no_password_in_the_arguments() {
        assert!(
            resolved("", &["--insecure-skip-tls-verify"], &[])
                .unwrap()
                .insecure
        );
        assert!(!resolved("", &[], &[]).unwrap().insecure);
        let said = resolved("", &[], &[("ETCDCTL_INSECURE_SKIP_TLS_VERIFY", "true")]).unwrap_err();
        assert!(said.contains("asked for by name"), "{said}");
        for off in ["", "false", "0"] {
            let s = resolved("", &[], &[("ETCDCTL_INSECURE_SKIP_TLS_VERIFY", off)]).unwrap();
            assert!(!s.insecure, "{off:?}");
        }
        let mut p = lexopt::Parser::from_args(["x"]);
        let said = EtcdFlags::default().take("password", &mut p).unwrap_err();
        assert!(said.contains("--password-file"), "{said}");
    }
}
