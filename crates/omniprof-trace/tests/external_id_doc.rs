//! docs/trace-format.md lists the activity types that carry no `External id` when linked to
//! no host op; the list must be the type table's.

use std::collections::BTreeSet;
use std::path::Path;

use omniprof_trace::ActivityType;

/// The names in the page's parenthesized list after `lead`.
fn documented(lead: &str) -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/trace-format.md");
    // The page wraps its lines; the list is read as one line.
    let page = std::fs::read_to_string(path).unwrap().replace('\n', " ");
    let start = page
        .find(lead)
        .unwrap_or_else(|| panic!("docs/trace-format.md has no `{lead}`"))
        + lead.len();
    let list = &page[start..start + page[start..].find(')').unwrap()];
    list.split(',')
        .map(|name| name.trim().trim_matches('`').to_owned())
        .collect()
}

#[test]
fn the_page_lists_exactly_the_types_without_an_external_id_of_their_own() {
    let table: BTreeSet<String> = ActivityType::ALL
        .iter()
        .filter(|t| !t.unlinked_external_id_is_own())
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(
        documented("except for device work and runtime or driver calls ("),
        table
    );
}
