//! What a user installing omniprof relies on: the license the crates declare is in the
//! repository, no manifest names a placeholder address, and the README installs with the
//! versions of `Cargo.lock`.

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_license_the_crates_declare_is_there() {
    let manifest = read("Cargo.toml");
    assert!(manifest.contains("license = \"Apache-2.0\""), "{manifest}");
    let license = read("LICENSE");
    assert!(
        license.trim_start().starts_with("Apache License"),
        "LICENSE: not Apache"
    );
    assert!(license.contains("Version 2.0, January 2004"));
    assert!(license.contains("END OF TERMS AND CONDITIONS"));
}

#[test]
fn no_manifest_names_a_placeholder_address() {
    let mut manifests = vec!["Cargo.toml".to_owned()];
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("Cargo.toml").is_file() {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            manifests.push(format!("crates/{name}/Cargo.toml"));
        }
    }
    for path in manifests {
        let text = read(&path);
        assert!(
            !text.contains("example.invalid"),
            "{path} names a placeholder"
        );
    }
}

#[test]
fn the_readme_installs_with_the_lock_file() {
    let readme = read("README.md");
    let installs: Vec<&str> = readme
        .lines()
        .filter(|l| l.trim_start().starts_with("cargo install"))
        .collect();
    assert!(!installs.is_empty(), "the README shows how to install");
    for line in installs {
        assert!(line.contains("--locked"), "{line}");
    }
}
