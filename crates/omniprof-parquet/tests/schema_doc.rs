//! docs/parquet.md documents the schema the writer writes: under each table's heading, one
//! row per column, in file order, with the column's name, type and unit; and it states the
//! schema version.

use std::path::Path;

use omniprof_parquet::{SCHEMA_VERSION, TABLES};

fn page() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/parquet.md");
    std::fs::read_to_string(path).unwrap()
}

/// The (name, type, unit) of each column row under `## <table>`.
fn documented(page: &str, table: &str) -> Vec<(String, String, String)> {
    let heading = format!("\n## {table}\n");
    let start = page
        .find(&heading)
        .unwrap_or_else(|| panic!("docs/parquet.md has no `## {table}` section"));
    let section = &page[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (
                cells[1].trim_matches('`').to_owned(),
                cells[2].to_owned(),
                cells[3].to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_page_documents_every_column_of_every_table_with_its_type_and_unit() {
    let page = page();
    for table in TABLES {
        let expected: Vec<(String, String, String)> = table
            .columns
            .iter()
            .map(|c| {
                (
                    c.name.to_owned(),
                    c.ty.doc_name().to_owned(),
                    c.unit.to_owned(),
                )
            })
            .collect();
        assert_eq!(documented(&page, table.name), expected, "{}", table.name);
    }
}

#[test]
fn the_page_states_the_schema_version() {
    assert!(page().contains(&format!("**version {SCHEMA_VERSION}**")));
}
