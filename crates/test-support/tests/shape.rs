//! The workspace's shape: within a crate no file imports from a file that imports from it
//! (directly or round a longer circle), and each library crate shows one public face, its
//! root's `pub use` list, beside the few named modules allowed below it. Read from the
//! sources with a small scanner of Rust tokens (comments and literals dropped first), so that
//! the checks follow the crates and files as they move.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The `pub mod`s each library crate has on purpose, as paths from the crate root: named
/// modules whose items are not re-exported at the root (the root's `pub use` list is the
/// crate's face otherwise). A crate not listed may have none.
const PUBLIC_MODULES: &[(&str, &[&str])] = &[
    // What a profiled program calls is at the root; the rest is grouped by who calls it
    // (framework observers, backends, plugin loading, config writers, on-demand tracing),
    // beside the tests' hooks (hidden).
    (
        "omniprof",
        &[
            "__test",
            "backends",
            "clock",
            "config_keys",
            "on_demand",
            "plugins",
            "recording",
        ],
    ),
    // Named keys, inside private modules, that the root re-exports as modules.
    (
        "omniprof-cupti",
        &["backend::keys", "records::external", "records::kind"],
    ),
    // What the exported macros expand to (hidden).
    ("omniprof-plugin-sys", &["__private"]),
    // The tests' helpers, one module per concern.
    (
        "omniprof-test-support",
        &[
            "checker",
            "cli",
            "crafted_pftrace",
            "cupti",
            "data",
            "decoder",
            "fork",
            "lock",
            "memory",
            "plugins",
            "session",
            "shared_dirs",
            "skip",
            "trigger",
        ],
    ),
    // The arg and metadata names writers and readers share, and how formats lay out what
    // they have no place for.
    (
        "omniprof-trace",
        &[
            "keys",
            "keys::arg",
            "keys::metadata",
            "keys::metadata::distributed",
            "keys::name",
            "layout",
            "layout::header",
        ],
    ),
];

// ---------------------------------------------------------------------------------------
// The workspace's checks.
// ---------------------------------------------------------------------------------------

#[test]
fn no_file_imports_from_a_file_that_imports_from_it() {
    let crates = workspace();
    let mut cycles = Vec::new();
    let mut sources = Vec::new();
    for krate in &crates {
        let model = krate.model();
        let (listed, crowded) = model.cycles();
        for cycle in listed {
            for pair in cycle.windows(2) {
                let (line, path) = &model.edges[&pair[0]][&pair[1]];
                let source = format!("{}:{line} `{path}` -> {}", pair[0], pair[1]);
                if !sources.contains(&source) {
                    sources.push(source);
                }
            }
            cycles.push(cycle.join(" -> "));
        }
        for files in crowded {
            cycles.push(format!(
                "(more than {MAX_CIRCLES} circles through {}, not all listed)",
                files.join(", ")
            ));
        }
    }
    assert!(
        cycles.is_empty(),
        "{} import circles between files; break each by moving what both sides need into a \
         file that neither imports from, or by passing it in:\n{}\n\nthe first reference \
         behind each import in them:\n{}",
        cycles.len(),
        cycles.join("\n"),
        sources.join("\n")
    );
}

#[test]
fn every_public_module_is_on_the_allowlist() {
    let mut unlisted = Vec::new();
    let mut found = Vec::new();
    for krate in workspace().iter().filter(|k| k.is_library()) {
        let allowed = PUBLIC_MODULES
            .iter()
            .find(|(name, _)| *name == krate.name)
            .map_or(&[][..], |(_, modules)| *modules);
        for (module, at) in krate.model().public_modules() {
            if !allowed.contains(&module.as_str()) {
                unlisted.push(format!("{}: `pub mod {module}` at {at}", krate.name));
            }
            found.push(format!("{}: {module}", krate.name));
        }
    }
    let stale: Vec<String> = PUBLIC_MODULES
        .iter()
        .flat_map(|(name, modules)| modules.iter().map(move |m| format!("{name}: {m}")))
        .filter(|entry| !found.contains(entry))
        .collect();
    assert!(
        stale.is_empty(),
        "PUBLIC_MODULES in {} lists modules that are no longer `pub mod`s of a library \
         crate; remove them:\n{}",
        file!(),
        stale.join("\n")
    );
    assert!(
        unlisted.is_empty(),
        "public modules that are not on the allowlist (PUBLIC_MODULES in {}): make each \
         module private and add its items to the crate root's `pub use` list, or, when it is \
         a named module whose items are not re-exported at the root, add it to the \
         allowlist:\n{}",
        file!(),
        unlisted.join("\n")
    );
}

#[test]
fn no_item_is_public_at_two_paths() {
    let mut twice = Vec::new();
    for krate in workspace().iter().filter(|k| k.is_library()) {
        for (module, export, at) in krate.model().double_paths() {
            twice.push(format!(
                "{}: `pub mod {module}` and `pub use {export}` at {at}",
                krate.name
            ));
        }
    }
    assert!(
        twice.is_empty(),
        "items public both in a public module and re-exported at the crate root: make the \
         module private (the root's `pub use` is the one path) or drop the re-export:\n{}",
        twice.join("\n")
    );
}

/// What a profiled program builds: the recorder and the trace model with its writers, never
/// the reader, the analyses or the report (their own crates, for the tools).
#[test]
fn the_recorder_and_the_model_build_no_reader_and_no_analysis() {
    let crates = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    // Each with a dependency it does list, so that the scan cannot pass on reading nothing.
    for (krate, listed) in [("omniprof", "omniprof-trace"), ("omniprof-trace", "serde")] {
        let path = crates.join(krate).join("Cargo.toml");
        let manifest =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let dependencies = normal_dependencies(&manifest);
        let offline: Vec<&str> = dependencies
            .iter()
            .map(String::as_str)
            .filter(|d| ["omniprof-read", "omniprof-analysis", "omniprof-report"].contains(d))
            .collect();
        assert!(
            offline.is_empty(),
            "{krate} depends on {offline:?}: a profiled program would build them (make it a \
             dev-dependency, or move what it needs into omniprof-trace)"
        );
        assert!(
            dependencies.iter().any(|d| d == listed),
            "{listed} not found among the [dependencies] read from {}: {dependencies:?}",
            path.display()
        );
    }
}

/// The names under a manifest's `[dependencies]` table.
fn normal_dependencies(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .map(str::trim)
        .skip_while(|line| *line != "[dependencies]")
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split(['.', '=', ' ']).next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_scanner_reads_every_crate_of_the_workspace() {
    let crates = workspace();
    assert!(
        crates.iter().any(|k| k.name == "omniprof"),
        "no crate omniprof under crates/"
    );
    for krate in &crates {
        assert!(
            !krate.roots.is_empty(),
            "{}: no lib.rs or main.rs",
            krate.name
        );
        let model = krate.model();
        assert!(
            model.missing.is_empty(),
            "{}: module files the scanner did not find:\n{}",
            krate.name,
            model.missing.join("\n")
        );
    }
}

// ---------------------------------------------------------------------------------------
// The scanner, checked on small sources.
// ---------------------------------------------------------------------------------------

/// A crate of the given files (paths relative to the crate, `src/lib.rs` its root).
fn demo(files: &[(&str, &str)]) -> Crate {
    Crate::new(
        "demo".to_owned(),
        String::new(),
        files
            .iter()
            .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
            .collect(),
    )
}

/// The crate's imports between files, as `from -> to`.
fn edges(krate: &Crate) -> Vec<String> {
    let model = krate.model();
    let mut out = Vec::new();
    for (from, targets) in &model.edges {
        for to in targets.keys() {
            out.push(format!("{from} -> {to}"));
        }
    }
    out
}

fn cycles(krate: &Crate) -> Vec<String> {
    krate
        .model()
        .cycles()
        .0
        .iter()
        .map(|c| c.join(" -> "))
        .collect()
}

#[test]
fn the_scanner_finds_a_circle_of_two_files() {
    let krate = demo(&[
        ("src/lib.rs", "mod a;\nmod b;\npub use a::A;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "src/b.rs",
            "pub struct B;\nfn f() -> super::a::A { todo!() }\n",
        ),
    ]);
    assert_eq!(
        edges(&krate),
        [
            "src/a.rs -> src/b.rs",
            "src/b.rs -> src/a.rs",
            "src/lib.rs -> src/a.rs"
        ]
    );
    assert_eq!(cycles(&krate), ["src/a.rs -> src/b.rs -> src/a.rs"]);
}

#[test]
fn the_scanner_lists_each_circle_of_a_tangle() {
    let krate = demo(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a.rs", "use crate::{b::B, c::{C}};\npub struct A;\n"),
        ("src/b.rs", "pub struct B;\nuse crate::a::A;\n"),
        ("src/c.rs", "pub struct C;\nfn f() { crate::a::A; }\n"),
    ]);
    assert_eq!(
        cycles(&krate),
        [
            "src/a.rs -> src/b.rs -> src/a.rs",
            "src/a.rs -> src/c.rs -> src/a.rs"
        ]
    );
}

#[test]
fn an_item_re_exported_at_the_root_is_imported_from_its_file() {
    let krate = demo(&[
        (
            "src/lib.rs",
            "mod x;\nmod y;\nmod z;\npub use x::{Item, Other as Renamed};\npub use y::*;\n\
             pub(crate) use z::deep::Deep;\n",
        ),
        (
            "src/x.rs",
            "pub struct Item;\npub struct Other;\nfn f(_: crate::Renamed) {}\n",
        ),
        ("src/y.rs", "use crate::Item;\npub struct Why;\n"),
        ("src/z.rs", "pub(crate) mod deep;\n"),
        ("src/z/deep.rs", "pub struct Deep;\nuse crate::Why;\n"),
    ]);
    assert_eq!(
        edges(&krate),
        [
            "src/lib.rs -> src/x.rs",
            "src/lib.rs -> src/y.rs",
            "src/lib.rs -> src/z/deep.rs",
            "src/y.rs -> src/x.rs",
            "src/z/deep.rs -> src/y.rs",
        ]
    );
    assert!(cycles(&krate).is_empty(), "{:?}", cycles(&krate));
}

#[test]
fn paths_resolve_to_the_deepest_file_they_name() {
    let krate = demo(&[
        ("src/lib.rs", "mod m;\npub fn top() {}\n"),
        (
            "src/m/mod.rs",
            "mod p;\nmod q;\n#[path = \"elsewhere/r_file.rs\"]\nmod r;\npub(crate) use q::Q;\n\
             pub(crate) struct Here;\n",
        ),
        (
            "src/m/p.rs",
            "use super::{r::{self}, Here, Q};\nfn f() { super::super::top(); self::inner::g(); }\n\
             mod inner { pub fn g() { super::super::r::h() } }\n",
        ),
        ("src/m/q.rs", "pub(crate) struct Q;\n"),
        ("src/m/elsewhere/r_file.rs", "pub(crate) fn h() {}\n"),
    ]);
    assert_eq!(
        edges(&krate),
        [
            "src/m/mod.rs -> src/m/q.rs",
            "src/m/p.rs -> src/lib.rs",
            "src/m/p.rs -> src/m/elsewhere/r_file.rs",
            "src/m/p.rs -> src/m/mod.rs",
            "src/m/p.rs -> src/m/q.rs",
        ]
    );
}

#[test]
fn comments_and_strings_that_name_a_module_import_nothing() {
    let krate = demo(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        (
            "src/a.rs",
            "// use crate::b::B;\n/* crate::b::B /* nested */ crate::b::B */\n/// crate::b::B\n\
             const S: &str = \"crate::b::B \\\" crate::b::B\";\nconst R: &str = r#\"\"crate::b\"#;\n\
             const Q: char = '\"';\nconst T: &str = b\"crate::b\";\nfn f<'a>(x: &'a str) {}\n\
             macro_rules! m { () => { $crate::b::B } }\npub struct A;\n",
        ),
        ("src/b.rs", "pub struct B(crate::a::A);\n"),
    ]);
    assert_eq!(edges(&krate), ["src/b.rs -> src/a.rs"]);
}

#[test]
fn a_test_module_may_import_anything() {
    let krate = demo(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        (
            "src/a.rs",
            "pub struct A;\n#[cfg(test)]\nmod inline { use crate::b::B; }\n#[cfg(test)]\nmod more;\n\
             mod tests;\nmod only_tests;\n#[cfg(all(test, unix))]\nfn helper() { crate::b::B; }\n",
        ),
        ("src/a/more.rs", "use crate::b::B;\n"),
        ("src/a/tests.rs", "use crate::b::B;\n"),
        ("src/a/only_tests.rs", "#![cfg(test)]\nuse crate::b::B;\n"),
        ("src/b.rs", "pub struct B;\nuse crate::a::A;\n"),
    ]);
    assert_eq!(edges(&krate), ["src/b.rs -> src/a.rs"]);
}

#[test]
fn a_public_module_and_a_root_re_export_of_it_are_two_paths() {
    let krate = demo(&[
        (
            "src/lib.rs",
            "pub mod open;\npub mod both;\nmod hidden;\npub(crate) mod near;\npub use both::Thing;\n\
             pub use hidden::Other;\npub mod inline { pub mod nested {} }\n",
        ),
        ("src/open.rs", "pub struct Open;\n"),
        ("src/both.rs", "pub struct Thing;\n"),
        ("src/hidden.rs", "pub struct Other;\npub mod below;\n"),
        ("src/hidden/below.rs", ""),
        ("src/near.rs", ""),
    ]);
    let model = krate.model();
    let modules: Vec<String> = model.public_modules().into_iter().map(|m| m.0).collect();
    assert_eq!(
        modules,
        ["both", "hidden::below", "inline", "inline::nested", "open"]
    );
    assert_eq!(
        model.double_paths(),
        [(
            "both".to_owned(),
            "both::Thing".to_owned(),
            "src/lib.rs:5".to_owned()
        )]
    );
}

// ---------------------------------------------------------------------------------------
// Reading the workspace.
// ---------------------------------------------------------------------------------------

/// One crate's sources: its files' text by path (relative to the repository, or in the
/// scanner's own tests to the crate), and the roots its module trees grow from.
struct Crate {
    name: String,
    files: BTreeMap<String, String>,
    roots: Vec<String>,
    lib: Option<String>,
}

impl Crate {
    fn new(name: String, dir: String, files: BTreeMap<String, String>) -> Crate {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let lib = format!("{prefix}src/lib.rs");
        let lib = files.contains_key(&lib).then_some(lib);
        let mut roots: Vec<String> = lib.iter().cloned().collect();
        for path in files.keys() {
            let Some(rest) = path.strip_prefix(&prefix) else {
                continue;
            };
            let bin = rest.strip_prefix("src/bin/").is_some_and(|b| {
                (!b.contains('/')) || (b.matches('/').count() == 1 && b.ends_with("/main.rs"))
            });
            if rest == "src/main.rs" || bin {
                roots.push(path.clone());
            }
        }
        Crate {
            name,
            files,
            roots,
            lib,
        }
    }

    fn is_library(&self) -> bool {
        self.lib.is_some()
    }

    fn model(&self) -> Model {
        Model::build(self)
    }
}

/// Every crate under `crates/` with a `src/` folder.
fn workspace() -> Vec<Crate> {
    let crates = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut dirs: Vec<String> = std::fs::read_dir(crates)
        .unwrap_or_else(|e| panic!("{}: {e}", crates.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| crates.join(name).join("src").is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let manifest =
                std::fs::read_to_string(crates.join(&dir).join("Cargo.toml")).unwrap_or_default();
            let name = package_name(&manifest).unwrap_or_else(|| dir.clone());
            let mut files = BTreeMap::new();
            read_sources(
                &crates.join(&dir).join("src"),
                &format!("crates/{dir}/src"),
                &mut files,
            );
            Crate::new(name, format!("crates/{dir}"), files)
        })
        .collect()
}

/// The `name` of a manifest's `[package]`.
fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if let Some(value) = line.strip_prefix("name") {
            let value = value.trim_start().strip_prefix('=')?.trim();
            if in_package {
                return Some(value.trim_matches('"').to_owned());
            }
        }
    }
    None
}

fn read_sources(dir: &Path, rel: &str, files: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            read_sources(&path, &format!("{rel}/{name}"), files);
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            files.insert(format!("{rel}/{name}"), text);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Tokens: identifiers, string literals (kept, for `#[path]`), `::` and single characters;
// comments dropped, other literals and lifetimes reduced to one opaque token.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Str(String),
    PathSep,
    Punct(char),
    Other,
}

struct Token {
    tok: Tok,
    line: usize,
}

fn tokenize(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let start = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if let Some((end, text)) = string_at(&c, i) {
            line += text.matches('\n').count();
            out.push(Token {
                tok: Tok::Str(text),
                line: start,
            });
            i = end;
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            // A character literal, or a lifetime or label.
            let q = if ch == 'b' { i + 1 } else { i };
            if at(q + 1) == '\\' {
                let mut j = q + 3;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if at(q + 2) == '\'' {
                i = q + 3;
            } else {
                i = q + 1;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
            }
            out.push(Token {
                tok: Tok::Other,
                line: start,
            });
        } else if ch.is_ascii_digit() {
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Other,
                line: start,
            });
        } else if ident_char(ch) {
            if ch == 'r' && at(i + 1) == '#' && ident_char(at(i + 2)) {
                i += 2;
            }
            let from = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Ident(c[from..i].iter().collect()),
                line: start,
            });
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token {
                tok: Tok::PathSep,
                line: start,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(ch),
                line: start,
            });
            i += 1;
        }
    }
    out
}

/// The string literal starting at `i` (plain, raw, byte or C), as its end and contents.
fn string_at(c: &[char], i: usize) -> Option<(usize, String)> {
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let (raw, mut j) = match (at(i), at(i + 1), at(i + 2)) {
        ('"', _, _) => (false, i),
        ('b' | 'c', '"', _) => (false, i + 1),
        ('b' | 'c', 'r', '"' | '#') => (true, i + 2),
        ('r', '"' | '#', _) => (true, i + 1),
        _ => return None,
    };
    if raw {
        let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
        j += hashes;
        if at(j) != '"' {
            return None;
        }
        let from = j + 1;
        let mut k = from;
        while k < c.len() {
            if c[k] == '"'
                && c[k + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&h| h == '#')
                    .count()
                    == hashes
            {
                return Some((k + 1 + hashes, c[from..k].iter().collect()));
            }
            k += 1;
        }
        return Some((c.len(), c[from..].iter().collect()));
    }
    let from = j + 1;
    let mut k = from;
    while k < c.len() && c[k] != '"' {
        k += if c[k] == '\\' { 2 } else { 1 };
    }
    let end = k.min(c.len());
    Some(((k + 1).min(c.len()), c[from..end].iter().collect()))
}

// ---------------------------------------------------------------------------------------
// One file's scan: its module declarations, imports, paths and items, each with the inline
// modules (`mod x { ... }`) it sits in. Items under `#[cfg(test)]` are skipped whole.
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Scan {
    /// `#![cfg(test)]`: the whole file is test code.
    test_only: bool,
    mods: Vec<ModDecl>,
    uses: Vec<Use>,
    /// Paths in code: `crate::a::f()`, `super::X`, `child::f()` (the first segment may name
    /// anything; resolution keeps those that name a module of the crate).
    paths: Vec<(Vec<String>, Vec<String>, usize)>,
    /// Items defined: (inline modules, name).
    defs: Vec<(Vec<String>, String)>,
    /// `#[macro_export]` macros, which live at the crate root.
    exported_macros: Vec<String>,
}

struct ModDecl {
    within: Vec<String>,
    name: String,
    public: bool,
    path: Option<String>,
    inline: bool,
    line: usize,
}

/// One leaf of a `use` tree: the path it imports and the name it binds (`None` for a glob).
#[derive(Clone)]
struct Use {
    within: Vec<String>,
    segs: Vec<String>,
    name: Option<String>,
    public: bool,
    line: usize,
}

enum Frame {
    Module,
    /// `extern "C" { ... }`: its items are the module's.
    Transparent,
    Block,
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "union", "trait", "type", "const", "static",
];
const QUALIFIERS: &[&str] = &["pub", "unsafe", "async", "extern", "const", "default"];

fn scan(src: &str) -> Scan {
    let t = tokenize(src);
    let tok = |i: usize| t.get(i).map(|t| &t.tok);
    let ident = |i: usize| match tok(i) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    let punct = |i: usize, ch: char| tok(i) == Some(&Tok::Punct(ch));
    let mut out = Scan::default();
    let mut frames: Vec<(Frame, Option<String>)> = Vec::new();
    let within = |frames: &[(Frame, Option<String>)]| -> Vec<String> {
        frames.iter().filter_map(|(_, name)| name.clone()).collect()
    };
    let at_module_level =
        |frames: &[(Frame, Option<String>)]| !frames.iter().any(|(f, _)| matches!(f, Frame::Block));
    let (mut test, mut path_attr, mut macro_export) = (false, None, false);
    let mut i = 0;
    while i < t.len() {
        // Attributes.
        if punct(i, '#') && (punct(i + 1, '[') || (punct(i + 1, '!') && punct(i + 2, '['))) {
            let inner = punct(i + 1, '!');
            let open = if inner { i + 2 } else { i + 1 };
            let close = matching(&t, open);
            let attr: Vec<&Tok> = t[open + 1..close].iter().map(|t| &t.tok).collect();
            if is_cfg_test(&attr) {
                if inner && frames.is_empty() {
                    out.test_only = true;
                } else if !inner {
                    test = true;
                }
            }
            if let [Tok::Ident(p), Tok::Punct('='), Tok::Str(s)] = attr.as_slice() {
                if p == "path" {
                    path_attr = Some(s.clone());
                }
            }
            macro_export |= matches!(attr.as_slice(), [Tok::Ident(m)] if m == "macro_export");
            i = close + 1;
            continue;
        }
        if test {
            i = item_end(&t, i);
            (test, path_attr, macro_export) = (false, None, false);
            continue;
        }
        let attrs = (path_attr.take(), std::mem::take(&mut macro_export));
        // Visibility.
        let mut public = false;
        if ident(i) == Some("pub") {
            if punct(i + 1, '(') {
                i = matching(&t, i + 1) + 1;
            } else {
                public = true;
                i += 1;
            }
            if i >= t.len() {
                break;
            }
        }
        let line = t[i].line;
        let prev = i.checked_sub(1).map(|p| &t[p].tok);
        let item_start = match prev {
            None | Some(Tok::Str(_)) => true,
            Some(Tok::Punct(p)) => matches!(p, ';' | '{' | '}' | ']' | ')'),
            Some(Tok::Ident(q)) => QUALIFIERS.contains(&q.as_str()),
            _ => false,
        };
        match tok(i) {
            Some(Tok::Ident(kw)) if kw == "mod" => {
                let Some(name) = ident(i + 1) else {
                    i += 1;
                    continue;
                };
                let inline = punct(i + 2, '{');
                out.mods.push(ModDecl {
                    within: within(&frames),
                    name: name.to_owned(),
                    public,
                    path: attrs.0,
                    inline,
                    line,
                });
                if inline {
                    out.defs.push((within(&frames), name.to_owned()));
                    frames.push((Frame::Module, Some(name.to_owned())));
                    i += 3;
                } else {
                    i += 2;
                }
            }
            Some(Tok::Ident(kw)) if kw == "use" => {
                let mut leaves = Vec::new();
                i = use_tree(&t, i + 1, Vec::new(), &mut leaves);
                for (segs, name) in leaves {
                    out.uses.push(Use {
                        within: within(&frames),
                        segs,
                        name,
                        public,
                        line,
                    });
                }
            }
            Some(Tok::Ident(kw)) if kw == "extern" && matches!(tok(i + 1), Some(Tok::Str(_))) => {
                if punct(i + 2, '{') {
                    frames.push((Frame::Transparent, None));
                    i += 3;
                } else {
                    i += 2;
                }
            }
            Some(Tok::Ident(kw)) if kw == "macro_rules" && punct(i + 1, '!') => {
                if let Some(name) = ident(i + 2) {
                    if attrs.1 {
                        out.exported_macros.push(name.to_owned());
                    } else if at_module_level(&frames) {
                        out.defs.push((within(&frames), name.to_owned()));
                    }
                }
                i += 3;
            }
            Some(Tok::Ident(kw))
                if ITEM_KEYWORDS.contains(&kw.as_str())
                    && item_start
                    && at_module_level(&frames) =>
            {
                if let Some(name) = ident(i + 1).filter(|n| *n != "_" && *n != "fn") {
                    out.defs.push((within(&frames), name.to_owned()));
                }
                i += 1;
            }
            Some(Tok::Ident(first)) if tok(i + 1) == Some(&Tok::PathSep) => {
                let after_sep = matches!(prev, Some(Tok::PathSep | Tok::Punct('$' | '.')));
                let mut segs = vec![first.clone()];
                let mut j = i + 1;
                while tok(j) == Some(&Tok::PathSep) {
                    match ident(j + 1) {
                        Some(s) => segs.push(s.to_owned()),
                        None => break,
                    }
                    j += 2;
                }
                if !after_sep {
                    out.paths.push((within(&frames), segs, line));
                }
                i = j;
            }
            Some(Tok::Punct('{')) => {
                frames.push((Frame::Block, None));
                i += 1;
            }
            Some(Tok::Punct('}')) => {
                frames.pop();
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// Whether an attribute's tokens are `cfg(test)` or `cfg(all(test, ...))`.
fn is_cfg_test(attr: &[&Tok]) -> bool {
    let is = |i: usize, s: &str| matches!(attr.get(i), Some(Tok::Ident(x)) if x == s);
    let open = |i: usize| attr.get(i) == Some(&&Tok::Punct('('));
    if !(is(0, "cfg") && open(1)) {
        return false;
    }
    if is(2, "test") {
        return attr.len() == 4;
    }
    if is(2, "all") && open(3) {
        let mut depth = 0;
        for (k, t) in attr.iter().enumerate().skip(4) {
            match t {
                Tok::Punct('(') => depth += 1,
                Tok::Punct(')') => depth -= 1,
                Tok::Ident(x) if x == "test" && depth == 0 => {
                    return !matches!(attr.get(k + 1), Some(Tok::Punct('(' | '=')));
                }
                _ => {}
            }
        }
    }
    false
}

/// The index of the bracket closing the one at `open`.
fn matching(t: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (k, token) in t.iter().enumerate().skip(open) {
        match token.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// The index just past the item (or statement, field, arm) starting at `i`: its `;`, its
/// body's closing brace, or the end of the enclosing brackets.
fn item_end(t: &[Token], i: usize) -> usize {
    let mut depth = 0i32;
    for (k, token) in t.iter().enumerate().skip(i) {
        match token.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']') => depth -= 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return k + 1,
            _ => {}
        }
        if depth < 0 {
            return k;
        }
    }
    t.len()
}

/// Reads a `use` tree from `i` to its `;`, adding its leaves under `prefix`.
fn use_tree(
    t: &[Token],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let mut segs = prefix;
    while let Some(token) = t.get(i) {
        match &token.tok {
            Tok::PathSep => {
                if segs.is_empty() {
                    segs.push("::".to_owned());
                }
                i += 1;
            }
            Tok::Ident(s) => {
                segs.push(s.clone());
                i += 1;
                if t.get(i).map(|t| &t.tok) == Some(&Tok::PathSep) {
                    continue;
                }
                let mut name = s.clone();
                if s == "self" {
                    segs.pop();
                    name = segs.last().cloned().unwrap_or_default();
                }
                if matches!(t.get(i).map(|t| &t.tok), Some(Tok::Ident(a)) if a == "as") {
                    if let Some(Tok::Ident(alias)) = t.get(i + 1).map(|t| &t.tok) {
                        name = alias.clone();
                    }
                    i += 2;
                }
                out.push((segs, Some(name)));
                return skip_semicolon(t, i);
            }
            Tok::Punct('*') => {
                out.push((segs, None));
                return skip_semicolon(t, i + 1);
            }
            Tok::Punct('{') => {
                i += 1;
                loop {
                    match t.get(i).map(|t| &t.tok) {
                        None => return i,
                        Some(Tok::Punct('}')) => return skip_semicolon(t, i + 1),
                        Some(Tok::Punct(',')) => i += 1,
                        Some(_) => i = use_tree(t, i, segs.clone(), out),
                    }
                }
            }
            _ => return i,
        }
    }
    i
}

/// Steps over the `;` ending a whole `use` (inside a group the caller reads the `,` or `}`).
fn skip_semicolon(t: &[Token], i: usize) -> usize {
    if t.get(i).map(|t| &t.tok) == Some(&Tok::Punct(';')) {
        i + 1
    } else {
        i
    }
}

// ---------------------------------------------------------------------------------------
// The crate's module trees, imports between files, circles and public modules.
// ---------------------------------------------------------------------------------------

type ModPath = Vec<String>;

/// Where a path leads.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    Module(ModPath),
    /// An item defined (or, when not found, named) in a module.
    Item(ModPath),
    /// Outside the crate (another crate or the standard library).
    External,
}

/// One module tree (a library's or a binary's).
#[derive(Default)]
struct Tree {
    /// Every module, inline ones included, and the file it is in.
    modules: BTreeMap<ModPath, String>,
    defs: BTreeMap<ModPath, BTreeSet<String>>,
    uses: BTreeMap<ModPath, Vec<Use>>,
    /// `#[macro_export]` macros (at the root) and the module defining each.
    macros: BTreeMap<String, ModPath>,
    /// The files and their own modules, in the order they were found.
    files: Vec<(String, ModPath)>,
    /// Plain `pub mod`s: their module path and where they are declared.
    public_mods: Vec<(ModPath, String)>,
}

struct Model {
    /// Imports between files: `from -> to -> (line, path)` of the first reference.
    edges: BTreeMap<String, BTreeMap<String, (usize, String)>>,
    /// `mod` declarations whose file is not there.
    missing: Vec<String>,
    /// The library's tree, if the crate has one.
    lib: Option<Tree>,
}

impl Model {
    fn build(krate: &Crate) -> Model {
        let mut model = Model {
            edges: BTreeMap::new(),
            missing: Vec::new(),
            lib: None,
        };
        for root in &krate.roots {
            let tree = Tree::grow(krate, root, &mut model.missing);
            tree.add_edges(krate, &mut model.edges);
            if Some(root) == krate.lib.as_ref() {
                model.lib = Some(tree);
            }
        }
        model
    }

    /// Every circle of imports, each as its files from the first (least) back to it, and
    /// the tangles (sets of files importing from each other) with more circles than listed.
    fn cycles(&self) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
        let mut out = Vec::new();
        let mut crowded = Vec::new();
        for component in strongly_connected(&self.edges) {
            if component.len() > 1 {
                let cycles = elementary_cycles(&self.edges, &component);
                if cycles.len() >= MAX_CIRCLES {
                    crowded.push(component);
                }
                out.extend(cycles);
            }
        }
        out.sort();
        (out, crowded)
    }

    /// The library's plain `pub mod`s (inline ones included), as paths from the root, and
    /// where each is declared.
    fn public_modules(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .lib
            .iter()
            .flat_map(|tree| &tree.public_mods)
            .map(|(path, at)| (path.join("::"), at.clone()))
            .collect();
        out.sort();
        out
    }

    /// A public module at the root whose items the root also re-exports: the module, the
    /// re-exported path and where.
    fn double_paths(&self) -> Vec<(String, String, String)> {
        let Some(tree) = &self.lib else {
            return Vec::new();
        };
        let root_file = &tree.files[0].0;
        let mut out = Vec::new();
        for (module, _) in tree.public_mods.iter().filter(|(m, _)| m.len() == 1) {
            for u in tree.uses.get(&Vec::new()).into_iter().flatten() {
                let segs: &[String] = match u.segs.first().map(String::as_str) {
                    Some("crate" | "self") => &u.segs[1..],
                    _ => &u.segs,
                };
                if u.public
                    && segs.first() == Some(&module[0])
                    && (segs.len() > 1 || u.name.is_none())
                {
                    let export = if u.name.is_none() {
                        format!("{}::*", segs.join("::"))
                    } else {
                        segs.join("::")
                    };
                    out.push((module[0].clone(), export, format!("{root_file}:{}", u.line)));
                }
            }
        }
        out
    }
}

impl Tree {
    /// The module tree from `root`, following `mod` declarations to their files.
    fn grow(krate: &Crate, root: &str, missing: &mut Vec<String>) -> Tree {
        let mut tree = Tree::default();
        // (file, its module, the folder its child modules' files are in)
        let mut queue = vec![(root.to_owned(), Vec::new(), parent(root).to_owned())];
        while let Some((file, module, child_dir)) = queue.pop() {
            if file.rsplit('/').next() == Some("tests.rs") || tree.modules.contains_key(&module) {
                continue;
            }
            let Some(text) = krate.files.get(&file) else {
                continue;
            };
            let scan = scan(text);
            if scan.test_only {
                continue;
            }
            tree.modules.insert(module.clone(), file.clone());
            tree.files.push((file.clone(), module.clone()));
            let full =
                |within: &[String]| -> ModPath { module.iter().chain(within).cloned().collect() };
            for decl in &scan.mods {
                let path: ModPath = full(&decl.within)
                    .into_iter()
                    .chain([decl.name.clone()])
                    .collect();
                if decl.public {
                    tree.public_mods
                        .push((path.clone(), format!("{file}:{}", decl.line)));
                }
                if decl.inline {
                    continue;
                }
                let dir = std::iter::once(child_dir.clone())
                    .chain(decl.within.iter().cloned())
                    .collect::<Vec<_>>()
                    .join("/");
                let (candidates, owns_dir) = match &decl.path {
                    Some(p) if decl.within.is_empty() => {
                        (vec![normalize(&format!("{}/{p}", parent(&file)))], true)
                    }
                    Some(p) => (vec![normalize(&format!("{dir}/{p}"))], true),
                    None => (
                        vec![
                            format!("{dir}/{}.rs", decl.name),
                            format!("{dir}/{}/mod.rs", decl.name),
                        ],
                        false,
                    ),
                };
                match candidates.iter().find(|c| krate.files.contains_key(*c)) {
                    Some(found) => {
                        let child_dir = if owns_dir || found.ends_with("/mod.rs") {
                            parent(found).to_owned()
                        } else {
                            found.trim_end_matches(".rs").to_owned()
                        };
                        queue.push((found.clone(), path, child_dir));
                    }
                    None => missing.push(format!("{file}:{}: mod {}", decl.line, decl.name)),
                }
            }
            for decl in scan.mods.iter().filter(|d| d.inline) {
                let path: ModPath = full(&decl.within)
                    .into_iter()
                    .chain([decl.name.clone()])
                    .collect();
                tree.modules.entry(path).or_insert_with(|| file.clone());
            }
            for (within, name) in &scan.defs {
                tree.defs
                    .entry(full(within))
                    .or_default()
                    .insert(name.clone());
            }
            for u in &scan.uses {
                tree.uses
                    .entry(full(&u.within))
                    .or_default()
                    .push(u.clone());
            }
            for name in &scan.exported_macros {
                tree.macros.insert(name.clone(), module.clone());
            }
        }
        tree
    }

    /// Adds the imports between this tree's files (`tests.rs` and test modules left out).
    fn add_edges(
        &self,
        krate: &Crate,
        edges: &mut BTreeMap<String, BTreeMap<String, (usize, String)>>,
    ) {
        for (file, module) in &self.files {
            let scan = scan(&krate.files[file]);
            let full =
                |within: &[String]| -> ModPath { module.iter().chain(within).cloned().collect() };
            let refs = scan
                .uses
                .iter()
                .map(|u| (full(&u.within), u.segs.clone(), u.line, u.name.is_none()))
                .chain(
                    scan.paths
                        .iter()
                        .map(|(w, segs, line)| (full(w), segs.clone(), *line, false)),
                );
            for (from, segs, line, glob) in refs {
                let to = match self.resolve(&from, &segs, 0) {
                    Target::Module(m) | Target::Item(m) => &self.modules[&m],
                    Target::External => continue,
                };
                if to != file {
                    let mut text = segs.join("::");
                    if glob {
                        text.push_str("::*");
                    }
                    edges
                        .entry(file.clone())
                        .or_default()
                        .entry(to.clone())
                        .or_insert((line, text));
                }
            }
            edges.entry(file.clone()).or_default();
        }
    }

    /// Where `segs`, written in module `from`, leads: the deepest module it names, then its
    /// first item, followed through re-exports to the module that defines it.
    fn resolve(&self, from: &ModPath, segs: &[String], depth: usize) -> Target {
        let Some(first) = segs.first() else {
            return Target::External;
        };
        let mut module = from.clone();
        let mut rest = &segs[1..];
        match first.as_str() {
            "crate" => module.clear(),
            "self" => {}
            "super" => {
                module.pop();
                while rest.first().map(String::as_str) == Some("super") {
                    module.pop();
                    rest = &rest[1..];
                }
            }
            name => {
                module.push(name.to_owned());
                if !self.modules.contains_key(&module) {
                    return Target::External;
                }
            }
        }
        for seg in rest {
            match self.locate(&module, seg, depth) {
                Some(Target::Module(m)) => module = m,
                Some(other) => return other,
                None => return Target::Item(module),
            }
        }
        Target::Module(module)
    }

    /// Where the item `name` of `module` is defined: here, or where a `use` here brings it
    /// from (a named import, else a glob that holds it); `None` when the scanner cannot tell.
    fn locate(&self, module: &ModPath, name: &str, depth: usize) -> Option<Target> {
        let mut child = module.clone();
        child.push(name.to_owned());
        if self.modules.contains_key(&child) {
            return Some(Target::Module(child));
        }
        if depth > 16 || self.defs.get(module).is_some_and(|d| d.contains(name)) {
            return Some(Target::Item(module.clone()));
        }
        if module.is_empty() {
            if let Some(defining) = self.macros.get(name) {
                return Some(Target::Item(defining.clone()));
            }
        }
        let uses = self.uses.get(module).map_or(&[][..], Vec::as_slice);
        if let Some(u) = uses.iter().find(|u| u.name.as_deref() == Some(name)) {
            return Some(self.resolve(module, &u.segs, depth + 1));
        }
        let mut external_glob = false;
        for u in uses.iter().filter(|u| u.name.is_none()) {
            match self.resolve(module, &u.segs, depth + 1) {
                Target::Module(glob) => {
                    if let Some(found) = self.locate(&glob, name, depth + 1) {
                        return Some(found);
                    }
                }
                Target::External => external_glob = true,
                Target::Item(_) => {}
            }
        }
        external_glob.then_some(Target::External)
    }
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// `a/b/../c` as `a/c`.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

/// Tarjan's strongly connected components.
fn strongly_connected(
    edges: &BTreeMap<String, BTreeMap<String, (usize, String)>>,
) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, (usize, String)>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flat_map(BTreeMap::keys) {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let low = s.low[v].min(s.low[w.as_str()]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w.as_str()) {
                let low = s.low[v].min(s.index[w.as_str()]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The most circles listed through one set of files.
const MAX_CIRCLES: usize = 200;

/// The circles within one component, each once: from its least file through files after it
/// (in `component`'s order) back to it; at most [`MAX_CIRCLES`].
fn elementary_cycles(
    edges: &BTreeMap<String, BTreeMap<String, (usize, String)>>,
    component: &[String],
) -> Vec<Vec<String>> {
    fn walk(
        edges: &BTreeMap<String, BTreeMap<String, (usize, String)>>,
        allowed: &BTreeSet<&str>,
        path: &mut Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) {
        let last = path.last().unwrap().clone();
        for next in edges[&last].keys() {
            if out.len() >= MAX_CIRCLES {
                return;
            }
            if *next == path[0] {
                let mut cycle = path.clone();
                cycle.push(next.clone());
                out.push(cycle);
            } else if allowed.contains(next.as_str()) && !path.contains(next) {
                path.push(next.clone());
                walk(edges, allowed, path, out);
                path.pop();
            }
        }
    }
    let mut out = Vec::new();
    for (k, start) in component.iter().enumerate() {
        let allowed: BTreeSet<&str> = component[k + 1..].iter().map(String::as_str).collect();
        walk(edges, &allowed, &mut vec![start.clone()], &mut out);
    }
    out
}
