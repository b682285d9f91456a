//! What a user installing omniprof relies on: the license the crates declare is in the
//! repository, no manifest names a placeholder address, the README installs with the
//! versions of `Cargo.lock`, and the README's and `docs/`'s code and links do not rot.

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

/// The Markdown pages a newcomer reads: the README, the changelog and `docs/`.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_owned(), "CHANGELOG.md".to_owned()];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    pages.sort();
    pages
}

#[test]
fn every_page_with_rust_code_is_a_doc_test() {
    // rustdoc compiles a fenced block whose info string is empty or starts with `rust`; a
    // page holding one is compiled only when the omniprof crate includes it.
    let lib = read("crates/omniprof/src/lib.rs");
    for page in pages() {
        let mut open = false;
        let mut rust = false;
        for line in read(&page).lines() {
            let Some(info) = line.trim_start().strip_prefix("```") else {
                continue;
            };
            if !open {
                let info = info.trim();
                rust |= info.is_empty() || info.starts_with("rust");
            }
            open = !open;
        }
        let included = lib.contains(&format!("include_str!(\"../../../{page}\")"));
        assert_eq!(
            rust, included,
            "{page}: a page with Rust (or unlabelled) code blocks must be included as a doc \
             test in crates/omniprof/src/lib.rs, and only such a page"
        );
    }
}

#[test]
fn the_pages_link_to_files_that_exist() {
    for page in pages() {
        let dir = root().join(&page).parent().unwrap().to_path_buf();
        let text = read(&page);
        for link in text.split("](").skip(1) {
            let target = link.split(')').next().unwrap();
            let path = target.split('#').next().unwrap();
            if path.is_empty() || path.contains("://") {
                continue;
            }
            assert!(
                dir.join(path).exists(),
                "{page}: a link to {target}, which is not there"
            );
        }
    }
}
