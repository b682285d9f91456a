//! omniprof's CUPTI record decoding against the CUPTI headers installed here: `layout.c`,
//! compiled with them, prints the API version, every field's offset and size, and one filled
//! record of each kind; the decoder must read the same.
//!
//! Where the headers are looked for: [`omniprof_test_support::cupti::include_dirs`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use omniprof_cupti::{decode, is_known_version, Record, FIELDS};
use omniprof_test_support::cupti;

const CHECK: &str = "the CUPTI record layout check";

/// What `layout.c` printed.
struct Dump {
    version: u32,
    sizes: HashMap<String, usize>,
    fields: HashMap<(String, String), (usize, usize)>,
    records: HashMap<String, Vec<u8>>,
}

/// The dump, made once for both tests (they would race on one executable).
fn dump() -> Option<&'static Dump> {
    static DUMP: std::sync::OnceLock<Option<Dump>> = std::sync::OnceLock::new();
    DUMP.get_or_init(make_dump).as_ref()
}

fn make_dump() -> Option<Dump> {
    let exe = tempfile_dir().join("layout");
    cupti::compile(CHECK, "layout.c", &exe, None)?;
    let output = Command::new(&exe).output().expect("layout runs");
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let mut dump = Dump {
        version: 0,
        sizes: HashMap::new(),
        fields: HashMap::new(),
        records: HashMap::new(),
    };
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["version", v] => dump.version = v.parse().unwrap(),
            ["size", record, n] => {
                dump.sizes.insert(record.to_string(), n.parse().unwrap());
            }
            ["field", record, field, offset, size] => {
                dump.fields.insert(
                    (record.to_string(), field.to_string()),
                    (offset.parse().unwrap(), size.parse().unwrap()),
                );
            }
            ["record", record, bytes] => {
                let bytes = (0..bytes.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&bytes[i..i + 2], 16).unwrap())
                    .collect();
                dump.records.insert(record.to_string(), bytes);
            }
            other => panic!("unexpected line from layout.c: {other:?}"),
        }
    }
    Some(dump)
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("omniprof-cupti-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn every_field_omniprof_reads_sits_where_the_installed_headers_put_it() {
    let Some(dump) = dump() else { return };
    assert!(
        is_known_version(dump.version),
        "the installed CUPTI headers are API version {}, which omniprof does not accept: \
         check the layout and add it to KNOWN_VERSIONS",
        dump.version
    );
    let mut checked = 0;
    for (record, fields) in FIELDS {
        let size = dump.sizes[record];
        for field in fields {
            let key = (record.to_string(), field.name.to_string());
            let Some(&(offset, bytes)) = dump.fields.get(&key) else {
                panic!("layout.c prints no {record}.{}", field.name);
            };
            assert_eq!(
                (field.offset, field.size),
                (offset, bytes),
                "{record}.{} in CUPTI {}",
                field.name,
                dump.version
            );
            assert!(field.offset + field.size <= size);
            checked += 1;
        }
    }
    assert_eq!(checked, 61);
    assert_eq!(
        dump.fields.len(),
        checked,
        "layout.c prints fields omniprof does not read"
    );
}

#[test]
fn a_filled_record_of_each_kind_decodes_to_its_values() {
    let Some(dump) = dump() else { return };
    let decoded = |record: &str| decode(&dump.records[record]).unwrap();
    let Record::Kernel(k) = decoded("kernel") else {
        panic!("not a kernel")
    };
    assert_eq!(
        (k.start, k.end, k.device, k.context, k.stream),
        (1_000_000_001, 1_000_002_002, 1, 2, 7)
    );
    assert_eq!((k.grid, k.block), ([120, 2, 1], [256, 1, 1]));
    assert_eq!(
        (k.registers, k.shared_memory, k.correlation),
        (40, 12288, 31337)
    );
    assert_eq!((k.name_ptr, k.queued), (0x12_3456_7890, 999_999_999));

    let Record::Memcpy(m) = decoded("memcpy") else {
        panic!("not a memcpy")
    };
    assert_eq!((m.copy_kind, m.src_kind, m.dst_kind), (1, 2, 3));
    assert_eq!((m.bytes, m.start, m.end), (1 << 33, 5000, 6000));
    assert_eq!(
        (m.device, m.context, m.stream, m.correlation),
        (0, 1, 13, 77)
    );

    let Record::Memset(s) = decoded("memset") else {
        panic!("not a memset")
    };
    assert_eq!((s.value, s.bytes, s.start, s.end), (0, 4096, 7000, 7100));
    assert_eq!(
        (s.device, s.context, s.stream, s.correlation),
        (3, 4, 21, 78)
    );
    assert_eq!(s.memory_kind, 3);

    let Record::Api(a) = decoded("api") else {
        panic!("not an API call")
    };
    assert!(!a.driver);
    assert_eq!((a.cbid, a.start, a.end), (211, 100, 250));
    assert_eq!(
        (a.process, a.thread, a.correlation),
        (4242, 0xDEAD_BEEF, 31337)
    );

    let Record::Overhead(o) = decoded("overhead") else {
        panic!("not an overhead")
    };
    assert_eq!((o.kind, o.object_kind), (0x1_0000, 2));
    assert_eq!(
        (o.object[0], o.object[1], o.start, o.end),
        (4242, 4243, 300, 400)
    );

    let Record::Sync(y) = decoded("sync") else {
        panic!("not a sync")
    };
    assert_eq!(
        (y.sync_type, y.start, y.end, y.correlation),
        (3, 500, 900, 79)
    );
    assert_eq!((y.context, y.stream, y.event), (1, 7, u32::MAX));

    let Record::CudaEvent(v) = decoded("cuda_event") else {
        panic!("not a CUDA event")
    };
    assert_eq!((v.correlation, v.context, v.stream, v.event), (80, 1, 9, 3));

    let Record::ExternalCorrelation(e) = decoded("external") else {
        panic!("not an external correlation")
    };
    assert_eq!(
        (e.external_kind, e.external_id, e.correlation),
        (3, 1 << 40, 31337)
    );
}
