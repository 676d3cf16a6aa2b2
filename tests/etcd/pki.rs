//! Certificates for the secured clusters, made by Debian's openssl: CAs,
//! members' certificates (for `localhost`, `etcd.test` and 127.0.0.1, as
//! servers and as peers), and clients' (by common name, also expired).

use crate::harness::{program, Tls};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory of certificates and keys: `NAME.pem` and `NAME.key`.
pub(crate) struct Pki {
    dir: PathBuf,
}

impl Pki {
    pub(crate) fn new(dir: &Path) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        Pki {
            dir: dir.to_owned(),
        }
    }

    pub(crate) fn pem(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.pem"))
    }

    pub(crate) fn key(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.key"))
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new(program("openssl"))
            .args(args)
            .current_dir(&self.dir)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A CA named `name` (its common name too), self-signed.
    pub(crate) fn ca(&self, name: &str) {
        let (pem, key) = (format!("{name}.pem"), format!("{name}.key"));
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &pem,
            "-days",
            "30",
            "-subj",
            &format!("/CN={name}"),
        ]);
    }

    /// A certificate `name` for common name `cn`, signed by CA `ca`, valid
    /// for `days` (-1: expired yesterday), with the extensions `ext`.
    fn signed(&self, name: &str, ca: &str, cn: &str, days: i32, ext: &str) {
        let (csr, pem, key, extfile) = (
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.key"),
            format!("{name}.ext"),
        );
        std::fs::write(self.dir.join(&extfile), ext).unwrap();
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &format!("/CN={cn}"),
        ]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            &days.to_string(),
            "-extfile",
            &extfile,
            "-out",
            &pem,
        ]);
    }

    /// A member's certificate, for clients and peers alike.
    pub(crate) fn member(&self, name: &str, ca: &str) {
        self.signed(
            name,
            ca,
            "etcd member",
            30,
            "subjectAltName=DNS:localhost,DNS:etcd.test,IP:127.0.0.1\n\
             extendedKeyUsage=serverAuth,clientAuth\n",
        );
    }

    /// A client's certificate for common name `cn`.
    pub(crate) fn client(&self, name: &str, ca: &str, cn: &str, days: i32) {
        self.signed(name, ca, cn, days, "extendedKeyUsage=clientAuth\n");
    }

    /// The TLS files of a client with certificate `name`, trusting `ca`.
    pub(crate) fn tls(&self, ca: &str, name: Option<&str>) -> Tls {
        Tls {
            ca: self.pem(ca),
            identity: name.map(|n| (self.pem(n), self.key(n))),
        }
    }
}
