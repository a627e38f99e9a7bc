//! The Cargo feature `etcd` gates the etcd client: without it, neither `warren` nor the JNI
//! library (which leaves it off by default) depends on etcd-client, tonic or prost, whose
//! build needs `protoc`. Read from the real dependency graph (`cargo tree`, offline, from
//! Cargo.lock), so a dependency that pulls them in again fails here. The runtime side, an
//! `etcd:` spec refused with an error naming the feature, is tested in `store/spec.rs`.

use std::process::Command;

/// The crates of the normal (non-dev, non-build) dependency tree of `package` with `args`.
fn tree(package: &str, args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-e", "normal", "--prefix", "none", "-p", package])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn has(tree: &str, krate: &str) -> bool {
    tree.lines().any(|l| l.split_whitespace().next() == Some(krate))
}

#[test]
fn without_the_feature_no_etcd_client_tonic_or_prost_is_linked() {
    for (package, args) in [("warren", &["--no-default-features"][..]), ("warren-jni", &[][..])] {
        let t = tree(package, args);
        assert!(has(&t, "tokio"), "{package}: the tree was read ({} lines)", t.lines().count());
        for krate in ["etcd-client", "tonic", "prost"] {
            assert!(!has(&t, krate), "{package} {args:?} depends on {krate}:\n{t}");
        }
    }
}

#[test]
fn with_the_feature_the_etcd_client_is_there() {
    for (package, args) in [("warren", &[][..]), ("warren-jni", &["--features", "etcd"][..]), ("warren-cli", &[][..])] {
        assert!(has(&tree(package, args), "etcd-client"), "{package} {args:?} lacks etcd-client");
    }
}
