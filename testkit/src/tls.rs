//! Certificates for the tests that serve TLS (the sidecar's listener, the injection webhook):
//! a certificate authority that issues pairs for 127.0.0.1, and a directory laid out as the
//! kubelet mounts a Secret, whose files are replaced the way the kubelet replaces them.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A certificate authority.
pub struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Ca(CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA"))
    }

    /// The CA's certificate (PEM).
    pub fn pem(&self) -> String {
        self.0.pem()
    }

    /// A certificate and its key (PEM) signed by this CA: for the server at 127.0.0.1, or for
    /// a client.
    pub fn issue(&self, purpose: ExtendedKeyUsagePurpose) -> (String, String) {
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "informerd test");
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.0).expect("sign");
        (cert.pem(), key.serialize_pem())
    }
}

/// A directory as the kubelet mounts a Secret: `NAME -> ..data/NAME`, `..data -> ..VERSION`.
pub struct MountedSecret {
    dir: PathBuf,
    version: u32,
}

impl MountedSecret {
    /// An empty one at `dir` (created).
    pub fn new(dir: PathBuf) -> MountedSecret {
        std::fs::create_dir_all(&dir).expect("secret directory");
        MountedSecret { dir, version: 0 }
    }

    /// The path a program is given for the file `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Publishes `files` as the kubelet does: a new version directory, then one atomic rename
    /// of the `..data` symlink; the previous version is removed.
    pub fn publish(&mut self, files: &[(&str, &str)]) {
        self.version += 1;
        let version = format!("..v{}", self.version);
        std::fs::create_dir(self.dir.join(&version)).expect("version directory");
        for (name, text) in files {
            std::fs::write(self.dir.join(&version).join(name), text).expect("write");
            let link = self.dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(Path::new("..data").join(name), &link).expect("link");
            }
        }
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &tmp).expect("..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swap ..data");
        if self.version > 1 {
            let old = self.dir.join(format!("..v{}", self.version - 1));
            std::fs::remove_dir_all(old).expect("remove the previous version");
        }
    }
}
